"""A suite set: a folder of suites (or of their run folders) taken as one benchmark.

A suite's sandbox settings and dependency folder belong to the whole suite (suite.yaml), so a
benchmark of several projects, each with its own lockfile, comes as one suite per project
(`etai suite fetch` writes ``OUT/<project>/``). ``OUT/suite-set.json`` names them:

    {"format": "etai-suite-set", "name": "etai-js@1", "members": ["commander", "dayjs"]}

`etai run --suite OUT` runs every member, each in its own sandbox profile, into
``RUN/<member>/`` and writes the same file there, naming the run folders; `etai report RUN` and
`etai gate RUN` read those and pool their rows, clustered by project (reports/_sets.py). Members
are plain folder names inside the set's folder. This module reads and writes the file's text;
whoever writes it writes it atomically.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from harness.base.errors import InputError

SET_FILE = "suite-set.json"
FORMAT = "etai-suite-set"
_MEMBER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]*")


@dataclass(frozen=True)
class SuiteSet:
    name: str
    path: Path  # the folder holding suite-set.json
    members: tuple[str, ...]  # folder names inside ``path``

    def folder(self, member: str) -> Path:
        return self.path / member


def is_set(path: str | Path) -> bool:
    return (Path(path) / SET_FILE).is_file()


def dump(name: str, members: list[str]) -> str:
    """The file's text for ``members`` (checked as load_set checks them)."""
    _check(name, members, where=SET_FILE)
    return json.dumps({"format": FORMAT, "name": name, "members": list(members)}, indent=2) + "\n"


def load_set(path: str | Path) -> SuiteSet:
    """The set in folder ``path``; InputError naming the file for anything malformed. Whether each
    member exists and is a suite (or a run) is the caller's to check: a run set is written before
    its members have run."""
    folder = Path(path)
    f = folder / SET_FILE
    try:
        obj = json.loads(f.read_text(encoding="utf-8"))
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror or e}", where=str(f)) from None
    except (ValueError, UnicodeDecodeError) as e:
        raise InputError(f"not JSON: {e}", where=str(f)) from None
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise InputError(f"must be an object with format {FORMAT!r}", where=str(f))
    unknown = sorted(set(obj) - {"format", "name", "members"})
    if unknown:
        raise InputError(f"unknown key(s): {', '.join(unknown)}", where=str(f))
    _check(obj.get("name"), obj.get("members"), where=str(f))
    return SuiteSet(obj["name"], folder.resolve(), tuple(obj["members"]))


def _check(name: object, members: object, *, where: str) -> None:
    if not isinstance(name, str) or not name:
        raise InputError("name: must be a non-empty string", where=where)
    if not isinstance(members, list) or not members:
        raise InputError("members: must be a non-empty list of folder names", where=where)
    bad = [m for m in members if not isinstance(m, str) or not _MEMBER.fullmatch(m)]
    if bad:
        raise InputError(
            f"members: {', '.join(map(repr, bad))}: not a folder name inside the set", where=where
        )
    twice = sorted({m for m in members if members.count(m) > 1})
    if twice:
        raise InputError(f"members: named twice: {', '.join(twice)}", where=where)
