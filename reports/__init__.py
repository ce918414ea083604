"""ETAI reports: run folders as typed DataFrames, comparisons with paired tests, reports and gates.

    df = reports.load(["runs/a", "runs/b"])        # one row per episode
    c = reports.compare(df)                         # per-arm metrics with 95% CIs, pairwise tests
    reports.write_report(c, "out/")                 # report.md + report.html (+ report.json)
    result = reports.gate("runs/a", ["pass@1>=0.6"], baseline="runs/b")
    result = reports.gate(["runs/a", "runs/he"], ["humaneval:pass@1>=0.6", "jest-bugfix:pa@3>=0.5"])

Every suite kind reads here under its own metric names (reports/_kinds.py); several suites side by
side: ``reports._suites.by_suite(paths)``; episode transcripts: ``reports.view``.

Cheap to import: pandas, numpy and matplotlib load on first use.
"""

from __future__ import annotations

from typing import Any

__all__ = ["compare", "gate", "load", "write_report"]


def load(*args: Any, **kwargs: Any):
    """Run and training folders into one DataFrame (see reports._load.load)."""
    # pandas: loaded when a report or gate is made, not by `etai --help`
    from reports._load import load as _load

    return _load(*args, **kwargs)


def compare(*args: Any, **kwargs: Any):
    """A Comparison of every arm on their common sessions (see reports._compare.compare)."""
    # pandas: loaded when a report or gate is made, not by `etai --help`
    from reports._compare import compare as _compare

    return _compare(*args, **kwargs)


def write_report(*args: Any, **kwargs: Any):
    """Write a Comparison as md/html/json into a folder (see reports._render.write)."""
    # pandas: loaded when a report or gate is made, not by `etai --help`
    from reports._render import write

    return write(*args, **kwargs)


def gate(*args: Any, **kwargs: Any):
    """Check rules on a run, alone or against a baseline (see reports._gate.gate)."""
    # pandas: loaded when a report or gate is made, not by `etai --help`
    from reports._gate import gate as _gate

    return _gate(*args, **kwargs)
