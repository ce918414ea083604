"""What `suite build` and `suite mine` add to the Jest config of the workspace they record.

Two ways real projects resolve modules are not Jest's defaults, and Jest has a key for each:

- ``NODE_PATH=./ jest``: code requires ``lib/util`` by a bare name that Node finds through the
  folders NODE_PATH lists. A suite may not set NODE_PATH (the sandbox's runner resolves its own
  modules, and it drops the variable; harness/suites/load.py refuses it), so ``--env NODE_PATH=``
  becomes ``modulePaths`` ("an alternative API to setting the NODE_PATH env variable").
- Tests that import the *built* package, made by ``npm run build`` before ``npm test``, which the
  sandbox does not run. By its folder (``import { createStore } from '../'``, the package's
  ``main`` under lib/ or dist/): ``--entry src/index`` makes the source the build starts from the
  workspace's ``main``. By its name (``from 'redux'``): ``--map-module '^redux$=<rootDir>/src'``,
  a ``moduleNameMapper`` entry. A mapper also rewrites what Jest's own modules require (jest-circus
  requires ``'..'``), so one that matches a relative request is refused and ``--entry`` named.

They are written into the workspace's package.json ("main", the "jest" section) or
jest.config.json. The config then travels with the workspace like the rest of the project's
config (a protected file: an agent cannot change it), and resolution stays Jest's own.
"""

from __future__ import annotations

import dataclasses
import json
import posixpath
import re
from pathlib import Path

from harness.base.errors import ConfigIsCode, InputError
from harness.grading.verify import CONFIG_FILES
from harness.runs.results import write_text_atomic

Env = tuple[tuple[str, str], ...]
# The Jest configs written in JavaScript or TypeScript: the project's code, never rewritten.
_JS_CONFIGS = tuple(n for n in CONFIG_FILES if n.startswith("jest.config.") and n[-5:] != ".json")


@dataclasses.dataclass(frozen=True)
class JestAdditions:
    module_paths: tuple[str, ...] = ()  # ``<rootDir>`` paths, from NODE_PATH
    module_map: tuple[tuple[str, str], ...] = ()  # (regex, ``<rootDir>`` path), from --map-module
    entry: str | None = None  # package.json's main, from --entry

    def as_config(self) -> dict[str, object]:
        out: dict[str, object] = {}
        if self.module_paths:
            out["modulePaths"] = list(self.module_paths)
        if self.module_map:
            out["moduleNameMapper"] = dict(self.module_map)
        return out


def _inside(rel: str) -> bool:
    rel = posixpath.normpath(rel)
    return not (posixpath.isabs(rel) or rel == ".." or rel.startswith("../"))


def split_node_path(env: Env, *, where: str = "--env") -> tuple[Env, tuple[str, ...]]:
    """``env`` without NODE_PATH, and its folders as ``<rootDir>`` paths for ``modulePaths``.
    A folder outside the project (absolute, or climbing out with ``..``) is refused: the sandbox
    holds the workspace alone."""
    rest = tuple((k, v) for k, v in env if k != "NODE_PATH")
    paths: list[str] = []
    for k, v in env:
        if k != "NODE_PATH":
            continue
        for part in v.split(":"):
            if not part.strip():
                continue
            rel = posixpath.normpath(part.strip())
            if not _inside(rel):
                raise InputError(
                    f"NODE_PATH={v}: {part!r} is outside the project; only the project's own "
                    "folders can become Jest's modulePaths",
                    where=where,
                )
            path = "<rootDir>" if rel == "." else f"<rootDir>/{rel}"
            if path not in paths:
                paths.append(path)
    return rest, tuple(paths)


