"""What a session is: the typed records a suite's sessions.jsonl is read into, and the cursor rule.

Built by the loader (harness/suites/load.py), which checks every field first; everything after it
(sandbox, agents, grading, the run) reads these records and never the raw JSON.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.session.workspace import workspace_paths


@dataclass(frozen=True)
class Cursor:
    file: str
    line: int  # 1-based
    column: int  # 1-based
    placement: str = "before"  # before | after the character at (line, column)


# Where an edit lands, the rule the scorer (harness.runs.loop.edit_cursor) and the suite builder's
# cursor_target (suite_build.compose.fix_site) share: the first character that differs.
def first_difference(a: str, b: str) -> int:
    """Index of the first character where ``a`` and ``b`` differ (the shorter one's length if one
    begins the other)."""
    return len(os.path.commonprefix([a, b]))


def line_and_column(text: str, index: int) -> tuple[int, int]:
    """1-based line and column of ``text[index]``."""
    before = text[:index]
    return before.count("\n") + 1, index - (before.rfind("\n") + 1) + 1


@dataclass(frozen=True)
class Viewport:
    scroll_top_line: int = 0
    line_height_px: float = 18.0
    char_width_px: float = 7.2
    gutter_px: float = 48.0
    zoom: float = 1.0


@dataclass(frozen=True)
class IdeContext:
    open_files: tuple[str, ...]
    cursor_position: Cursor
    git_status: str
    viewport: Viewport


@dataclass(frozen=True)
class Step:
    step: int
    tool_called: str
    tool_args: dict[str, Any]
    execution_result: dict[str, Any]


@dataclass(frozen=True)
class Session:
    session_id: str
    user_instruction: str
    ide_context: IdeContext
    execution_trace: tuple[Step, ...]
    final_output: str
    workspace: Path  # absolute
    verify_files: tuple[str, ...]  # empty: every test file
    intent: str
    cursor_target: Cursor
    raw: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)
    # The suite's sandbox variables (suite.yaml `sandbox.env`): they change what Jest reports, so
    # they are part of the hash. node_modules is not: the lockfile that decides it is a workspace file.
    sandbox_env: tuple[tuple[str, str], ...] = ()
    # suite.yaml `sandbox.memory_mb`: hashed for the same reason
    sandbox_memory_mb: int | None = None
    # Held-out verification tests (``held_out_tests``: a folder of the suite whose files mirror
    # workspace paths): never in the sandbox while the agent acts, written in only for the final
    # verification (harness/runs/loop.py). None: the session has none.
    held_out_dir: Path | None = None
    # A base + patch workspace (``{"base": FOLDER, "patch": [...]}``): the suite's base folder and
    # the files the patch edits. The preflight's baseline then reads what a whole run of the base
    # showed and runs only the tests related to the patch (harness/runs/base_runs.py).
    base_dir: Path | None = None
    patch_files: tuple[str, ...] = ()

    @property
    def project(self) -> str | None:
        """The project the session was taken from: ``provenance.repo`` of a mined or etai-js
        session; None for one written by hand (reports count it as a project of its own)."""
        prov = self.raw.get("provenance")
        repo = prov.get("repo") if isinstance(prov, dict) else None
        return repo if isinstance(repo, str) and repo else None

    @property
    def fix_date(self) -> str | None:
        """The author date of the commit that fixed the bug (``provenance.date``, ISO 8601), as
        recorded; None where the session records none (harness/session/window.py reads it)."""
        prov = self.raw.get("provenance")
        date = prov.get("date") if isinstance(prov, dict) else None
        return date if isinstance(date, str) and date else None

    @functools.cached_property
    def held_out(self) -> dict[str, bytes]:
        """The held-out test files, workspace path -> content (read once; empty when none)."""
        if self.held_out_dir is None:
            return {}

        return {rel: p.read_bytes() for rel, p in workspace_paths(self.held_out_dir)}

    @functools.cached_property
    def content_hash(self) -> str:
        """Hash of the session record and its workspace files: part of every cache key (read once).
        A base + patch workspace is hashed as materialised, so both are covered."""
        h = hashlib.sha256(json.dumps(self.raw, sort_keys=True).encode())
        if self.sandbox_env:
            h.update(json.dumps(self.sandbox_env).encode())
        if self.sandbox_memory_mb is not None:
            h.update(f"memory_mb={self.sandbox_memory_mb}".encode())
        for p in sorted(self.workspace.rglob("*")):
            if p.is_file() and "node_modules" not in p.parts:
                h.update(str(p.relative_to(self.workspace)).encode() + b"\0" + p.read_bytes())
        for rel, data in sorted(self.held_out.items()):  # hashed like the other tests
            h.update(b"held-out\0" + rel.encode() + b"\0" + data)
        return h.hexdigest()[:24]


@dataclass(frozen=True)
class SuiteSandbox:
    """suite.yaml's ``sandbox:``: what every sandbox of the suite gets besides the workspace."""

    env: tuple[tuple[str, str], ...] = ()
    # A folder with the project's lockfile: `npm ci` installs from it, mounted read-only.
    node_modules: Path | None = None
    timeout_s: float | None = None  # a real project's whole suite can outlast the default deadline
    memory_mb: int | None = None  # a project whose tests need more than the default sandbox's


@dataclass(frozen=True)
class Suite:
    name: str
    path: Path
    description: str
    defaults: dict[str, Any]
    sessions: tuple[Session, ...]
    sandbox: SuiteSandbox = field(default_factory=lambda: SuiteSandbox())

    def get(self, session_id: str) -> Session:
        for s in self.sessions:
            if s.session_id == session_id:
                return s
        raise KeyError(session_id)
