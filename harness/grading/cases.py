"""A project's test cases and calls, read by parse-only Node scripts (js/) with the @babel/parser
of the sandbox runner's locked install, run with the host's node: no project code runs.

Two layers ask: the held-out split of `suite build` and `suite mine` (harness/authoring/), which
chooses cases to hold out, and the reading of a held-out failure (harness/runs/held_out.py), which
tells a near twin of a visible case from an incomplete fix. Both read a case as the same parser
and walk see it, so the scripts and this module sit below both.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from harness.base.errors import InfraError
from harness.sandbox import image

JS = Path(__file__).with_name("js")
TESTCASES_JS = JS / "testcases.js"  # each test file's cases, with their prints (case-print.js)
CASE_CALLS_JS = JS / "case-calls.js"  # what each case calls of the project


def parser_module() -> Path:
    """@babel/parser from the sandbox runner's locked install (Jest depends on it)."""

    p = image.runner_dir() / "node_modules" / "@babel" / "parser"
    if not p.is_dir():
        raise InfraError(f"@babel/parser is missing from the runner's install ({p})")
    return p


def parse_with(script: Path, files: Any) -> Any:
    """What a parse-only node script answers for ``files`` (their text on stdin with the parser's
    path; JSON on stdout), run with the host's node: no project code runs."""
    r = subprocess.run(
        ["node", str(script)],
        input=json.dumps({"parser": str(parser_module()), "files": files}),
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        raise InfraError(f"{script.name} failed: {r.stderr[-2000:]}")
    return json.loads(r.stdout)


def all_cases(files: dict[str, str]) -> dict[str, list[dict]]:
    """Each test file's test cases, plain or not, with their prints (testcases.js)."""
    return parse_with(TESTCASES_JS, files)
