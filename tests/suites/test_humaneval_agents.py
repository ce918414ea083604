"""`etai run --suite humaneval`: agents write completions, the sandbox scores them (real Docker)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harness.cli import main
from suites.humaneval.agents import truncate

TASKS = ["HumanEval/0", "HumanEval/2", "HumanEval/53"]
SUBSET = [a for t in TASKS for a in ("--session", t)]


def test_truncate_cuts_at_the_first_stop_sequence():
    assert truncate("    return x\n\ndef other():\n    pass") == "    return x\n"
    assert truncate("    return x\nprint(f(1))\n# done") == "    return x"
    assert truncate("    return x") == "    return x"


def test_an_agent_that_cannot_complete_code_is_refused(tmp_path, capsys):
    replay = tmp_path / "r.jsonl"
    replay.write_text("")
    assert (
        main(
            [
                "run",
                "--suite",
                "humaneval",
                "--agent",
                f"replay:{replay}",
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 2
    )
    assert "cannot complete code for humaneval" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_unknown_task_id_is_refused(tmp_path, capsys):
    assert (
        main(
            [
                "run",
                "--suite",
                "humaneval",
                "--agent",
                "oracle",
                "--session",
                "HumanEval/999",
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 2
    )
    assert "unknown HumanEval task id(s): HumanEval/999" in capsys.readouterr().err


@pytest.mark.docker
def test_oracle_and_noop_through_the_runner_and_resume(tmp_path, capsys):
    out = tmp_path / "he"
    args = [
        "run",
        "--suite",
        "humaneval",
        "--agent",
        "oracle",
        "--agent",
        "noop",
        "--samples",
        "2",
        "--out",
        str(out),
        "--json",
        "--no-progress",
        *SUBSET,
    ]
    assert main(args) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["n_tasks"] == 3 and s["complete"]
    assert s["agents"]["oracle"]["pass_at_k"] == {"1": 1.0, "2": 1.0}
    assert s["agents"]["noop"]["pass_at_k"] == {"1": 0.0, "2": 0.0}
    lines = (out / "oracle" / "samples.jsonl").read_text().splitlines()
    assert len(lines) == 6
    assert main(args) == 0  # a rerun asks for no completion and scores nothing again
    assert json.loads(capsys.readouterr().out)["agents"] == s["agents"]
    assert (out / "oracle" / "samples.jsonl").read_text().splitlines() == lines


@pytest.mark.docker
@pytest.mark.train
@pytest.mark.slow
def test_a_local_model_completes_code(tmp_path, capsys):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))
    import tiny_model

    model = tiny_model.build(tmp_path / "model", steps=5)
    out = tmp_path / "he"
    assert (
        main(
            [
                "run",
                "--suite",
                "humaneval",
                "--agent",
                f"hf:{model}",
                "--max-new-tokens",
                "16",
                "--out",
                str(out),
                "--json",
                "--no-progress",
                *SUBSET,
            ]
        )
        == 0
    )
    a = json.loads(capsys.readouterr().out)["agents"][f"hf:{model}"]
    assert (
        a["n_samples"] == 3 and sum(a["status_counts"].values()) == 3
    )  # every task scored, whatever it wrote
    [folder] = [p for p in out.iterdir() if p.is_dir()]
    rows = [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]
    assert [r["task_id"] for r in rows] == TASKS
