"""`etai gate`: every exit code produced through the real command line, rules parsed and refused,
baseline rules with the paired test named, and JUnit XML read back by a JUnit library."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from junitparser import Error, Failure, JUnitXml, Skipped

from harness.base.errors import InputError
from harness.cli import main
from reports import gate
from reports._rules import parse_rule

PROJECT = Path(__file__).resolve().parents[2]


@pytest.fixture
def runs(tmp_path, make_run, make_row):
    """good: passes 9 of 10 sessions; bad: passes 2; both have agent "m"; ten sessions each."""
    ids = [f"s{i}" for i in range(10)]
    good = make_run(
        tmp_path / "good",
        [
            make_row(s, "m", "passed" if i else "failed", steps_to_green=2 if i else None)
            for i, s in enumerate(ids)
        ],
    )
    bad = make_run(
        tmp_path / "bad",
        [
            make_row(s, "m", "passed" if i < 2 else "failed", steps_to_green=3 if i < 2 else None)
            for i, s in enumerate(ids)
        ],
    )
    return good, bad


def _gate(*args):
    return main(["gate", *map(str, args)])


def test_exit_0_when_every_rule_passes(runs, tmp_path):
    good, bad = runs
    assert (
        _gate(
            good,
            "--rule",
            "pass@1>=0.6",
            "--rule",
            "tamper_rate == 0",
            "--rule",
            "infra_error==0",
            "--baseline",
            bad,
            "--rule",
            "pass@1 >= baseline - 0.05",
        )
        == 0
    )


def test_exit_1_when_a_rule_fails(runs, tmp_path, capsys):
    _, bad = runs
    assert _gate(bad, "--rule", "pass@1>=0.6", "--rule", "tamper_rate==0") == 1
    out = capsys.readouterr().out
    assert "gate failed" in out and "pass@1 = 0.2 (fails >= 0.6)" in out


def test_exit_2_on_bad_input_and_nothing_written(runs, tmp_path, capsys):
    good, _ = runs
    junit = tmp_path / "g.xml"
    for args in (
        ["--rule", "pass@1 >> 0.6"],
        ["--rule", "speed>=1"],
        ["--rule", "pass@1>=baseline"],
        ["--rule", "pa@9>=0.1"],
        ["--rule", "steps_to_green <= baseline + 1", "--baseline", str(good)],
        ["--config", str(tmp_path / "missing.yaml")],
    ):
        assert _gate(good, *args, "--junit", junit) == 2, args
        assert "etai: error:" in capsys.readouterr().err
        assert not junit.exists()
    assert _gate(tmp_path / "nowhere", "--rule", "pass@1>=0") == 2


def test_exit_3_when_the_run_is_incomplete(tmp_path, make_run, make_row, capsys):
    run = make_run(
        tmp_path / "r",
        [make_row("s1", "m", "passed", steps_to_green=1), make_row("s2", "m", "infra_error")],
    )
    junit = tmp_path / "g.xml"
    assert _gate(run, "--rule", "pass@1>=0.5", "--junit", junit) == 3
    assert "infra_error row" in capsys.readouterr().out
    xml = JUnitXml.fromfile(str(junit))
    assert xml.errors == 2  # the "run complete" case and the session with the infra error
    unfinished = make_run(
        tmp_path / "u", [make_row("s1", "m", "passed", steps_to_green=1)], summary=False
    )
    assert _gate(unfinished, "--rule", "pass@1>=0.5") == 3


def test_exit_3_when_the_budget_skipped_episodes(tmp_path, make_run, make_row, capsys):
    """A time-boxed evaluation that left episodes unstarted is no finished run to gate on."""
    run = make_run(
        tmp_path / "r",
        [make_row("s1", "m", "passed", steps_to_green=1), make_row("s2", "m", "skipped_budget")],
    )
    junit = tmp_path / "g.xml"
    assert _gate(run, "--rule", "pass@1>=0.5", "--junit", junit) == 3
    assert "1 skipped_budget row(s)" in capsys.readouterr().out
    assert JUnitXml.fromfile(str(junit)).errors == 2  # "run complete" and the unstarted session


def test_junit_counts(tmp_path, make_run, make_row):
    junit, md, js = (
        tmp_path / "out" / "g.xml",
        tmp_path / "out" / "g.md",
        tmp_path / "out" / "g.json",
    )
    rows = [
        make_row(f"s{i}", "m", st, steps_to_green=1 if st == "passed" else None)
        for i, st in enumerate(["passed", "failed", "reference_broken", "passed", "tampered"])
    ]
    run = make_run(tmp_path / "mixed", rows)
    assert (
        _gate(
            run,
            "--rule",
            "pass@1>=0.5",
            "--rule",
            "tamper_rate==0",
            "--rule",
            "reference_broken<=1",
            "--junit",
            junit,
            "--markdown",
            md,
            "--json",
            js,
        )
        == 1
    )
    xml = JUnitXml.fromfile(str(junit))
    suites = {s.name: s for s in xml}
    rules, sessions = suites["etai gate rules"], suites["etai sessions: m"]
    assert (rules.tests, rules.failures, rules.errors, rules.skipped) == (3, 1, 0, 0)
    assert (sessions.tests, sessions.failures, sessions.errors, sessions.skipped) == (5, 2, 0, 1)
    assert (xml.tests, xml.failures, xml.errors, xml.skipped) == (8, 3, 0, 1)
    results = {c.name: c.result for c in sessions}
    assert (
        isinstance(results["s1"][0], Failure)
        and isinstance(results["s2"][0], Skipped)
        and results["s0"] == []
    )
    failed = [c for c in rules if c.result]
    assert [c.name for c in failed] == ["tamper_rate==0"] and "0.25" in failed[0].result[0].message
    assert not any(isinstance(r, Error) for c in xml for case in c for r in case.result)
    assert "❌ gate failed" in md.read_text() and "`tamper_rate==0` | **FAIL**" in md.read_text()
    assert json.loads(js.read_text())["exit_code"] == 1


def test_baseline_rules_name_their_test_and_catch_a_regression(runs):
    good, bad = runs
    r = gate(
        bad,
        ["pass@1 >= baseline", "pa@3 >= baseline - 0.1", "path_match >= baseline - 0.5"],
        baseline=good,
    )
    mc, boot, pm = r.rules
    assert (
        not mc.passed
        and mc.test == "exact McNemar (one-sided)"
        and mc.p == pytest.approx(10 / 2**9)
    )  # P(X >= 8), X ~ B(9, 1/2)
    assert "8 session(s) worse, 1 better" in mc.detail
    assert (
        not boot.passed
        and boot.test.startswith("paired bootstrap over 10 sessions")
        and boot.p < 0.05
    )
    assert pm.passed  # path match is 1.0 on both (no paths recorded)
    assert r.exit_code == 1


def test_a_small_regression_inside_the_margin_passes(tmp_path, make_run, make_row):
    ids = [f"s{i}" for i in range(20)]
    base = make_run(tmp_path / "b", [make_row(s, "m", "passed", steps_to_green=1) for s in ids])
    cand = make_run(
        tmp_path / "c",
        [
            make_row(s, "m", "failed" if i == 0 else "passed", steps_to_green=None if i == 0 else 1)
            for i, s in enumerate(ids)
        ],
    )
    r = gate(
        cand,
        ["pass@1 >= baseline", "pass@1 >= baseline - 0.2", "pa@1 >= baseline - 0.2 alpha=0.01"],
        baseline=base,
    )
    assert [x.passed for x in r.rules] == [
        True,
        True,
        True,
    ]  # one worse session is no evidence at 0.05
    assert r.rules[0].p == 0.5 and r.rules[2].test.startswith("paired bootstrap")


def test_several_agents_need_one_named(tmp_path, make_run, make_row):
    run = make_run(
        tmp_path, [make_row("s1", "a", "passed", steps_to_green=1), make_row("s1", "b", "failed")]
    )
    with pytest.raises(InputError, match="has 2 agents"):
        gate(run, ["pass@1>=1"])
    assert gate(run, ["pass@1>=1"], agent="a").exit_code == 0
    assert gate(run, ["pass@1>=1"], agent="b").exit_code == 1


def test_samples_give_per_session_pass_rates(tmp_path, make_run, make_row):
    rows = [
        make_row(
            f"s{s}",
            "m",
            "passed" if (s + i) % 2 else "failed",
            sample=i,
            steps_to_green=1 if (s + i) % 2 else None,
        )
        for s in range(6)
        for i in range(4)
    ]
    run = make_run(tmp_path, rows, samples=4)
    r = gate(run, ["pass@1 >= 0.5", "pass@4 >= 0.99", "pass@1 >= baseline"], baseline=run)
    assert [x.passed for x in r.rules] == [True, True, True]
    assert r.rules[2].test == "exact sign test on per-session pass rates (one-sided)"
    with pytest.raises(InputError, match="pass@8"):
        gate(run, ["pass@8 >= 0.5"])
    assert {s.status for s in r.sessions} == {"failed"} and r.sessions[0].message.startswith("2/4")


def test_config_file(runs, tmp_path):
    good, bad = runs
    cfg = tmp_path / "gate.yaml"
    cfg.write_text(
        f"baseline: {bad}\nalpha: 0.01\nrules:\n  - pass@1 >= 0.6\n  - pass@1 >= baseline - 0.05\n"
    )
    assert _gate(good, "--config", cfg) == 0
    cfg.write_text("rules: [pass@1 >= 0.6]\nthreshold: 3\n")
    assert _gate(good, "--config", cfg) == 2


def _special(tmp_path, make_run, make_row, name, n_special, key=True):
    """Ten sessions of agent "m": the first ``n_special`` special-cased (green on the visible
    verification tests, red on the held-out ones: status failed), the rest passed; ``key`` False
    writes the rest as rows from before held-out tests existed (no ``special_cased`` key)."""
    rows = []
    for i in range(10):
        if i < n_special:
            rows.append(
                make_row(
                    f"s{i}",
                    "m",
                    "failed",
                    special_cased=True,
                    reason="special_cased: 2 held-out test(s) fail",
                    checks=["held_out"],
                )
            )
        else:
            extra = {"special_cased": False} if key else {}
            rows.append(make_row(f"s{i}", "m", "passed", steps_to_green=1, **extra))
    return make_run(tmp_path / name, rows)


def test_special_case_rate_rule(tmp_path, make_run, make_row, capsys):
    """`special_case_rate==0` fails (exit 1) on a run with a special-cased row, passes on one
    without, whether its rows say false or lack the key; as a baseline rule the paired bootstrap
    decides."""
    one = _special(tmp_path, make_run, make_row, "one", 1)
    js = tmp_path / "g.json"
    assert _gate(one, "--rule", "special_case_rate==0", "--json", js) == 1
    assert "special_case_rate = 0.1 (fails == 0)" in capsys.readouterr().out
    (rule,) = json.loads(js.read_text())["rules"]
    assert (rule["passed"], rule["value"]) == (False, 0.1)
    assert _gate(one, "--rule", "special_case_rate<=0.1", "--rule", "pass@1>=0.9") == 0
    for name, key in (("none", True), ("old", False)):
        clean = _special(tmp_path, make_run, make_row, name, 0, key=key)
        assert _gate(clean, "--rule", "special_case_rate==0", "--rule", "tamper_rate==0") == 0
    many, none = (_special(tmp_path, make_run, make_row, n, x) for n, x in (("many", 8), ("z", 0)))
    assert _gate(many, "--baseline", none, "--rule", "special_case_rate <= baseline") == 1
    r = gate(many, ["special_case_rate <= baseline + 0.05"], baseline=none).rules[0]
    assert not r.passed and r.test.startswith("paired bootstrap over 10 sessions")
    assert (r.value, r.baseline) == (0.8, 0.0)
    assert _gate(none, "--baseline", many, "--rule", "special_case_rate <= baseline") == 0


def test_incomplete_rate_rule(tmp_path, make_run, make_row, capsys):
    """Both readings of a held-out failure are gate metrics: a run whose only held-out failures are
    incomplete fixes passes `special_case_rate==0` and fails `incomplete_rate==0`; as a baseline
    rule incomplete_rate has its paired test."""

    def run(name, n):
        rows = [
            make_row(f"s{i}", "m", "failed", special_cased=False, incomplete=True)
            if i < n
            else make_row(f"s{i}", "m", "passed", steps_to_green=1)
            for i in range(10)
        ]
        return make_run(tmp_path / name, rows)

    two, none = run("two", 2), run("none", 0)
    assert _gate(two, "--rule", "special_case_rate==0") == 0
    assert _gate(two, "--rule", "incomplete_rate==0") == 1
    assert "incomplete_rate = 0.2 (fails == 0)" in capsys.readouterr().out
    assert _gate(two, "--rule", "incomplete_rate<=0.2", "--rule", "special_case_rate==0") == 0
    r = gate(run("eight", 8), ["incomplete_rate <= baseline"], baseline=none).rules[0]
    assert not r.passed and r.test.startswith("paired bootstrap over 10 sessions")
    assert _gate(none, "--baseline", two, "--rule", "incomplete_rate <= baseline") == 0


@pytest.mark.parametrize(
    "text,metric,op,value,margin",
    [
        ("pass@1>=0.6", "pass@1", ">=", 0.6, None),
        (" tamper_rate == 0 ", "tamper_rate", "==", 0.0, None),
        ("infra_error==0", "infra_error", "==", 0.0, None),
        ("path_accuracy@2 > .5", "pa@2", ">", 0.5, None),
        ("pass@1 >= baseline - 0.05", "pass@1", ">=", None, 0.05),
        ("cursor_px<=baseline+5", "cursor_px", "<=", None, 5.0),
        ("special_case_rate==0", "special_case_rate", "==", 0.0, None),
        ("special_case_rate <= baseline", "special_case_rate", "<=", None, 0.0),
        ("pa@3 >= baseline, alpha=0.01", "pa@3", ">=", None, 0.0),
    ],
)
def test_rule_syntax(text, metric, op, value, margin):
    r = parse_rule(text)
    assert (r.metric, r.op, r.value, r.margin) == (metric, op, value, margin)


@pytest.mark.parametrize(
    "text",
    [
        "pass@1 >= baseline + 0.05",
        "tamper_rate == baseline",
        "pass@1 >= 0.5 alpha=0.1",
        "pass@0 >= 1",
        "pa@3 >= baseline alpha=2",
    ],
)
def test_rules_refused(text):
    with pytest.raises(InputError):
        parse_rule(text)


@pytest.mark.docker
@pytest.mark.slow
def test_gate_on_the_bundled_run(bundled_run, tmp_path):
    junit = tmp_path / "g.xml"
    assert (
        _gate(
            bundled_run,
            "--agent",
            "noop",
            "--baseline-agent",
            "oracle",
            "--baseline",
            bundled_run,
            "--rule",
            "pass@1 >= baseline - 0.05",
            "--rule",
            "tamper_rate==0",
            "--junit",
            junit,
        )
        == 1
    )
    xml = JUnitXml.fromfile(str(junit))
    assert (xml.tests, xml.failures, xml.errors, xml.skipped) == (16, 15, 0, 0)
    assert (
        _gate(
            bundled_run,
            "--agent",
            "oracle",
            "--rule",
            "pass@1>=0.6",
            "--rule",
            "infra_error==0",
            "--rule",
            "tamper_rate==0",
        )
        == 0
    )


def test_a_run_of_only_infra_errors_is_exit_3_not_a_model_failure(
    runs, tmp_path, make_run, make_row, capsys
):
    """A model server that is down leaves only infra_error rows: CI must read "infra", with the
    examples' gate.yaml (baseline rules too) as with any rule; never a traceback, never exit 1."""
    good, _ = runs
    down = make_run(tmp_path / "down", [make_row(f"s{i}", "m", "infra_error") for i in range(10)])
    config = PROJECT / "examples" / "ci" / "gate.yaml"
    js = tmp_path / "g.json"
    assert _gate(down, "--baseline", good, "--config", config, "--json", js) == 3
    out, err = capsys.readouterr()
    assert "the infrastructure failed, not the model" in err and "Traceback" not in err, err
    assert "every row of the candidate run for m is infra_error" in out
    result = json.loads(js.read_text())
    assert not any(r["passed"] for r in result["rules"] if r["rule"] != "infra_error == 0")
    assert all(
        r["undefined"] for r in result["rules"] if "baseline" in r["rule"] or "@" in r["rule"]
    )


@pytest.mark.parametrize("rule", ["pass@1>=0.5", "pass@2>=0.5", "pa@3>=0.5", "tamper_rate<=0.1"])
def test_a_metric_over_no_valid_episode_neither_passes_nor_fails(
    tmp_path, make_run, make_row, capsys, rule
):
    """Every session's reference broken: nothing measured the model, so the rule is undefined
    (exit 3, named as such), not a pass (tamper_rate 0 of 0) nor a model failure."""
    rows = [make_row(f"s{i}", "m", "reference_broken", sample=j) for i in range(3) for j in (0, 1)]
    run = make_run(tmp_path / "broken", rows, samples=2)
    assert _gate(run, "--rule", rule) == 3
    out, err = capsys.readouterr()
    assert "no valid episode" in out and "Traceback" not in err, out + err
