"""The git side of mining: a repository (a folder or a bundle), its candidate commits and their files.

A candidate is a commit on the first-parent line (a merged pull request counts as one change,
against the line it was merged into) that changes at least one test file and at least one source
file. Its fix is the change to the source files alone; its tests are the change to the test files;
anything else it touches (docs, changelog, typings, manifest) is neither given to the agent nor
asked of it.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from harness.base.errors import InputError
from harness.grading.verify import is_protected
from harness.sandbox.image import cache_dir
from harness.session.workspace import SKIP_DIRS


def _named_as_test(name: str) -> bool:
    # The guard's name rule (a script named *.test.* or *.spec.*) without its config names.
    return is_protected(name) and re.search(r"\.(test|spec)\.", name) is not None


def is_test_path(rel: str) -> bool:
    """A file of the tests (test files, helpers, fixtures, snapshots), by place or by name: the
    guard's rule, without the config files it also protects (package.json, jest.config.*, ...)."""
    parts = PurePosixPath(rel).parts
    return (len(parts) > 1 and is_protected(rel)) or _named_as_test(parts[-1])


_SCRIPTS = (".js", ".ts", ".mjs", ".cjs", ".jsx", ".tsx")


def is_test_script(rel: str) -> bool:
    """A script among the tests' paths: one Jest may run as a test file. Which of them it runs is
    the project's Jest config's say (testMatch or testRegex, roots, ignore patterns: ``test/*.ts``
    for one project, only ``*.test.js`` for another), so the mine asks Jest in the sandbox."""
    return is_test_path(rel) and rel.endswith(_SCRIPTS)


def _git(repo: Path, *args: str, text: bool = True) -> str | bytes:
    r = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=text)
    if r.returncode != 0:
        err = r.stderr if text else r.stderr.decode(errors="replace")
        raise InputError(f"git {' '.join(args[:2])}: {err.strip()[:500]}", where=str(repo))
    return r.stdout


def open_repo(source: str | Path) -> Path:
    """A git directory for ``source``: the folder itself, or a bundle cloned (bare) once into the
    ETAI cache, keyed by the bundle's digest."""
    p = Path(source).resolve()
    if p.is_dir():
        _git(p, "rev-parse", "--git-dir")
        return p
    if not p.is_file():
        raise InputError("no such folder or git bundle", where=str(source))
    digest = hashlib.sha256(p.read_bytes()).hexdigest()[:16]
    target = cache_dir() / "bundles" / f"{p.stem}-{digest}.git"
    if not (target / "HEAD").is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".tmp")
        subprocess.run(["rm", "-rf", str(tmp)], check=False)
        r = subprocess.run(
            ["git", "clone", "-q", "--bare", str(p), str(tmp)], capture_output=True, text=True
        )
        if r.returncode != 0:
            raise InputError(f"not a git bundle: {r.stderr.strip()[:300]}", where=str(source))
        tmp.rename(target)
    return target


@dataclass(frozen=True)
class Change:
    path: str
    status: str  # git's letter: A added, M modified, D deleted


@dataclass(frozen=True)
class Commit:
    sha: str
    parent: str
    date: str  # author date, ISO 8601
    author: str  # a digest of the author's name: provenance without the name
    subject: str
    body: str
    changes: tuple[Change, ...]

    def tests(self) -> list[Change]:
        return [c for c in self.changes if is_test_path(c.path)]

    def test_scripts(self) -> list[str]:
        """The scripts among its tests that are there after it (Jest may run them)."""
        return sorted(c.path for c in self.tests() if is_test_script(c.path) and c.status != "D")

    def sources(self, globs: tuple[str, ...]) -> list[Change]:
        return [c for c in self.changes if not is_test_path(c.path) and in_globs(c.path, globs)]