def parse_module_map(pairs: list[str] | tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """``REGEX=PATH`` pairs (split at the last ``=``: a regex may hold one) as moduleNameMapper
    entries. PATH must name a place inside the project, from ``<rootDir>``."""
    out: dict[str, str] = {}
    for p in pairs:
        regex, sep, path = p.rpartition("=")
        if not sep or not regex or not path:
            raise InputError(f"{p!r} is not REGEX=PATH", where="--map-module")
        try:
            re.compile(regex)  # Python's syntax is close enough to catch a typo before a run
        except re.error as e:
            raise InputError(f"{regex!r} is not a regular expression: {e}", where="--map-module")
        rest = path.removeprefix("<rootDir>")
        if (
            rest == path
            or (rest and not rest.startswith("/"))
            or not _inside(rest.lstrip("/") or ".")
        ):
            raise InputError(
                f"{path!r} must be a path inside the project starting with <rootDir>, "
                "e.g. <rootDir>/src/index",
                where="--map-module",
            )
        if any(re.search(regex, r) for r in (".", "..", "./", "../", "./x", "../x")):
            raise InputError(
                f"{regex!r} matches relative requests, which Jest's own modules make too "
                "(jest-circus requires '..'); for tests that import the package by its folder, "
                "--entry names the source they should reach",
                where="--map-module",
            )
        if out.get(regex, path) != path:
            raise InputError(f"{regex!r} is mapped twice", where="--map-module")
        out[regex] = path
    return tuple(out.items())


def parse_entry(entry: str | None) -> str | None:
    """``--entry``: a path inside the project, as package.json's main writes it."""
    if entry is None:
        return None
    rel = posixpath.normpath(entry.strip())
    if not entry.strip() or rel == "." or not _inside(rel):
        raise InputError(f"{entry!r} is not a file inside the project", where="--entry")
    return f"./{rel}"


def additions(
    env: Env, module_map: tuple[tuple[str, str], ...] = (), entry: str | None = None
) -> tuple[Env, JestAdditions]:
    """The suite's env without NODE_PATH, and what the workspace's config gains."""
    rest, paths = split_node_path(env)
    return rest, JestAdditions(paths, module_map, entry)


def _read_json(path: Path) -> dict:
    try:
        obj = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, ValueError) as e:
        raise InputError(f"cannot read it as JSON: {e}", where=str(path)) from e
    if not isinstance(obj, dict):
        raise InputError("not a JSON object", where=str(path))
    return obj


def _merge(config: dict, adds: JestAdditions, where: str) -> None:
    if adds.module_paths:
        have = config.setdefault("modulePaths", [])
        if not isinstance(have, list):
            raise InputError("modulePaths is not a list", where=where)
        have.extend(p for p in adds.module_paths if p not in have)
    if adds.module_map:
        mapper = config.setdefault("moduleNameMapper", {})
        if not isinstance(mapper, dict):
            raise InputError("moduleNameMapper is not an object", where=where)
        for regex, path in adds.module_map:
            if mapper.get(regex, path) != path:
                raise InputError(
                    f"moduleNameMapper already maps {regex!r} to {mapper[regex]!r}", where=where
                )
            mapper[regex] = path


def add_to_jest_config(workspace: Path, adds: JestAdditions) -> None:
    """Write ``adds`` into the workspace (idempotent): the entry as package.json's main, the rest
    into its Jest config, package.json's "jest" section or jest.config.json.

    Everything is checked before anything is written, so a refusal leaves the workspace as it was.
    A config written in JavaScript is the project's code: it is not rewritten, and the user is
    told what to add."""
    want = adds.as_config()
    if not want and not adds.entry:
        return
    if want:
        js = [n for n in _JS_CONFIGS if (workspace / n).is_file()]
        if js:
            raise ConfigIsCode(
                f"the project's Jest config is {js[0]}: add {json.dumps(want)} to it instead "
                "(NODE_PATH and --map-module are written only into a JSON config)",
                where="--env" if adds.module_paths else "--map-module",
            )
    pkg_path, cfg_path = workspace / "package.json", workspace / "jest.config.json"
    pkg = _read_json(pkg_path) if adds.entry or not cfg_path.is_file() else {}
    writes: dict[Path, dict] = {}
    if adds.entry and pkg.get("main") != adds.entry:
        pkg["main"] = adds.entry
        writes[pkg_path] = pkg
    if want:
        if cfg_path.is_file():
            cfg = _read_json(cfg_path)
            _merge(cfg, adds, str(cfg_path))
            writes[cfg_path] = cfg
        else:
            section = pkg.setdefault("jest", {})
            if not isinstance(section, dict):
                raise InputError('"jest" is not a Jest config object', where=str(pkg_path))
            _merge(section, adds, str(pkg_path))
            writes[pkg_path] = pkg
    for path, obj in writes.items():
        write_text_atomic(path, json.dumps(obj, indent=2) + "\n")
