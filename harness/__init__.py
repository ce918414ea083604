"""ETAI harness: sessions, sandboxes, tools, agents, the replay loop, metrics, the runner.

``import harness`` is cheap on purpose (docker, pandas and torch are imported where used), so a
Composer callback or a notebook pays only for what it touches.
"""

from __future__ import annotations

from typing import Any

__all__ = ["run", "version"]


def version() -> str:
    """The installed etai version; part of every result row's cache key."""
    from importlib.metadata import PackageNotFoundError, version as _v

    try:
        return _v("etai")
    except PackageNotFoundError:
        return "0+unknown"


def run(*args: Any, **kwargs: Any):
    """Run a suite with one or more agents; returns the summary (see harness.runner.run)."""
    from harness.runner import run as _run

    return _run(*args, **kwargs)