def in_globs(rel: str, globs: tuple[str, ...]) -> bool:
    """A path under one of ``globs``: a folder (``lib``, ``src/``), a file, or a pattern (``*.js``)."""
    for g in globs:
        g = g.rstrip("/")
        if rel == g or rel.startswith(g + "/") or fnmatch.fnmatch(rel, g):
            return True
    return False


def commits(repo: Path, rev_range: str) -> list[Commit]:
    """The first-parent commits of ``rev_range`` (``A..B`` or a single revision: its history),
    oldest first, each with its changes against its first parent (root commits left out)."""
    sep, end = "\x1f", "\x1e"
    fmt = sep.join(["%H", "%P", "%aI", "%an", "%s", "%b"]) + end
    out = _git(repo, "log", "--first-parent", "--reverse", f"--format={fmt}", rev_range, "--")
    found = []
    for rec in str(out).split(end):
        rec = rec.strip("\n")
        if not rec:
            continue
        sha, parents, date, author, subject, body = rec.split(sep, 5)
        if not parents:
            continue
        parent = parents.split()[0]
        found.append(
            Commit(
                sha=sha,
                parent=parent,
                date=date,
                author=hashlib.sha256(author.encode()).hexdigest()[:12],
                subject=subject.strip(),
                body=body.strip(),
                changes=tuple(_changes(repo, parent, sha)),
            )
        )
    return found


def has(repo: Path, rev: str) -> bool:
    """Whether ``rev`` names a commit of the repository."""
    r = subprocess.run(
        ["git", "-C", str(repo), "cat-file", "-e", f"{rev}^{{commit}}"], capture_output=True
    )
    return r.returncode == 0


def depth(repo: Path, rev: str) -> int:
    """How many commits ``rev``'s first-parent line holds, itself included."""
    return int(str(_git(repo, "rev-list", "--first-parent", "--count", rev, "--")))


def _changes(repo: Path, parent: str, sha: str) -> list[Change]:
    out = str(_git(repo, "diff", "--no-renames", "--name-status", "-z", parent, sha, "--"))
    items = out.split("\0")
    return [
        Change(path, status[0])
        for status, path in zip(items[0::2], items[1::2], strict=False)
        if status and path
    ]


def read(repo: Path, rev: str, rel: str) -> bytes:
    return _git(repo, "show", f"{rev}:{rel}", text=False)  # type: ignore[return-value]


def export_tree(repo: Path, rev: str, dest: Path) -> list[str]:
    """The files of ``rev`` written under ``dest`` (node_modules and .git never; links and
    submodules left out: a workspace holds plain files). Returns the files whose content the
    repository lacks (a snapshot may hold the names of its largest files alone), left out too."""
    listing = _git(repo, "ls-tree", "-r", "-z", "--full-tree", rev, text=False)
    files: list[tuple[str, str]] = []
    for entry in listing.split(b"\0"):  # type: ignore[union-attr]
        if not entry:
            continue
        meta, _, name = entry.partition(b"\t")
        mode, kind, sha = meta.decode().split()
        rel = name.decode("utf-8", errors="surrogateescape")
        parts = PurePosixPath(rel).parts
        if kind == "blob" and mode in ("100644", "100755") and not SKIP_DIRS & set(parts):
            if ".." not in parts:
                files.append((sha, rel))
    # One git process for every blob, in order: "<sha> blob <size>\n<bytes>\n" or "<sha> missing".
    batch = "".join(f"{sha}\n" for sha, _ in files).encode()
    r = subprocess.run(
        ["git", "-C", str(repo), "cat-file", "--batch"], input=batch, capture_output=True
    )
    if r.returncode != 0:
        raise InputError(
            f"git cat-file: {r.stderr.decode(errors='replace')[:500]}", where=str(repo)
        )
    out, at, missing = r.stdout, 0, []
    for _sha, rel in files:
        end = out.index(b"\n", at)
        header = out[at:end].split()
        at = end + 1
        if header[-1] == b"missing":
            missing.append(rel)
            continue
        size = int(header[2])
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(out[at : at + size])
        at += size + 1
    return missing
