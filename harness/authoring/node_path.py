"""A project's ``NODE_PATH`` as Jest's ``modulePaths``.

Some projects test with ``NODE_PATH=./ jest``: their code requires ``lib/util`` by a bare name
that Node finds through the folders NODE_PATH lists. A suite may not set NODE_PATH (the sandbox's
runner resolves its own modules, and it drops the variable; harness/suites/load.py refuses it), so
`suite build` and `suite mine` translate it into the equivalent Jest offers for exactly this,
``modulePaths`` ("an alternative API to setting the NODE_PATH env variable"), written into the
Jest config of the workspace they record. It then travels with the workspace like the rest of the
project's config (a protected file: an agent cannot change it), and resolution stays Jest's own.
"""

from __future__ import annotations

import json
import posixpath
from pathlib import Path

from harness.base.errors import InputError
from harness.runs.results import write_text_atomic

Env = tuple[tuple[str, str], ...]
_JS_CONFIGS = ("jest.config.js", "jest.config.cjs", "jest.config.mjs", "jest.config.ts")


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
            if posixpath.isabs(rel) or rel == ".." or rel.startswith("../"):
                raise InputError(
                    f"NODE_PATH={v}: {part!r} is outside the project; only the project's own "
                    "folders can become Jest's modulePaths",
                    where=where,
                )
            path = "<rootDir>" if rel == "." else f"<rootDir>/{rel}"
            if path not in paths:
                paths.append(path)
    return rest, tuple(paths)


def add_module_paths(workspace: Path, paths: tuple[str, ...]) -> None:
    """Add ``paths`` to the ``modulePaths`` of the workspace's Jest config: package.json's "jest"
    section or jest.config.json. A config written in JavaScript is the project's code: it is not
    rewritten, and the user is told what to add."""
    if not paths:
        return
    js = [n for n in _JS_CONFIGS if (workspace / n).is_file()]
    if js:
        raise InputError(
            f"the project's Jest config is {js[0]}: add modulePaths: {json.dumps(list(paths))} "
            "to it instead of setting NODE_PATH",
            where="--env",
        )
    target, key = workspace / "jest.config.json", None
    if not target.is_file():
        target, key = workspace / "package.json", "jest"
    try:
        obj = json.loads(target.read_text(encoding="utf-8")) if target.is_file() else {}
    except (OSError, ValueError) as e:
        raise InputError(f"cannot read it as JSON: {e}", where=str(target)) from e
    config = obj.setdefault(key, {}) if key else obj
    if not isinstance(config, dict):
        raise InputError(f'"{key}" is not a Jest config object', where=str(target))
    have = config.setdefault("modulePaths", [])
    if not isinstance(have, list):
        raise InputError("modulePaths is not a list", where=str(target))
    have.extend(p for p in paths if p not in have)
    write_text_atomic(target, json.dumps(obj, indent=2) + "\n")
