"""The changed lines each killing case executes at the fix (eligibility.py's ``uncovered``),
measured in the sandbox: untrusted code never runs on the host.

Jest measures it: the image's Jest (the one graded runs use) started through the sandbox's
``exec`` with ``--coverage --coverageProvider=v8``, over every file the run loads (the changed
files are picked out here), and ``--testNamePattern`` naming the cases of a run. Jest's coverage is per run, not per
test, so a case's lines take a run of its own. The image stays as it is: the command line is all
that is new. Jest's ``--json`` report of that run says which tests ran, so a pattern that matched
nothing (a name Jest does not see as the report spells it), or a run whose coverage holds none of
the changed files, is "not measured", never "executes nothing".

Cost per session: one run of the verification files for the cases that stay visible and one for
every candidate together; when the candidates' lines are all among the visible ones that is all,
two runs. Otherwise one run per candidate, for at most ``MAX_CANDIDATES`` of them; more is "not
measured". Each run is a cold Jest with coverage of at most the mine's ``timeout_s``: 6 to 33 s a
session on fastest-validator and dayjs, a tenth of a kept session's mining time
(docs/results/mined-suites.md).
"""

from __future__ import annotations

import difflib
import json
import re
import time
from collections.abc import Mapping
from typing import Any, Protocol

from harness.authoring import eligibility
from harness.sandbox import Sandbox

_CODE = (".js", ".cjs", ".mjs", ".jsx", ".ts", ".cts", ".mts", ".tsx")
MAX_CANDIDATES = 12  # candidates measured one by one in a session; more: not measured

# The image copies the runner (and its Jest) here; the local sandbox runs it from the cache. The
# package, loaded by the script below as the runner's jest-host.js loads it: its bin (jest/bin/
# jest.js) hands the run to a Jest the workspace installs itself when there is one (import-local),
# and a project on Jest 24 (redux 4) has no v8 coverage and reported none of its files.
_IMAGE_JEST = "/opt/etai/node_modules/jest"

# Runs in the sandbox: Jest with its report to a file, then one JSON object on stdout holding the
# test statuses and the coverage map (Jest's own --json output goes to stdout interleaved with
# what tests print, which --silent does not stop for a project's own console writes). Jest is
# started through its API with the options in a file, so that the process's argv is
# `node <script>` as in a graded run's host: a test may parse process.argv (commander's
# `program.parse()` without arguments does), and with Jest's options on the command line it read
# `--ci` as an unknown option and called process.exit, ending the run without a report.
_RUN_JS = """'use strict';
const fs = require('fs');
const path = require('path');
const o = JSON.parse(fs.readFileSync(path.join(__dirname, 'argv.json'), 'utf8'));
const argv = { ...o.argv, _: o.argv._.map((f) => path.resolve(f)),
  outputFile: path.join(__dirname, 'report.json'), coverageDirectory: path.join(__dirname, 'cov') };
require(o.jest).runCLI(argv, [process.cwd()]).then(
  () => process.exit(0),
  (e) => { console.error((e && e.stack) || e); process.exit(4); });
"""
_SCRIPT = f"""d="$TMPDIR/etai-coverage"; rm -rf "$d"; mkdir -p "$d"
printf '%s' "$1" >"$d/argv.json"
cat >"$d/run.js" <<'ETAI_RUN_JS'
{_RUN_JS}ETAI_RUN_JS
node "$d/run.js" >"$d/out" 2>&1
rc=$?
if [ -f "$d/report.json" ] && [ -f "$d/cov/coverage-final.json" ]; then
  printf '{{"report":'; cat "$d/report.json"; printf ',"coverage":'
  cat "$d/cov/coverage-final.json"; printf '}}'
else
  echo "jest exited $rc without a coverage report"; tail -c 1500 "$d/out"; exit 3
fi"""


class NotMeasured(Exception):
    """Coverage could not be measured for a session (the message says why); ``dead``: the
    sandbox did not answer (the caller starts another)."""

    def __init__(self, why: str, *, dead: bool = False):
        super().__init__(why)
        self.dead = dead


