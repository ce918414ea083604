"""The etai-js manifest format (docs/guides/etai-js.md): what it holds, how a version is found, and
the checks that run before anything is cloned or written.

``suites/etai-js/versions.json`` names each version; a version's folder (``suites/etai-js/1/``)
holds ``manifest.json`` (format, version, one entry per project), ``projects/<name>/`` (the
project's package.json and lockfile) and ``rows.jsonl`` (one session per line). A released
version carries the sha256 of its folder in versions.json, and is refused if a byte of it changed:
a new version is a new folder, so a result on ``etai-js@1`` always means the same sessions.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.base.errors import InputError
from harness.runs.results import write_text_atomic
from harness.suites.load import BUNDLED

FORMAT = "etai-js"
HOME = BUNDLED / FORMAT
LOCKFILES = ("package.json", "package-lock.json", "npm-shrinkwrap.json", ".npmrc")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_SHA = re.compile(r"[0-9a-f]{40}")

# Every row's keys and their JSON types (pass_to_pass: the test ids; a row of version 1 may hold
# their count instead, as the mine recorded them then: COUNTED_P2P).
ROW_KEYS: dict[str, tuple[type, ...]] = {
    "session_id": (str,),
    "project": (str,),
    "base_commit": (str,),
    "base_date": (str,),
    "fix_commit": (str,),
    "fix_date": (str,),
    "subject": (str,),
    "test_patch": (str,),
    "held_out_files": (list,),
    "held_out_patch": (str,),
    "reference": (list,),
    "instruction": (str,),
    "intent": (str,),
    "held_out": (list,),
    "fail_to_pass": (list,),
    "pass_to_pass": (list, int),
    "gold": (dict,),
    "workspace_sha256": (str,),
}
# The versions whose rows may give PASS_TO_PASS as a count. A released version never changes, so
# version 1 keeps its counts; every later version lists the test ids, as SWE-bench rows do.
COUNTED_P2P = (1,)


def p2p_problem(value: Any, version: int) -> str | None:
    """Why ``value`` is not a row's pass_to_pass in ``version``, or None."""
    if isinstance(value, list):
        bad = [x for x in value if not isinstance(x, str)]
        return f"pass_to_pass: {len(bad)} item(s) not a test id (a string)" if bad else None
    if isinstance(value, int) and not isinstance(value, bool):
        if version in COUNTED_P2P:
            return None
        return (
            f"pass_to_pass: a count ({value}); rows of version {version} list the PASS_TO_PASS "
            "test ids (only version 1 rows may give their count)"
        )
    return "pass_to_pass: must be the list of PASS_TO_PASS test ids"


@dataclass(frozen=True)
class Project:
    name: str
    url: str
    license: str
    lockfile: Path  # the folder holding package.json and its lockfile
    suite: dict[str, Any]  # suite.yaml's defaults and sandbox (env, timeout_s, memory_mb)


@dataclass(frozen=True)
class Manifest:
    version: int
    folder: Path
    projects: dict[str, Project]
    rows: list[dict[str, Any]] = field(repr=False)
    subset: str | None = (
        None  # "lite": the rows of its lite subset (harness/authoring/etai_js/lite.py)
    )

    @property
    def label(self) -> str:
        return f"{FORMAT}@{self.version}" + (f"-{self.subset}" if self.subset else "")


def find(name: str | Path) -> Path:
    """A version folder: ``etai-js`` (the newest), ``etai-js@N``, or a folder holding
    manifest.json (or versions.json, then its newest version)."""
    text = str(name)
    if text == FORMAT or text.startswith(FORMAT + "@"):
        version = text.partition("@")[2]
        return _version_folder(HOME, version or None, where=text)
    p = Path(name)
    if (p / "manifest.json").is_file():
        return p.resolve()
    if (p / "versions.json").is_file():
        return _version_folder(p, None, where=text)
    raise InputError(
        f"not a manifest: neither {FORMAT}[@N] nor a folder with manifest.json", where=text
    )


