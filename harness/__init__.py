"""ETAI harness: sessions, sandboxes, tools, agents, grading, the run, metrics, the CLI.

The packages follow an episode's flow, each importing only those before it (docs/ARCHITECTURE.md):
``base`` (errors, registry, provenance) → ``session`` (what a session and a result row are) →
``sandbox`` (containers, the image) → ``tools`` and ``grading`` (Jest results, verification) →
``agents`` → ``suites`` (reading and checking a suite, suite kinds) → ``runs`` (runner, replay loop,
executors, results, metrics) → ``authoring`` (validate, record, build suites) → ``cli``.

``import harness`` is cheap on purpose (docker, pandas and torch are imported where used), so a
Composer callback or a notebook pays only for what it touches.
"""

from __future__ import annotations

from typing import Any

from harness.base.provenance import grading_digest, version

__all__ = ["run", "version", "grading_digest"]


def run(*args: Any, **kwargs: Any):
    """Run a suite with one or more agents; returns the summary (see harness.runs.runner.run)."""
    from harness.runs.runner import run as _run  # here, so that `import harness` stays cheap

    return _run(*args, **kwargs)
