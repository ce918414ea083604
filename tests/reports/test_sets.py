"""The run of a suite set (reports/_sets.py): one run folder per project and suite-set.json naming
them, as `etai run --suite SET` writes it, read by the real `etai report` and `etai gate` as one
benchmark. Rows are appended by the run's own writer (harness.runs.results.ResultStore); the
pooled standard errors are the hand-worked ones of tests/reports/test_clusters.py: p1's three
sessions pass, p2's three fail, mean 0.5, by session sqrt(0.05), by project 0.5."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from conftest import row
from etai_cmd import etai

from harness.runs.results import ResultStore, write_json_atomic
from harness.session import suite_set


def _member(folder: Path, project: str, ok: bool, agent: str = "m", k: int = 3) -> None:
    suite = f"bench-{project}"
    store = ResultStore(folder)
    for i in range(3):
        store.append(
            row(f"s{i}", agent, "passed" if ok else "failed", steps_to_green=1 if ok else None,
                project=project, suite=suite, k=k)
        )  # fmt: skip
    write_json_atomic(folder / "summary.json", {"suite": suite, "k": k, "complete": True})


def _set(
    root: Path, outcomes: dict[str, bool], agent: str = "m", name: str = "bench", **kw
) -> Path:
    """A suite set run: a member per project, each ``outcomes[project]`` for all three sessions;
    a project mapped to None is named by the set but has not run."""
    root.mkdir(parents=True)
    for project, ok in outcomes.items():
        if ok is not None:
            _member(root / project, project, ok, agent, **kw.get(project, {}))
    (root / suite_set.SET_FILE).write_text(suite_set.dump(name, list(outcomes)))
    return root


def _gate(tmp_path: Path, *args: str):
    p = etai("gate", *args, "--json", str(tmp_path / "g.json"))
    doc = json.loads((tmp_path / "g.json").read_text()) if p.returncode in (0, 1, 3) else None
    return p, doc


def test_gate_gives_one_verdict_over_the_projects_pooled(tmp_path):
    run = _set(tmp_path / "run", {"p1": True, "p2": False})
    p, doc = _gate(tmp_path, str(run), "--rule", "pass@1>=0.4")
    assert p.returncode == 0, p.stdout + p.stderr
    [rule] = doc["rules"]  # one verdict, not one per project
    assert rule["rule"] == "pass@1>=0.4" and rule["value"] == 0.5 and rule["passed"]
    assert rule["projects"] == 2 and rule["mde_by"] == "project"
    assert rule["se_session"] == pytest.approx(0.05**0.5)
    assert rule["se_project"] == pytest.approx(0.5)
    # every session named with its member, and its project
    got = {(s["session_id"], s["project"], s["status"]) for s in doc["sessions"]}
    assert got == {(f"{p}/s{i}", p, "passed" if p == "p1" else "failed")
                   for p in ("p1", "p2") for i in range(3)}  # fmt: skip
    p, doc = _gate(tmp_path, str(run), "--rule", "pass@1>=0.6")
    assert p.returncode == 1 and not doc["rules"][0]["passed"], p.stdout
    # a rule prefixed with the set's name applies to the pooled rows
    p, doc = _gate(tmp_path, str(run), "--rule", "bench:pass@1>=0.4")
    assert p.returncode == 0 and doc["rules"][0]["projects"] == 2, p.stdout + p.stderr


def test_gate_pairs_a_baseline_set_member_by_member(tmp_path):
    cand = _set(tmp_path / "cand", {"p1": True, "p2": False})
    base = _set(tmp_path / "base", {"p1": True, "p2": True}, agent="b")
    p, doc = _gate(tmp_path, str(cand), "--baseline", str(base), "--rule", "pass@1>=baseline")
    assert p.returncode == 0, p.stdout + p.stderr  # 3 worse of 6: exact McNemar p = 0.125
    [rule] = doc["rules"]
    assert (rule["value"], rule["baseline"]) == (0.5, 1.0) and rule["projects"] == 2
    assert "3 session(s) worse, 0 better" in rule["detail"] and rule["p"] == pytest.approx(0.125)
    other = _set(tmp_path / "other", {"p1": True, "p3": True}, agent="b")
    p, _ = _gate(tmp_path, str(cand), "--baseline", str(other), "--rule", "pass@1>=baseline")
    assert p.returncode == 2 and "the sets differ" in p.stderr, p.stderr


def test_a_member_not_run_keeps_the_gate_from_deciding(tmp_path):
    run = _set(tmp_path / "run", {"p1": True, "p2": None})
    p, doc = _gate(tmp_path, str(run), "--rule", "pass@1>=0.4")
    assert p.returncode == 3, p.stdout + p.stderr
    assert any("p2 of the candidate set" in x for x in doc["incomplete"]), doc["incomplete"]
    p = etai("report", str(run), "--out", str(tmp_path / "rep"), "--format", "json")
    assert p.returncode == 0 and "p2 of bench has not run" in p.stderr, p.stderr


def test_report_on_a_set_run_pools_its_suites(tmp_path):
    run = _set(tmp_path / "run", {"p1": True, "p2": False})
    out = tmp_path / "rep"
    p = etai("report", str(run), "--out", str(out), "--format", "json")
    assert p.returncode == 0, p.stderr
    doc = json.loads((out / "report.json").read_text())
    assert doc["pooled"]["suites"] == ["bench-p1", "bench-p2"]
    cell = doc["pooled"]["arms"]["m"]["pass@1"]
    assert (cell["value"], cell["sessions"], cell["projects"]) == (0.5, 6, 2)
    assert cell["se_project"] == pytest.approx(0.5)


@pytest.mark.parametrize(
    "damage, message",
    [
        ({"format": "other"}, "format 'etai-suite-set'"),
        ({"members": ["p1", "p1"]}, "named twice: p1"),
        ({"members": ["../p1"]}, "not a folder name inside the set"),
        ({"extra": 1}, "unknown key(s): extra"),
    ],
)
def test_a_bad_set_file_is_exit_2_naming_it(tmp_path, damage, message):
    run = _set(tmp_path / "run", {"p1": True, "p2": False})
    f = run / suite_set.SET_FILE
    f.write_text(json.dumps({**json.loads(f.read_text()), **damage}))
    for argv in (["gate", str(run), "--rule", "pass@1>=0.4"],
                 ["report", str(run), "--out", str(tmp_path / "rep")]):  # fmt: skip
        p = etai(*argv)
        assert p.returncode == 2 and str(f) in p.stderr and message in p.stderr, p.stderr
    assert not (tmp_path / "rep").exists()


def test_members_run_with_different_k_do_not_pool(tmp_path):
    run = _set(tmp_path / "run", {"p1": True, "p2": False}, p2={"k": 5})
    p, _ = _gate(tmp_path, str(run), "--rule", "pass@1>=0.4")
    assert p.returncode == 2 and "different k" in p.stderr and "rerun with one -k" in p.stderr


def test_a_fix_window_pools_the_projects_with_a_fix_inside_it(tmp_path):
    """p1's fixes are of 2020, p2's of 2024: after 2023 only p2 is pooled, by the gate and the
    report alike, and p1 is named as left out rather than failing the command."""
    run = _set(tmp_path / "run", {"p1": True, "p2": False})
    for project, day in (("p1", "2020-05-01"), ("p2", "2024-05-01")):
        f = run / project / "results.jsonl"
        rows = [{**json.loads(x), "fix_date": day} for x in f.read_text().splitlines()]
        f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    p, doc = _gate(tmp_path, str(run), "--rule", "pass@1>=0.4", "--since", "2023-01-01")
    assert p.returncode == 1, p.stdout + p.stderr  # p2's three fail
    [rule] = doc["rules"]
    assert rule["value"] == 0.0 and rule["projects"] == 1
    assert any("p1: no session fixed on or after 2023-01-01" in n for n in doc["notes"]), doc
    out = tmp_path / "rep"
    p = etai("report", str(run), "--out", str(out), "--format", "json", "--since", "2023-01-01")
    assert p.returncode == 0 and "suite bench-p1: no session" in p.stderr, p.stderr
    assert [c["suite"] for c in json.loads((out / "report.json").read_text())["suites"]] == [
        "bench-p2"
    ]
