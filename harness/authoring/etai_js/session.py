"""One manifest row, both ways: the row's parts (its content hash, the gold record with the files
it read left out) from a mined session, and the session's workspace, held-out tests and record
rebuilt from the row and the project's repository.

A row holds no third-party source tree: the workspace is the base commit's tree (from the
project's repository) with ``test_patch``; the held-out tests are those workspace files with
``held_out_patch``; the gold record's ``file_read`` results keep each file's sha256 and length in
place of its text, put back from the rebuilt workspace."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

from harness.authoring.etai_js import gitops
from harness.authoring.mine import history
from harness.base.errors import InputError
from harness.session.workspace import workspace_paths


def tree_sha256(workspace: Path, held_out: Path | None) -> str:
    """``workspace_sha256``: each file the sandbox receives (workspace_paths), path and content,
    then each held-out test file."""
    h = hashlib.sha256()
    for label, folder in (("workspace", workspace), ("held_out", held_out)):
        for rel, p in workspace_paths(folder) if folder is not None else ():
            h.update(f"{label}/{rel}".encode() + b"\0" + hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()


def elide(session: dict[str, Any]) -> dict[str, Any]:
    """The session record with every file_read's text replaced by its sha256 and length."""
    trace = []
    for st in session["execution_trace"]:
        res = st.get("execution_result") or {}
        if st["tool_called"] == "file_read" and isinstance(res.get("content"), str):
            content = {"sha256": _sha(res["content"]), "chars": len(res["content"])}
            st = {**st, "execution_result": {**res, "content": content}}
        trace.append(st)
    return {**session, "execution_trace": trace}


def restore(gold: dict[str, Any], workspace: Path, *, where: str) -> dict[str, Any]:
    """``elide`` undone from the rebuilt workspace: each read's text as the trace had the file
    then (edits and writes before it applied), checked against its sha256."""
    texts: dict[str, str] = {}
    trace = []
    for st in gold["execution_trace"]:
        args, res = st["tool_args"], dict(st.get("execution_result") or {})
        f = args.get("file")
        if f is not None and f not in texts and (workspace / f).is_file():
            texts[f] = (workspace / f).read_bytes().decode("utf-8", "replace")
        if st["tool_called"] == "file_read" and isinstance(res.get("content"), dict):
            text = texts.get(f, "")[: res["content"]["chars"]]
            if _sha(text) != res["content"]["sha256"]:
                raise InputError(
                    f"step {st['step']} read {f}, whose text in the built workspace is not the "
                    "one recorded",
                    where=where,
                )
            res["content"] = text
        elif st["tool_called"] == "file_edit" and res.get("status") == "ok" and f in texts:
            n = -1 if args.get("all") else 1
            texts[f] = texts[f].replace(args["old"], args["new"], n)
        elif st["tool_called"] == "file_write":
            texts[f] = args["content"]
        trace.append({**st, "execution_result": res})
    return {**gold, "execution_trace": trace}


def build(repo: Path, row: dict[str, Any], dest: Path) -> tuple[Path, Path | None]:
    """The row's workspace (and held-out folder) under ``dest``, from ``repo``: the base commit's
    tree as the mine exports it, the test patch, the held-out patch. InputError naming the session
    when a commit is missing, a file's content is absent or a patch does not apply."""
    sid = row["session_id"]
    for key in ("base_commit", "fix_commit"):
        if not history.has(repo, row[key]):
            raise InputError(f"{key} {row[key]} is not in the repository {repo}", where=sid)
    shutil.rmtree(dest, ignore_errors=True)
    ws = dest / "workspace"
    ws.mkdir(parents=True)
    absent = history.export_tree(repo, row["base_commit"], ws)
    if absent:
        raise InputError(
            f"the repository lacks the content of {len(absent)} file(s) of {row['base_commit'][:12]} "
            f"(e.g. {absent[0]}): a damaged or partial mirror",
            where=sid,
        )
    gitops.apply(ws, row["test_patch"], where=f"{sid}: test_patch")
    if not row["held_out_files"]:
        return ws, None
    held = dest / "held_out"
    held.mkdir()
    for rel in row["held_out_files"]:
        if (ws / rel).is_file():
            (held / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ws / rel, held / rel)
    gitops.apply(held, row["held_out_patch"], where=f"{sid}: held_out_patch")
    return ws, held