def changed_lines(before: Mapping[str, str], after: Mapping[str, str]) -> dict[str, set[int]]:
    """Each file's lines (1-based, in ``after``) that the fix added or changed. Lines it only
    deleted have no line at the fix to execute; they count for nothing."""
    out: dict[str, set[int]] = {}
    for f, new in after.items():
        a, b = before.get(f, "").split("\n"), new.split("\n")
        sm = difflib.SequenceMatcher(None, a, b, autojunk=False)  # as fix.py's hunks
        lines = {
            j + 1 for tag, _, _, j1, j2 in sm.get_opcodes() if tag != "equal" for j in range(j1, j2)
        }
        if lines:
            out[f] = lines
    return out


def span_lines(text: str, start: int, end: int) -> set[int]:
    """The lines (1-based) that the span ``text[start:end]`` has code on (the whitespace at its
    ends left out: a statement cut up to the next one's indentation is on one line)."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    first = text.count("\n", 0, start) + 1
    return set(range(first, first + text.count("\n", start, end) + 1))


def _js_regex_escape(s: str) -> str:
    # Jest compiles the pattern with JavaScript's RegExp: these are its syntax characters.
    return re.sub(r"[\\^$.*+?()[\]{}|/]", lambda m: "\\" + m.group(0), s)


def pattern(names: list[str], *, exclude: bool = False) -> str:
    """A --testNamePattern matching exactly these full names (all but these with ``exclude``).
    Jest matches case-insensitively: a name differing only by case would match too, which can
    only add lines to a candidate or take some from the visible ones (the strict side)."""
    alt = "|".join(_js_regex_escape(n) for n in names)
    return f"^(?!(?:{alt})$)" if exclude else f"^(?:{alt})$"


def run(
    sb: Sandbox,
    changed: Mapping[str, set[int]],
    files: list[str],
    name_pattern: str,
    timeout: float,
) -> tuple[frozenset[str], set[str]]:
    """The changed lines (``file:line``) that the cases of ``files`` matching ``name_pattern``
    execute together, and the test ids that ran (passed or failed). Raises NotMeasured."""
    jest = _IMAGE_JEST if sb.kind == "docker" else _local_jest()
    argv = {"ci": True, "watchman": False, "runInBand": True, "silent": True, "json": True}
    argv |= {"coverage": True, "coverageProvider": "v8", "coverageReporters": ["json"]}
    # (Jest reads coverageThreshold from its options as JSON text.)
    argv |= {"coverageThreshold": "{}", "testNamePattern": name_pattern}
    # Every file the run loads (filtered here): a project's own collectCoverageFrom, relative to
    # its rootDir (fastest-validator's is lib/), could leave the changed files out.
    argv |= {"collectCoverageFrom": [], "runTestsByPath": True, "_": files, "$0": "jest"}
    options = json.dumps({"jest": jest, "argv": argv})
    r = sb.exec(["sh", "-c", _SCRIPT, "sh", options], timeout=timeout, output_cap=32 << 20)
    if r.status.value == "timeout" or r.exit_code != 0 or r.truncated:
        out = r.stdout + r.stderr
        raise NotMeasured(
            f"coverage run {r.status.value} (exit {r.exit_code}): {_ends(out)}",
            dead=r.exit_code == -1,  # the sandbox's own answer never came (ExecResult's -1)
        )
    try:
        got = json.loads(r.stdout)
    except json.JSONDecodeError as e:
        raise NotMeasured(f"coverage output is not JSON: {e}") from None
    ran = {
        f"{_rel(tr['name'], files)}::{t['fullName']}"
        for tr in got["report"].get("testResults", [])
        for t in tr.get("assertionResults", [])
        if t.get("status") in ("passed", "failed")
    }
    if not any(_rel(p, list(changed)) in changed for p in got["coverage"]):
        raise NotMeasured("none of the changed files is in Jest's coverage of the run")
    return frozenset(_executed(got["coverage"], changed)), ran


def _ends(text: str) -> str:
    """A failed run's output for its row (``measured`` keeps 300 characters): the first line
    after ours says what went wrong (commander's "error: unknown option"), the end where."""
    if len(text) <= 280:
        return text
    return f"{text[:130]} ... {text[-140:]}"


def _rel(path: str, files: list[str]) -> str:
    return next((f for f in files if path == f or path.endswith("/" + f)), path)


def _executed(cov: Mapping[str, dict], changed: Mapping[str, set[int]]) -> set[str]:
    """The changed lines some statement starting on them ran (istanbul's line coverage)."""
    out = set()
    for path, fc in cov.items():
        rel = next((f for f in changed if path == f or path.endswith("/" + f)), None)
        if rel is None:
            continue
        for k, n in fc.get("s", {}).items():
            line = fc["statementMap"][k]["start"]["line"]
            if n > 0 and line in changed[rel]:
                out.add(f"{rel}:{line}")
    return out


def measure(
    sb: Sandbox,
    changed: Mapping[str, set[int]],
    files: list[str],
    candidates: list[str],
    timeout: float,
) -> eligibility.Coverage:
    """The Coverage of ``candidates`` (test ids, all of ``files``) and of the other cases of
    ``files``, the fix's files in place in ``sb``. Raises NotMeasured (module doc: the cost)."""
    # Only code Jest runs has lines to execute (a changed .d.ts or .json has none).
    changed = {f: n for f, n in changed.items() if f.endswith(_CODE) and not f.endswith(".d.ts")}
    if not candidates or not changed:
        return eligibility.Coverage(frozenset(), dict.fromkeys(candidates, frozenset()))
    names = sorted({t.split("::", 1)[1] for t in candidates})
    visible, ran = run(sb, changed, files, pattern(names, exclude=True), timeout)
    if not ran:  # the instruction's case at least stays visible
        raise NotMeasured("Jest ran none of the visible cases")
    together, ran_c = run(sb, changed, files, pattern(names), timeout)
    if not set(candidates) <= ran_c:
        raise NotMeasured(f"Jest did not run {sorted(set(candidates) - ran_c)[:3]}")
    if together <= visible:  # no candidate executes a changed line the visible cases do not:
        # each is given the lines of all together, among the visible ones as its own are
        return eligibility.Coverage(visible, dict.fromkeys(candidates, together))
    if len(candidates) > MAX_CANDIDATES:
        raise NotMeasured(f"{len(candidates)} candidates (at most {MAX_CANDIDATES} one by one)")
    of = {}
    for t in candidates:
        file, name = t.split("::", 1)
        of[t], ran_t = run(sb, changed, [file], pattern([name]), timeout)
        if t not in ran_t:
            raise NotMeasured(f"Jest did not run {t}")
    return eligibility.Coverage(visible, of)


class Box(Protocol):
    """A sandbox its holder can start again (harness/authoring/box.py's ``Box``)."""

    sb: Sandbox

    def restart(self) -> None: ...


def measured(
    box: Box,
    changed: Mapping[str, set[int]],
    files: list[str],
    candidates: list[str],
    timeout: float,
) -> tuple[eligibility.Coverage | None, dict[str, Any]]:
    """``measure`` in ``box`` (the fix's files in place), and what a verdict row says of it:
    ``coverage`` (``measured`` or ``not_measured``), ``candidates``, and ``coverage_s`` or
    ``why``. A sandbox that did not answer is started again (``box.restart``); the Coverage is
    None when not measured."""
    t0 = time.monotonic()
    try:
        cov = measure(box.sb, changed, files, candidates, timeout)
    except NotMeasured as e:
        if e.dead:
            box.restart()
        return None, {
            "coverage": "not_measured",
            "candidates": len(candidates),
            "why": str(e)[:300],
        }
    seconds = round(time.monotonic() - t0, 2)
    return cov, {"coverage": "measured", "candidates": len(candidates), "coverage_s": seconds}


def _local_jest() -> str:
    from harness.sandbox.image import runner_dir

    return str(runner_dir() / "node_modules" / "jest")