def versions(home: Path) -> dict[str, dict]:
    try:
        got = json.loads((home / "versions.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InputError(f"unreadable: {e}", where=str(home / "versions.json")) from None
    if not isinstance(got, dict) or not all(str(k).isdigit() for k in got):
        raise InputError("must map version numbers to entries", where=str(home / "versions.json"))
    return got


def _version_folder(home: Path, version: str | None, *, where: str) -> Path:
    known = versions(home)
    if version is None:
        version = max(known, key=int, default=None)
    if version not in known or not (home / version / "manifest.json").is_file():
        raise InputError(
            f"no such version; known: {', '.join(sorted(known, key=int))}", where=where
        )
    return (home / version).resolve()


def folder_sha256(folder: Path) -> str:
    """The digest a released version is frozen under: every file's path and content."""
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            rel = p.relative_to(folder).as_posix()
            h.update(rel.encode() + b"\0" + hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def frozen_sha256(folder: Path) -> str | None:
    """The sha256 versions.json gives the version in ``folder`` (None: a draft, or no versions.json)."""
    home = folder.parent
    if not (home / "versions.json").is_file():
        return None
    entry = versions(home).get(folder.name) or {}
    return entry.get("sha256")


def release(folder: Path) -> str:
    """Freeze the draft version in ``folder``: its sha256 goes into versions.json beside it (the
    manifest is loaded first, so a version with a problem is never released)."""
    folder = Path(folder).resolve()
    load(folder)
    path = folder.parent / "versions.json"
    known = versions(folder.parent) if path.is_file() else {}
    if (known.get(folder.name) or {}).get("sha256"):
        raise InputError("already released", where=str(folder))
    digest = folder_sha256(folder)
    known[folder.name] = {"sha256": digest}
    write_text_atomic(
        path, json.dumps(dict(sorted(known.items(), key=lambda kv: int(kv[0])))) + "\n"
    )
    return digest


def load(name: str | Path) -> Manifest:
    """The manifest, every problem of every row named in one InputError."""
    folder = find(name)
    frozen = frozen_sha256(folder)
    if frozen is not None and folder_sha256(folder) != frozen:
        raise InputError(
            "a released version's files changed (a new version is a new folder: a released one's "
            "sessions never change)",
            where=str(folder),
        )
    try:
        meta = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except ValueError as e:
        raise InputError(f"not JSON: {e}", where=str(folder / "manifest.json")) from None
    problems: list[str] = []
    if meta.get("format") != FORMAT or not isinstance(meta.get("version"), int):
        problems.append(f"manifest.json: must say format {FORMAT!r} and a whole version number")
    projects = {}
    for name_, p in (meta.get("projects") or {}).items():
        lock = folder / "projects" / name_
        bad = [k for k in ("url", "license") if not isinstance(p.get(k), str) or not p[k]]
        if not _NAME.fullmatch(name_) or bad or not isinstance(p.get("suite"), dict):
            problems.append(f"project {name_}: needs a name, url, license and suite")
        elif not (lock / "package.json").is_file():
            problems.append(f"project {name_}: projects/{name_}/package.json is missing")
        else:
            projects[name_] = Project(name_, p["url"], p["license"], lock, p["suite"])
    version = meta.get("version") if isinstance(meta.get("version"), int) else 0
    rows = _rows(folder / "rows.jsonl", projects, problems, version)
    if problems:
        raise InputError(
            f"{len(problems)} problem(s):\n  " + "\n  ".join(problems), where=str(folder)
        )
    return Manifest(meta["version"], folder, projects, rows)


def _rows(
    path: Path, projects: dict[str, Project], problems: list[str], version: int
) -> list[dict]:
    rows, seen = [], set()
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    for n, line in enumerate(lines, 1):
        try:
            row = json.loads(line)
        except ValueError as e:
            problems.append(f"rows.jsonl line {n}: not JSON ({e})")
            continue
        where = f"rows.jsonl line {n} ({row.get('session_id') if isinstance(row, dict) else '?'})"
        if not isinstance(row, dict):
            problems.append(f"{where}: must be an object")
            continue
        bad = [k for k, t in ROW_KEYS.items() if not isinstance(row.get(k), t)]
        bad += [k for k in ("base_commit", "fix_commit") if not _SHA.fullmatch(str(row.get(k)))]
        if bad:
            problems.append(f"{where}: missing or mistyped: {', '.join(sorted(set(bad)))}")
        elif p2p := p2p_problem(row["pass_to_pass"], version):
            problems.append(f"{where}: {p2p}")
        elif row["project"] not in projects:
            problems.append(f"{where}: project {row['project']} is not in manifest.json")
        elif row["session_id"] in seen or row["gold"].get("session_id") != row["session_id"]:
            problems.append(f"{where}: session_id is repeated or differs from gold's")
        else:
            seen.add(row["session_id"])
            rows.append(row)
    if not lines:
        problems.append("rows.jsonl: no session")
    return rows
