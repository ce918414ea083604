"""Manifest rows from a mined suite (the folder `etai suite mine` writes), so the benchmark is built
from mines: each kept session becomes a row (harness/authoring/etai_js/manifest.py), checked by
rebuilding its workspace from the repository before it is written."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml

from harness.authoring.etai_js import gitops, manifest, session
from harness.authoring.mine import history
from harness.base.errors import InputError
from harness.runs.results import write_text_atomic
from harness.session.workspace import workspace_paths
from harness.suites.load import load_suite


def _copy_files(src: Path, rels: list[str], dst: Path) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    for rel in rels:
        if (src / rel).is_file():
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src / rel, dst / rel)


def _fresh(folder: Path) -> Path:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def row(
    repo: Path, mined: Path, sess: dict[str, Any], held_ids: list[str], tmp: Path, version: int = 1
) -> dict:
    """One kept session of ``mined`` as a row of manifest ``version``: PASS_TO_PASS as the mined
    session lists it; a count (what the mine recorded before it listed the ids) only in a version
    that accepts one (manifest.COUNTED_P2P), else InputError naming the session."""
    sid, prov = sess["session_id"], sess["provenance"]
    p2p = sess.get("pass_to_pass", [])
    if problem := manifest.p2p_problem(p2p, version):
        raise InputError(f"the mined session's {problem}", where=sid)
    ws = mined / sess.get("workspace", f"workspaces/{sid}")
    held = mined / sess["held_out_tests"] if sess.get("held_out_tests") else None
    # Siblings named a/ and b/, so the patches read as git's own do (a/x, b/x).
    base, work = _fresh(tmp / "ws" / "a"), _fresh(tmp / "ws" / "b")
    history.export_tree(repo, prov["parent"], base)
    shutil.copytree(ws, work, dirs_exist_ok=True)
    held_files = [rel for rel, _ in workspace_paths(held)] if held else []
    held_patch = ""
    if held:
        pre, post = _fresh(tmp / "held" / "a"), _fresh(tmp / "held" / "b")
        _copy_files(ws, held_files, pre)
        shutil.copytree(held, post, dirs_exist_ok=True)
        held_patch = gitops.diff(pre, post)
    return {
        "session_id": sid,
        "project": prov["repo"],
        "base_commit": prov["parent"],
        "base_date": gitops.author_date(repo, prov["parent"]),
        "fix_commit": prov["commit"],
        "fix_date": prov["date"],
        "subject": prov["subject"],
        "test_patch": gitops.diff(base, work),
        "held_out_files": held_files,
        "held_out_patch": held_patch,
        "reference": [
            {k: st["tool_args"][k] for k in ("file", "old", "new")}
            for st in sess["execution_trace"]
            if st["tool_called"] == "file_edit"
        ],
        "instruction": sess["user_instruction"],
        "intent": sess["intent"],
        "held_out": held_ids,
        "fail_to_pass": sess.get("fail_to_pass", []),
        "pass_to_pass": p2p,
        "gold": session.elide(sess),
        "workspace_sha256": session.tree_sha256(ws, held),
    }


def project_entry(mined: Path, *, url: str, license: str) -> dict[str, Any]:
    meta = yaml.safe_load((mined / "suite.yaml").read_text(encoding="utf-8")) or {}
    sandbox = {k: v for k, v in (meta.get("sandbox") or {}).items() if k != "node_modules"}
    return {"url": url, "license": license,
            "suite": {"defaults": meta.get("defaults") or {}, "sandbox": sandbox}}  # fmt: skip


def add(
    version_dir: Path, mined: Path, source: str | Path, *, url: str, license: str,
    version: int = 1, log=lambda m: None,
) -> list[str]:  # fmt: skip
    """Add (or replace) the sessions of ``mined`` in the manifest version at ``version_dir``
    (created if new), with the project's lockfile; returns their ids. A released version is
    refused. Each row is rebuilt from ``source`` and its hash compared before anything is written."""
    version_dir, mined = Path(version_dir), Path(mined)
    if manifest.frozen_sha256(version_dir.resolve()) is not None:
        raise InputError(
            "a released version never changes: add to a new version", where=str(version_dir)
        )
    suite = load_suite(mined)  # the mined suite, checked as a run would load it
    repo = history.open_repo(source)
    kept = [json.loads(x) for x in (mined / "commits.jsonl").read_text().splitlines()]
    held = {r["session"]["session_id"]: (r.get("held_out") or {}).get("tests", [])
            for r in kept if r.get("verdict") == "kept"}  # fmt: skip
    meta_path = version_dir / "manifest.json"
    meta = (json.loads(meta_path.read_text()) if meta_path.is_file()
            else {"format": manifest.FORMAT, "version": version, "projects": {}})  # fmt: skip
    rows = []
    with tempfile.TemporaryDirectory(prefix="etai-js-") as t:
        tmp = Path(t)
        for s in suite.sessions:
            if not isinstance(s.raw.get("provenance"), dict):
                raise InputError("not a mined session (no provenance)", where=s.session_id)
            r = row(repo, mined, s.raw, held.get(s.session_id, []), tmp, meta["version"])
            ws, held_dir = session.build(repo, r, tmp / "check")
            if session.tree_sha256(ws, held_dir) != r["workspace_sha256"]:
                raise InputError("the row does not rebuild the mined workspace", where=s.session_id)
            if session.restore(r["gold"], ws, where=s.session_id) != s.raw:
                raise InputError("the gold record does not round-trip", where=s.session_id)
            rows.append(r)
            log(f"{s.session_id}: row written")
    if not rows:
        raise InputError("the mined suite holds no session", where=str(mined))
    name = rows[0]["project"]
    meta["projects"][name] = project_entry(mined, url=url, license=license)
    meta["projects"] = dict(sorted(meta["projects"].items()))
    lock = version_dir / "projects" / name
    _copy_files(mined / "deps", list(manifest.LOCKFILES), lock)
    ids = {r["session_id"] for r in rows}
    path = version_dir / "rows.jsonl"
    old = [json.loads(x) for x in path.read_text().splitlines()] if path.is_file() else []
    merged = sorted([r for r in old if r["session_id"] not in ids] + rows,
                    key=lambda r: (r["project"], r["fix_date"], r["session_id"]))  # fmt: skip
    write_text_atomic(meta_path, json.dumps(meta, indent=2) + "\n")
    write_text_atomic(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in merged))
    return sorted(ids)
