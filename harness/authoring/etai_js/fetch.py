"""`etai suite fetch`: a manifest (manifest.py) materialised into suite folders, one per project
(``OUT/<project>/``: a suite's sandbox settings and dependencies are the suite's, one set each),
and ``OUT/suite-set.json`` naming every project's suite fetched there, so that `etai run --suite
OUT` runs them all as one benchmark (harness/session/suite_set.py).

Per project: its repository (cloned from its URL, or found in ``--mirror``), every session's
workspace rebuilt and its content hash checked, then the dependencies installed as a mined suite's
are (harness/sandbox/deps.py). Everything is built under ``OUT/.partial/<project>/`` and the suite
appears under its name by one rename when complete: a failure (exit 2 for a bad manifest, mirror or
commit) leaves no suite behind, and a fetch that was killed resumes there, skipping the sessions
it had built and verified."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from harness.authoring.etai_js import gitops, session
from harness.authoring.etai_js.manifest import LOCKFILES, Manifest, Project
from harness.authoring.mine import history
from harness.base.errors import InputError
from harness.base.progress import bar as progress_bar
from harness.runs.results import RunFolder, write_json_atomic, write_text_atomic
from harness.sandbox.deps import node_modules
from harness.session import suite_set

STAMP = ".etai-js.json"  # what a finished suite was built from


def fetch(
    m: Manifest, out: Path, *, only: str | None = None, mirror: Path | None = None,
    progress: bool = True, log: Callable[[str], None] = lambda msg: None,
) -> dict[str, Any]:  # fmt: skip
    """Materialise ``m`` under ``out``; returns {project: {"suite", "sessions", "built", "skipped"}}.
    ``out/suite-set.json`` then names every project of ``m`` finished there (those of earlier
    fetches with ``only`` too); a set of another manifest there is refused before anything is
    written."""
    if only is not None and only not in m.projects:
        raise InputError(f"no project {only!r} in {m.label}; known: {', '.join(m.projects)}",
                         where="--only")  # fmt: skip
    if mirror is not None and not mirror.is_dir():
        raise InputError("not a folder", where="--mirror")
    chosen = [p for name, p in m.projects.items() if only in (None, name)]
    rows = {p.name: [r for r in m.rows if r["project"] == p.name] for p in chosen}
    bar = progress_bar(sum(map(len, rows.values())), f"{m.label} sessions", enabled=progress,
                       unit="session")  # fmt: skip
    done = {}
    with RunFolder(out):  # one fetch at a time into a folder (a second is FolderBusy, exit 2)
        _own_set(m, Path(out))
        try:
            for p in chosen:
                done[p.name] = _project(m, p, rows[p.name], Path(out), mirror, bar, log)
        finally:
            bar.close()
        _write_set(m, Path(out))
    return done


def _own_set(m: Manifest, out: Path) -> None:
    """InputError where ``out`` holds the suite set of another manifest (or version, or subset)."""
    if suite_set.is_set(out) and suite_set.load_set(out).name != m.label:
        raise InputError(f"holds the suites of {suite_set.load_set(out).name}, not {m.label}: "
                         "choose another --out", where=str(out))  # fmt: skip


def _write_set(m: Manifest, out: Path) -> None:
    """suite-set.json: every project of ``m`` whose finished suite under ``out`` is stamped as this
    manifest has it, in the manifest's order."""
    members = [
        name for name, p in m.projects.items()
        if _read(out / name / STAMP) == _stamp(m, p, [r for r in m.rows if r["project"] == name])
    ]  # fmt: skip
    if members:
        write_text_atomic(out / suite_set.SET_FILE, suite_set.dump(m.label, members))


def _stamp(m: Manifest, p: Project, rows: list[dict]) -> dict[str, Any]:
    digest = hashlib.sha256(
        json.dumps([rows, p.url, p.suite], sort_keys=True).encode() + _lock_bytes(p)
    ).hexdigest()
    return {"manifest": m.label, "project": p.name, "sha256": digest}


