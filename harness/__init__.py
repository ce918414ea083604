"""ETAI harness: sessions, sandboxes, tools, agents, the replay loop, metrics, the runner.

``import harness`` is cheap on purpose (docker, pandas and torch are imported where used), so a
Composer callback or a notebook pays only for what it touches.
"""

from __future__ import annotations

from typing import Any

__all__ = ["run", "version", "grading_digest"]

# The modules whose code decides a verdict; their text is part of every verdict's cache key (the
# in-sandbox half, recipe/runner, is in the image tag, which is in the key too).
_GRADING = ("jest.py", "verify.py", "loop.py", "sandbox/__init__.py")
_digest: str | None = None


def grading_digest() -> str:
    """A digest of the harness code that decides verdicts: a changed verifier never reuses old ones."""
    global _digest
    if _digest is None:
        import hashlib
        from pathlib import Path

        h = hashlib.sha256()
        for name in _GRADING:
            h.update(hashlib.sha256((Path(__file__).parent / name).read_bytes()).digest())
        _digest = h.hexdigest()[:16]
    return _digest


_version: str | None = None


def version() -> str:
    """The installed etai version; part of every result row's cache key. Read once: the lookup
    scans the installed packages (half a millisecond), and a run asks twice per episode it plans."""
    global _version
    if _version is None:
        from importlib.metadata import PackageNotFoundError
        from importlib.metadata import version as _v

        try:
            _version = _v("etai")
        except PackageNotFoundError:
            _version = "0+unknown"
    return _version


def run(*args: Any, **kwargs: Any):
    """Run a suite with one or more agents; returns the summary (see harness.runner.run)."""
    from harness.runner import run as _run

    return _run(*args, **kwargs)
