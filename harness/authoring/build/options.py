"""What `etai suite build` is asked to do (cli.py fills it from the command line)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class BuildOptions:
    max_sessions: int | None = None
    runs: int = 3
    seed: int = 0
    src: tuple[str, ...] = ()  # source folders/files; default: src/, lib/ or index.js
    env: tuple[tuple[str, str], ...] = ()  # the suite's sandbox variables (TZ, LANG, ...)
    module_map: tuple[tuple[str, str], ...] = ()  # moduleNameMapper entries (jest_config.py)
    entry: str | None = None  # package.json's main in the workspace (jest_config.py)
    per_file: int = 6
    per_function: int = 2
    timeout_s: float = 180.0
    sandbox: str = "docker"
    related: bool = True  # a mutant runs only the test files that depend on its file (Jest's graph)
    resolve_lockfile: bool = False  # a project without a lockfile gets one resolved into the base
    held_out: str = "split"  # split: hold out part of each mutant's killing cases (held_out.py)
