"""The package's surface: cheap to import, and `etai report` / `etai gate` registered."""

from __future__ import annotations

import subprocess
import sys

from harness.cli import build_parser


def test_import_reports_is_cheap():
    code = (
        "import sys, reports, reports.cli; "
        "print(','.join(m for m in ('pandas', 'numpy', 'matplotlib', 'scipy') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "", f"heavy modules imported by `import reports`: {out}"


def test_report_and_gate_are_etai_commands():
    parser = build_parser()
    args = parser.parse_args(["gate", "runs/x", "--rule", "pass@1>=0.6", "--junit", "g.xml"])
    assert args.rule == ["pass@1>=0.6"] and args.junit == "g.xml"
    args = parser.parse_args(["report", "a", "b", "--out", "o", "--format", "json"])
    assert args.runs == ["a", "b"] and args.format == ["json"]
