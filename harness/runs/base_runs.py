"""A suite's base workspace, run whole once per process and image, for the baselines of its
base + patch sessions (harness/grading/verify.py ``FromBase``; speed path ``base_baseline``).

A preflight measures which tests pass on the pristine workspace. For a session whose workspace is
the suite's base with a patch, a test file that Jest's graph does not relate to a patched module
runs the same code as in the base: its tests pass or fail there as in the base. So the base is run
whole once, and each session's baseline runs the tests related to its patch (and its verification
files). What is kept is keyed on the base's files, the image and the sandbox's settings: the
session's own content is never part of it, and nothing of the base run reaches a sandbox (the
record lives in this process).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from harness.base import speed
from harness.grading.verify import CUT_SHORT, FromBase, take_baseline
from harness.sandbox import Sandbox, transforms
from harness.session.model import Session
from harness.suites.load import base_digest


@dataclass
class _Entry:
    lock: threading.Lock = field(default_factory=threading.Lock)
    done: bool = False
    passing: frozenset[str] | None = None  # None: the base gave no clean answer; not used


_lock = threading.Lock()
_entries: dict[tuple, _Entry] = {}


def from_base(
    session: Session, start_sandbox: Callable[[Session], Sandbox], image: str
) -> FromBase | None:
    """The base's record for ``session``'s baseline, or None (not a base + patch session, the path
    is off, or the base's whole run was not a clean answer: timed out, tampered, no evidence)."""
    if session.base_dir is None or not session.patch_files or not speed.on("base_baseline"):
        return None
    # The base's content, not its path: two copies of one base share a run.
    key = (base_digest(session.base_dir), image, session.sandbox_env, session.sandbox_memory_mb)
    with _lock:
        entry = _entries.setdefault(key, _Entry())
    with entry.lock:  # one run per base; the sessions that wait for it use it
        if not entry.done:
            entry.passing = _run_base(session, start_sandbox)
            entry.done = True
    if entry.passing is None:
        return None
    return FromBase(entry.passing, session.patch_files, session.verify_files)


def _run_base(
    session: Session, start_sandbox: Callable[[Session], Sandbox]
) -> frozenset[str] | None:
    assert session.base_dir is not None
    sb = start_sandbox(dataclasses.replace(session, workspace=session.base_dir))
    try:
        base = take_baseline(sb, sb.test_files)
        # Only the pristine base has run here: what its hosts transformed serves the sessions'
        # sandboxes as a session's own whole baseline run did (each entry named under the token of
        # its file as the base holds it: docs/transform-cache.md), now that their baselines run
        # only the tests their patch reaches.
        transforms.harvest(sb)
    finally:
        sb.close()
    run = base.run
    if run is None or run.evidence != "nonce" or run.tamper or run.status in CUT_SHORT:
        return None
    return base.passing


def forget() -> None:
    """Drop every record (tests; a process that changed a base folder in place)."""
    with _lock:
        _entries.clear()
