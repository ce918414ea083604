"""scripts/mutant_agreement.py: a selected graded run's verdict against a whole run's, on mutants
of a session's fixed source, in real sandboxes (the bundled suite's slice of `make
mutant-agreement`), and what it counts as agreement."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from script_module import load  # noqa: E402

ma = load("scripts/mutant_agreement.py")
SUITE = str(ROOT / "suites" / "jest-bugfix")
# Two verification files, src/text.js read by both: a selection has something to leave out.
SESSION = "text-utils-exports-assignment"


def _reading(green: bool, checks: list[str]) -> dict:
    return {"green": green, "checks": checks, "reason": None, "files": 1, "jest_s": 0.1}


def test_agreement_is_green_and_checks_and_a_repeat_that_differs_is_unstable():
    red = _reading(False, ["verification"])
    rows = [
        {"key": "a", "selected": red, "whole": red, "missed": [], "agree": True},
        {"key": "b", "selected": red, "whole": _reading(True, []), "missed": [], "agree": False,
         "unstable": True},
        {"key": "c", "selected": red, "whole": _reading(False, ["regression"]), "missed": ["t"],
         "agree": False, "unstable": False},
        {"key": "d", "skipped": "the reference is not green"},
    ]  # fmt: skip
    assert ma.agree(red, red) and not ma.agree(red, _reading(False, ["regression"]))
    report = ma.summarise(rows)
    assert (report["compared"], report["agree"], report["disagree"], report["unstable"]) == (
        3, 1, 1, 1
    )  # fmt: skip
    assert (report["missed"], report["skipped"], report["killed"]) == (1, 1, 2)
    assert [r["key"] for r in report["disagreements"]] == ["c"]
    assert ma.exit_status(report) == ma.EXIT_DISAGREE
    assert ma.exit_status(ma.summarise(rows[:2])) == ma.EXIT_OK
    assert ma.exit_status(ma.summarise(rows[3:])) == ma.EXIT_INFRA  # nothing compared


def test_a_scoped_runs_regressions_count_a_file_it_ran_that_failed_to_load():
    from types import SimpleNamespace as NS

    from harness.grading.jest import TestOutcome

    base = NS(passing={"a.test.js::x", "b.test.js::y", "c.test.js::z"})
    ok = TestOutcome(file="a.test.js", name="x", status="passed", asserts=1)
    # b.test.js ran and failed to load (no outcome); c.test.js was not run
    scoped = NS(tests=[ok], ran=("a.test.js", "b.test.js"))
    whole = NS(tests=[ok], ran=None)
    assert ma.regressed(base, scoped) == {"b.test.js::y"}
    assert ma.regressed(base, whole) == {"b.test.js::y", "c.test.js::z"}


def test_bad_input_is_refused_before_anything_runs(tmp_path, capsys):
    assert ma.main(["--suite", str(tmp_path / "absent"), "--out", str(tmp_path / "o")]) == 2
    assert ma.main(["--suite", SUITE, "--only", "no-such", "--out", str(tmp_path / "o")]) == 2
    assert "no session selected" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@pytest.mark.docker
@pytest.mark.slow
def test_mutants_of_a_bundled_session_agree_and_a_run_resumes(tmp_path, image):
    out = tmp_path / "out"
    argv = ["--suite", SUITE, "--only", SESSION, "--mutants", "3", "--out", str(out)]
    assert ma.main(argv) == 0
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and all(r["agree"] for r in rows), rows
    assert all(r["whole"]["files"] is None and r["selected"]["files"] for r in rows)
    report = json.loads((out / "report.json").read_text())
    assert (report["compared"], report["agree"], report["disagree"]) == (3, 3, 0)
    assert ma.main(argv) == 0  # resumed: every mutant done, nothing run again
    assert len((out / "results.jsonl").read_text().splitlines()) == 3


@pytest.mark.docker
@pytest.mark.slow
def test_a_selection_that_leaves_a_test_file_out_disagrees(tmp_path, monkeypatch, image):
    """The comparison can fail: a selected run that leaves tests/post.test.js out (as a selection
    that does not see it reads src/text.js would) is told apart from the whole run."""
    import hashlib

    from harness.grading import verify
    from harness.suites.load import load_suite

    session = load_suite(SUITE).get(SESSION)
    fixed = {f: hashlib.sha256(t.encode()).hexdigest() for f, t in ma.fixed_files(session).items()}
    real = verify._scope

    def narrow(base, wanted, files, hashes):  # a mutant's runs only, not the reference's
        scope = real(base, wanted, files, hashes)
        if scope is not None and any(hashes.get(f) != h for f, h in fixed.items()):
            scope = {**scope, "include": ["tests/text.test.js"], "keep": ["tests/text.test.js"]}
        return scope

    monkeypatch.setattr(verify, "_scope", narrow)
    out = tmp_path / "out"
    argv = ["--suite", SUITE, "--only", SESSION, "--mutants", "1", "--out", str(out)]
    assert ma.main(argv) == 1
    report = json.loads((out / "report.json").read_text())
    assert report["disagree"] == 1, report
