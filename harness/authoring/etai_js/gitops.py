"""The git commands the manifest needs beyond the mine's (harness/authoring/mine/history.py): a
bare clone, a fetch of one commit, a diff between two folders and its application to a folder.

Patches are made and applied by git itself (``diff --no-index --binary``, ``apply``), the tool whose
format the rows store, rather than by a diff library of our own: binary files, modes and files
without a final newline round-trip exactly."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from harness.base.errors import InputError


def _env(cwd: Path) -> dict[str, str]:
    # Never the repository around the folder (a suite under runs/ sits inside this one): git apply
    # in a work tree would take paths relative to its top.
    return {**os.environ, "GIT_CEILING_DIRECTORIES": str(cwd.resolve().parent)}


def git(cwd: Path, *args: str, where: str, ok=(0,), stdin: bytes | None = None) -> bytes:
    r = subprocess.run(["git", *args], cwd=cwd, input=stdin, capture_output=True, env=_env(cwd))
    if r.returncode not in ok:
        err = r.stderr.decode(errors="replace").strip()
        raise InputError(f"git {args[0]}: {err[-600:] or f'exit {r.returncode}'}", where=where)
    return r.stdout


def diff(pre: Path, post: Path) -> str:
    """The patch that turns folder ``pre`` into folder ``post`` (paths relative to each)."""
    parent = pre.parent
    if post.parent != parent:
        raise ValueError("pre and post must be siblings")
    out = git(
        parent, "-c", "core.quotePath=false", "diff", "--no-index", "--binary", "--no-renames",
        "--no-prefix", "--full-index", pre.name, post.name,
        where=str(parent), ok=(0, 1),
    )  # fmt: skip
    return out.decode("utf-8", errors="surrogateescape")


def apply(folder: Path, patch: str, *, where: str) -> None:
    """``patch`` (from ``diff``) applied in ``folder``; InputError naming ``where`` if it does not apply."""
    if patch:
        git(folder, "apply", "-p1", "--whitespace=nowarn", "-", where=where,
            stdin=patch.encode("utf-8", errors="surrogateescape"))  # fmt: skip


def author_date(repo: Path, rev: str) -> str:
    return git(repo, "log", "-1", "--format=%aI", rev, "--", where=str(repo)).decode().strip()


def clone(url: str, target: Path) -> Path:
    """A bare clone of ``url`` at ``target`` (kept when present: a resumed fetch clones once)."""
    if (target / "HEAD").is_file():
        return target
    tmp = target.with_name(target.name + ".tmp")
    subprocess.run(["rm", "-rf", str(tmp)], check=False)
    target.parent.mkdir(parents=True, exist_ok=True)
    git(target.parent, "clone", "-q", "--bare", url, tmp.name, where=url)
    tmp.rename(target)
    return target


def fetch_commit(repo: Path, sha: str) -> bool:
    """Ask the clone's origin for one commit a branch no longer reaches; whether it came."""
    r = subprocess.run(
        ["git", "-C", str(repo), "fetch", "-q", "origin", sha], capture_output=True, env=_env(repo)
    )
    return r.returncode == 0