def _lock_bytes(p: Project) -> bytes:
    return b"".join(f.encode() + (p.lockfile / f).read_bytes() for f in LOCKFILES
                    if (p.lockfile / f).is_file())  # fmt: skip


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _project(m, p: Project, rows, out: Path, mirror, bar, log) -> dict[str, Any]:
    final, stage = out / p.name, out / ".partial" / p.name
    stamp = _stamp(m, p, rows)
    result = {"suite": str(final), "sessions": len(rows), "built": 0, "skipped": 0}
    if final.exists():
        if _read(final / STAMP) != stamp:
            raise InputError(f"holds something other than {m.label}'s {p.name} as this manifest "
                             "has it: remove it or choose another --out", where=str(final))  # fmt: skip
        bar.update(len(rows))
        return {**result, "skipped": len(rows)}
    if stage.exists() and _read(stage / STAMP) != stamp:  # a stage of another manifest
        shutil.rmtree(stage)
    stage.mkdir(parents=True, exist_ok=True)
    write_json_atomic(stage / STAMP, stamp)
    records = stage / ".records"
    records.mkdir(exist_ok=True)
    try:
        repo = _repository(p, mirror, stage)
        for row in rows:
            sid = row["session_id"]
            if (stage / "workspaces" / sid).is_dir() and (records / f"{sid}.json").is_file():
                result["skipped"] += 1  # built and verified before a kill
            else:
                _session(repo, row, stage, records)
                result["built"] += 1
            bar.update(1)
        _finish(m, p, rows, stage, records, log)
        stage.rename(final)
    except Exception:
        if not (stage / "workspaces").is_dir():  # nothing verified to resume from
            shutil.rmtree(stage, ignore_errors=True)
        raise
    finally:
        try:
            stage.parent.rmdir()  # .partial, once no project is left in it
        except OSError:
            pass
    return result


def _repository(p: Project, mirror: Path | None, stage: Path) -> Path:
    """A git directory holding the project's history: from ``mirror`` (a bundle, a bare git dir or
    a clone named after the project or its repository), else a bare clone of its URL."""
    if mirror is None:
        return gitops.clone(p.url, stage / ".repo.git")
    names = dict.fromkeys([p.name, p.url.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git")])
    for n in names:
        for cand in (mirror / f"{n}.bundle", mirror / f"{n}.git", mirror / n):
            if cand.exists():
                return history.open_repo(cand)
    looked = ", ".join(f"{n}.bundle, {n}.git, {n}/" for n in names)
    raise InputError(f"no history of {p.name} (looked for {looked})", where=str(mirror))


def _session(repo: Path, row: dict, stage: Path, records: Path) -> None:
    sid = row["session_id"]
    if not history.has(repo, row["base_commit"]) or not history.has(repo, row["fix_commit"]):
        gitops.fetch_commit(repo, row["base_commit"])  # a clone's origin may still have it
        gitops.fetch_commit(repo, row["fix_commit"])
    try:
        ws, held = session.build(repo, row, stage / ".build" / sid)
        got = session.tree_sha256(ws, held)
        if got != row["workspace_sha256"]:
            raise InputError(f"the built workspace's sha256 is {got}, the manifest says "
                             f"{row['workspace_sha256']}", where=f"session {sid}")  # fmt: skip
        record = session.restore(row["gold"], ws, where=f"session {sid}")
    except Exception:
        shutil.rmtree(stage / ".build" / sid, ignore_errors=True)  # never kept unverified
        raise
    shutil.rmtree(stage / "held_out" / sid, ignore_errors=True)  # a kill's leftover
    if held is not None:
        (stage / "held_out").mkdir(exist_ok=True)
        held.rename(stage / "held_out" / sid)
    write_json_atomic(records / f"{sid}.json", record)
    (stage / "workspaces").mkdir(exist_ok=True)
    ws.rename(stage / "workspaces" / sid)  # last: a workspace under its name is verified
    shutil.rmtree(stage / ".build" / sid)


def _finish(m: Manifest, p: Project, rows, stage: Path, records: Path, log) -> None:
    """Dependencies, suite.yaml and sessions.jsonl; then the build's own files go."""
    deps = stage / "deps"
    deps.mkdir(exist_ok=True)
    for f in LOCKFILES:
        if (p.lockfile / f).is_file():
            shutil.copyfile(p.lockfile / f, deps / f)
    node_modules(deps, log=log)  # installed once by digest, as every mined suite's are
    sandbox = {**p.suite.get("sandbox", {}), "node_modules": "deps"}
    meta = {
        "name": f"{m.label}-{p.name}",
        "description": f"{m.label}: {len(rows)} sessions of {p.name} ({p.url}, {p.license}), "
        "materialised by `etai suite fetch`.",
        "defaults": p.suite.get("defaults") or {},
        "sandbox": sandbox,
    }
    write_text_atomic(stage / "suite.yaml", yaml.safe_dump(meta, sort_keys=False))
    lines = [
        json.dumps(_read(records / f"{r['session_id']}.json"), ensure_ascii=False) for r in rows
    ]
    write_text_atomic(stage / "sessions.jsonl", "".join(x + "\n" for x in lines))
    for leftover in (records, stage / ".build", stage / ".repo.git"):
        shutil.rmtree(leftover, ignore_errors=True)
