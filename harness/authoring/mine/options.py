"""What `etai suite mine` is asked to do (cli.py fills it from the command line)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class MineOptions:
    rev_range: str = "HEAD"  # ``A..B`` or a revision (its whole history)
    max_sessions: int | None = None
    runs: int = 3
    seed: int = 0
    src: tuple[str, ...] = ("src", "lib", "index.js", "index.ts")
    env: tuple[tuple[str, str], ...] = ()
    deps: str | None = None  # a folder holding package.json and a lockfile
    max_files: int = 3  # source files a fix may change
    max_hunks: int = 6
    max_lines: int = 60  # source lines added + removed
    max_steps: int = 10  # the reference: a test run, a read per file, an edit per hunk
    since: str | None = None  # ISO dates, on the author date
    until: str | None = None
    skip: tuple[str, ...] = ()  # commit ids (or prefixes) never tried
    timeout_s: float = 180.0
    # A run of the commit's test files at the parent past this limit counts as a failure of each of
    # its tests, where the commit runs them in a quarter of it: the hang is the bug that a fix of a
    # catastrophic regular expression mends (_parent_runs). None: timeout_s, so that a run slow
    # but not hung is never cut shorter than the sandbox's deadline would cut it.
    test_timeout_s: float | None = None
    sandbox: str = "docker"
    held_out: str = "split"
    resolve_lockfile: bool = False
    name: str | None = None  # the project's name in session ids (default: the folder's or bundle's)
    module_map: tuple[tuple[str, str], ...] = ()  # moduleNameMapper entries (jest_config.py)
    entry: str | None = None  # package.json's main in the workspace (jest_config.py)
