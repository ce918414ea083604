"""scripts/differential.py (`make differential`): what it compares and that it reports a difference,
and a seeded slice of the real thing — every speed path off in turn, the reference, the do-nothing
agent and a red-team technique on a bundled session, real sandboxes (`make differential` runs
every session, the core techniques and real projects' edits):
no verdict may differ from the arm with every path on."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harness.base import speed

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from script_module import load  # noqa: E402

differential = load("scripts/differential.py")


def _row(status="passed", scoped=None, checks=()):
    v = {"green": status == "passed", "status": status, "checks": list(checks), "failed_tests": []}
    if scoped is not None:
        v["scoped_files"] = scoped
    return {"status": status, "green": status == "passed", "verification": v}


def test_a_verdict_that_differs_is_reported_and_a_scope_count_is_not_a_verdict():
    rows = {
        ("default", "e1"): _row(scoped=3),
        ("scoped_regression", "e1"): _row(),  # a whole run names no files: the same verdict
        ("default", "e2"): _row("failed", checks=["verification"]),
        ("warm_hosts", "e2"): _row("tampered", checks=["guard"]),
        ("warm_hosts", "e3"): _row(),  # no default row yet: nothing to compare
    }
    diffs, n = differential.compare(rows, ["default", "scoped_regression", "warm_hosts"])
    assert n == 2
    assert [(d["arm"], d["episode"]) for d in diffs] == [("warm_hosts", "e2")]
    assert diffs[0]["off"]["status"] == "tampered" and diffs[0]["default"]["status"] == "failed"


def test_a_whole_run_may_list_more_failures_but_not_another_verdict():
    def row(failed, status="passed", checks=()):
        r = _row(status, checks=checks)
        r["verification"].update(
            failed_tests=[{"name": n, "file": f} for n, f in failed],
            status="failed" if failed else "passed",
        )
        return r

    old = ("DST edge", "test/timezone.test.js")  # failing at the start, in a file not in scope
    rows = {
        ("default", "e1"): row([]),
        ("scoped_regression", "e1"): row([old]),
        ("default", "e2"): row([("a", "t/a.test.js")], "failed", ["regression"]),
        ("scoped_regression", "e2"): row([old, ("a", "t/a.test.js")], "failed", ["regression"]),
        # a regression only the whole run sees (a test the scoped run left out)
        ("default", "e3"): row([]),
        ("scoped_regression", "e3"): row([("keys eo", "t/keys.test.js")], "failed", ["regression"]),
        # a failure the scoped run listed and the whole run did not
        ("default", "e4"): row([("a", "t/a.test.js")], "failed", ["regression"]),
        ("scoped_regression", "e4"): row([old], "failed", ["regression"]),
        # on any other arm, the failure list is compared as it is
        ("default", "e5"): row([]),
        ("warm_hosts", "e5"): row([old]),
    }
    diffs, n = differential.compare(rows, ["default", "scoped_regression", "warm_hosts"])
    assert n == 5
    assert [(d["arm"], d["episode"]) for d in diffs] == [
        ("scoped_regression", "e3"),
        ("scoped_regression", "e4"),
        ("warm_hosts", "e5"),
    ]


def test_bad_input_is_refused_with_exit_2(tmp_path, capsys):
    assert differential.main(["--paths", "warm_host", "--out", str(tmp_path)]) == 2
    assert "unknown speed path(s) warm_host" in capsys.readouterr().err
    assert differential.main(["--techniques", "some", "--out", str(tmp_path)]) == 2
    assert not (tmp_path / "results.jsonl").exists()


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_every_speed_path_off_gives_the_same_verdicts(tmp_path, image, capsys):
    out = tmp_path / "diff"
    args = ["--techniques", "1", "--sessions", "1", "--no-implement", "--workers", "2"]
    args += ["--out", str(out)]
    assert differential.main(args) == 0, capsys.readouterr().out[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["paths"] == list(speed.PATHS) and not report["defects"]
    # 1 session x (oracle, noop, 1 technique), compared in every arm with a path off
    assert report["episodes"] == 3 and report["compared"] == 3 * len(speed.PATHS), report
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len(lines) == 3 * (len(speed.PATHS) + 1)
    statuses = {json.loads(x)["row"]["status"] for x in lines}
    assert "passed" in statuses and statuses - {"passed"}  # the reference passed, the rest did not
    # Resumed: a rerun runs nothing again.
    assert differential.main(args) == 0
    assert "0 of 3 episodes to run" in capsys.readouterr().out
