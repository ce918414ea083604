"""The fairness corpus (fairness_corpus.py): honest fixes, shaped differently from the reference,
replayed through the real CLI in real sandboxes on sessions with held-out tests. None may come out
``special_cased`` (harness/runs/held_out.py), and each, a complete fix of what the task states,
passes its visible and held-out tests.

`make test` replays the sessions of ``fairness_corpus.SLICE``; ETAI_FAIRNESS=all replays every
fix, dinero's and redux's after building their suites. Every change to the held-out split or to how a held-out failure is read runs this.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the helper modules beside this file
sys.path.insert(0, str(Path(__file__).parents[1] / "reports"))

import fairness_corpus
import tamper_corpus
from etai_cmd import etai
from realrepos import real_suites_script, realrepos

from harness.cli import main
from harness.suites.load import load_suite

EVERYTHING = os.environ.get("ETAI_FAIRNESS") == "all"
MIRROR = realrepos().parent / "realrepos-history"
pytestmark = [pytest.mark.docker]


@pytest.fixture(scope="module")
def suites(tmp_path_factory, image) -> dict[str, str]:
    """Each fix's suite as `etai run --suite` takes it: the etai-js sessions fetched offline from
    the shared history (read in place), as tests/harness/test_suite_fetch_slice.py fetches them."""
    root = tmp_path_factory.mktemp("fairness")
    argv = ["suite", "fetch", "etai-js", "--only", "fastest-validator", "--mirror", str(MIRROR)]
    assert main([*argv, "--out", str(root / "etai-js"), "--no-progress"]) == 0
    built = {fairness_corpus.DINERO: "dinero", fairness_corpus.REDUX: "redux"}
    found = {f.suite: f.suite for f in fairness_corpus.FIXES if f.suite not in built}
    found[fairness_corpus.ETAI_JS] = str(root / "etai-js" / "fastest-validator")
    if EVERYTHING:  # as `make real-suites` builds them: their 4 first mutants (~150 s, ~45 s)
        corpus = json.loads((realrepos() / "corpus.json").read_text())
        for suite, name in built.items():
            (proj,) = [p for p in corpus if p["name"] == name]
            real_suites_script().build_project(realrepos(), proj, root / name, 4, log=print)
            found[suite] = str(root / name)
    return found


def _session(fix, suites):
    return load_suite(suites[fix.suite]).get(fix.session_id)


def _ours(suites):
    """The fixes whose suite this run has (dinero's and redux's are built under ETAI_FAIRNESS=all
    only)."""
    return [f for f in fairness_corpus.FIXES if f.suite in suites]


def test_every_fix_applies_and_differs_from_the_reference(suites):
    """Each fix applies to its pristine file, changes it, and is not the reference's text; every
    session it names has held-out tests. The corpus spans the bundled and the implement suites, a
    real project's mined sessions (fastest-validator) and two others' mutants (dinero, redux)."""
    seen = Counter()
    for fix in _ours(suites):
        s = _session(fix, suites)
        assert s.held_out, f"{fix.session_id} has no held-out tests"
        pristine = (s.workspace / fix.file).read_text()
        text = fix.content(pristine)
        assert text != pristine and text != tamper_corpus.fixed_text(s, fix.file), fix.note
        seen[(fix.suite, fix.session_id)] += 1
    sessions = {(f.suite, f.session_id) for f in fairness_corpus.FIXES}
    assert len(fairness_corpus.FIXES) >= 20 and len(sessions) >= 25
    assert len({suite for suite, _ in sessions}) == 5
    assert len(seen) == len({(f.suite, f.session_id) for f in _ours(suites)})
    assert set(fairness_corpus.SLICE) <= {sid for _, sid in seen}


def _plan(fixes, suites):
    """{suite: (sessions, samples, replay lines)}: the n-th fix of a session is its sample n."""
    out = {}
    for suite, group in fairness_corpus.by_suite(fixes).items():
        lines, count = [], Counter()
        for fix in group:
            s = _session(fix, suites)
            content = fix.content((s.workspace / fix.file).read_text())
            action = {"tool": "file_write", "args": {"file": fix.file, "content": content}}
            lines.append(
                {
                    "session_id": fix.session_id,
                    "sample": count[fix.session_id],
                    "actions": [action],
                    "final_output": fix.note,
                }  # fmt: skip
            )
            count[fix.session_id] += 1
        assert len(set(count.values())) == 1, "every session needs as many fixes as the others"
        out[suites[suite]] = (sorted(count), next(iter(count.values())), lines)
    return out


@pytest.mark.slow
def test_no_honest_fix_is_special_cased(tmp_path, suites):
    fixes = [f for f in _ours(suites) if EVERYTHING or f.session_id in fairness_corpus.SLICE]
    by_sample: dict[tuple[str, int], str] = {}
    count: Counter = Counter()
    for f in fixes:
        by_sample[(f.session_id, count[f.session_id])] = f.note
        count[f.session_id] += 1
    rows = []
    for n, (suite, (sessions, samples, lines)) in enumerate(_plan(fixes, suites).items()):
        replay = tmp_path / f"honest-{n}.jsonl"
        replay.write_text("".join(json.dumps(x) + "\n" for x in lines))
        out = tmp_path / f"run-{n}"
        picked = [a for sid in sessions for a in ("--session", sid)]
        r = etai(
            "run", "--suite", suite, "--agent", f"replay:{replay}", *picked,
            "--samples", str(samples), "--out", str(out), "--no-progress",
        )  # fmt: skip
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        rows += [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == len(fixes)
    wrong = [
        f"{r['session_id']} ({by_sample[(r['session_id'], r['sample'])]}): {r['status']}, "
        f"{r.get('held_out_failed')}: {r.get('reason')}"
        for r in rows
        if r["special_cased"] or r["status"] != "passed"
    ]
    assert not wrong, "honest fixes not passed:\n" + "\n".join(wrong)
    assert all(r["held_out"]["green"] for r in rows)  # every one ran its held-out tests
