"""Why a commit is left out, in words a reader can act on: the first lines of the error Jest
reported (colours, Jest's file header, code frames and stack left out) and, where the grading guard
refused the code, that it was the guard."""

from __future__ import annotations

import re
from typing import Any

from harness.grading import jest

GUARD = "the grading guard refused: "
# A write to a built-in that the guard's lockdown froze before the test file ran
# (harness/sandbox/image/recipe/runner/guard-lockdown.js): the error names the built-in.
_FROZEN = re.compile(
    r"Cannot (assign to read only property|redefine property|add property|define property|"
    r"delete property)[^\n]*?((#<|\[object )(Map|Set|WeakMap|WeakSet|Object|Array|Function|Promise|"
    r"RegExp|Date|Number|String|Boolean|Symbol|\w*Error)[>\]]|"
    r"'(Map|Set|Object|Array|Function|Promise|Symbol)'|Symbol\.\w+)"
)
_LOCKDOWN_NOTE = (
    " (the guard freezes JavaScript's built-ins before a test file runs: "
    "harness/sandbox/image/recipe/runner/guard-lockdown.js)"
)
_HEADER = "● Test suite failed to run"
_FRAME = re.compile(r"^(at |>?\s*\d+ \|)")  # a stack frame, a line of Jest's code frame


def error_lines(text: str, n: int = 4) -> str:
    """The first ``n`` lines of an error that say something, joined by " / "."""
    lines: list[str] = []
    for line in jest.plain(text).splitlines():
        s = line.strip()
        if not s or s == _HEADER or s == "|" or s.startswith("●"):
            continue
        if _FRAME.match(s):
            break
        lines.append(s)
        if len(lines) == n:
            break
    return " / ".join(lines)[:500]


def guarded(why: str) -> str:
    """``why``, said to be the guard's refusal where it is a write to a built-in the guard froze."""
    if _FROZEN.search(why) and not why.startswith(GUARD):
        return GUARD + why + _LOCKDOWN_NOTE
    return why


def refused(tamper: list[str]) -> str:
    """The guard's own record of what it refused (a JestResult's or a Verdict's ``tamper``)."""
    return GUARD + tamper[0]


def run_error(r: jest.JestResult | None, answer: dict[str, Any]) -> str:
    """Why a Jest run has no passing test: the guard's refusal, else the first lines of the first
    error of a test file that failed to run, else of a failing test, else the runner's reason."""
    if r is not None and r.tamper:
        return refused(r.tamper)
    texts: list[str] = []
    results = (answer.get("report") or {}).get("testResults") or []
    for tr in results:
        err = tr.get("execError")
        if isinstance(err, dict):
            err = err.get("stack") or err.get("message")
        if err or (tr.get("failureMessage") and not tr.get("tests")):
            texts.append(str(tr.get("failureMessage") or err))
    for tr in results:
        texts += ["\n".join(t.get("failureMessages") or []) for t in tr.get("tests") or []]
    for text in texts:
        why = error_lines(text)
        if why:
            return guarded(why)
    if r is not None and r.reason:
        return r.reason
    return error_lines(str(answer.get("error") or answer.get("output_tail") or "")) or "no_result"


def graded_failures(graded) -> dict[str, Any]:
    """A verification that is not green (harness/grading/verify.py's Verdict), for the row: why,
    and the failing tests each with its first error line."""
    why = refused(graded.tamper) if graded.tamper else graded.reason
    tests = [
        f"{t['file']}::{t['name']}: {guarded(error_lines(t.get('message') or ''))}"
        for t in graded.failed_tests[:3]
    ]
    return {"why": why, "tests": tests}
