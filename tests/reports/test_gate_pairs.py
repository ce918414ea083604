"""`etai gate` on several candidate runs of different suites, each with a baseline: every
candidate is paired with the baseline of its own suite (by the suite's name, never by the kind
the runs share), whatever order the baselines are given in. Run folders are written by the
report tests' row writer (tests/reports/conftest.py), read by the real command line."""

from __future__ import annotations

import json
from pathlib import Path

from harness.cli import main


def _run(make_run, make_row, folder: Path, suite: str, prefix: str, ok: bool) -> Path:
    """Six sessions of ``suite`` (ids ``prefix``0..5), every one passed or every one failed."""
    rows = [
        make_row(f"{prefix}{i}", "m", "passed" if ok else "failed",
                 steps_to_green=1 if ok else None, suite=suite)
        for i in range(6)
    ]  # fmt: skip
    return make_run(folder, rows, suite=suite)


def _gate(tmp_path: Path, *args) -> tuple[int, dict | None]:
    out = tmp_path / "g.json"
    out.unlink(missing_ok=True)
    code = main(["gate", *map(str, args), "--json", str(out)])
    return code, json.loads(out.read_text()) if out.exists() else None


def _by_suite(doc: dict) -> dict[str, dict]:
    return {r["rule"].split(":")[0]: r for r in doc["rules"]}


def test_each_candidate_is_paired_with_the_baseline_of_its_suite(tmp_path, make_run, make_row):
    """alpha: as good as its baseline; beta: all six sessions broken against a baseline passing
    them all (exact McNemar, 6 worse of 6: p = 1/64), so the gate fails on beta alone."""
    cand_a = _run(make_run, make_row, tmp_path / "cand-a", "alpha", "a", True)
    cand_b = _run(make_run, make_row, tmp_path / "cand-b", "beta", "b", False)
    base_a = _run(make_run, make_row, tmp_path / "base-a", "alpha", "a", True)
    base_b = _run(make_run, make_row, tmp_path / "base-b", "beta", "b", True)
    for bases in ((base_a, base_b), (base_b, base_a)):
        for extra in ((), ("--allow-mismatch",)):
            args = [x for b in bases for x in ("--baseline", b)]
            code, doc = _gate(tmp_path, cand_a, cand_b, *args, "--rule", "pass@1>=baseline", *extra)
            assert code == 1, (bases, extra, code)
            rules = _by_suite(doc)
            assert rules["alpha"]["passed"] and rules["alpha"]["baseline"] == 1.0
            beta = rules["beta"]
            assert not beta["passed"] and (beta["value"], beta["baseline"]) == (0.0, 1.0)
            assert "on 6 sessions" in beta["detail"] and beta["p"] == 1 / 64


def test_a_candidate_without_a_baseline_of_its_suite(tmp_path, make_run, make_row, capsys):
    """Refused (exit 2, nothing written) naming the candidate and the baseline left over; with
    --allow-mismatch the two are compared (here: the same sessions under another suite name)."""
    cand_a = _run(make_run, make_row, tmp_path / "cand-a", "alpha", "a", True)
    cand_b = _run(make_run, make_row, tmp_path / "cand-b", "beta", "b", False)
    base_a = _run(make_run, make_row, tmp_path / "base-a", "alpha", "a", True)
    base_g = _run(make_run, make_row, tmp_path / "base-g", "gamma", "b", True)
    args = [cand_a, cand_b, "--baseline", base_a, "--baseline", base_g]
    junit = tmp_path / "g.xml"
    capsys.readouterr()
    code, doc = _gate(tmp_path, *args, "--rule", "pass@1>=baseline", "--junit", junit)
    err = capsys.readouterr().err
    assert code == 2 and doc is None and not junit.exists()
    assert f"{cand_b} (suite beta)" in err and f"{base_g} (suite gamma)" in err, err
    assert "--allow-mismatch" in err
    code, doc = _gate(tmp_path, *args, "--rule", "pass@1>=baseline", "--allow-mismatch")
    assert code == 1
    beta = _by_suite(doc)["beta"]
    assert (beta["value"], beta["baseline"]) == (0.0, 1.0) and "on 6 sessions" in beta["detail"]
    # a rule that needs no baseline needs no pair; the baseline left over is named in a note
    code, doc = _gate(tmp_path, *args, "--rule", "alpha:pass@1>=baseline")
    assert code == 0 and [r["rule"] for r in doc["rules"]] == ["alpha: alpha:pass@1>=baseline"]
    assert any(f"{base_g} (suite gamma) is paired with no candidate" in n for n in doc["notes"])


def test_two_baselines_of_one_suite_are_refused(tmp_path, make_run, make_row, capsys):
    cand_a = _run(make_run, make_row, tmp_path / "cand-a", "alpha", "a", True)
    cand_b = _run(make_run, make_row, tmp_path / "cand-b", "beta", "b", True)
    base_1 = _run(make_run, make_row, tmp_path / "base-1", "alpha", "a", True)
    base_2 = _run(make_run, make_row, tmp_path / "base-2", "alpha", "a", False)
    capsys.readouterr()
    code, doc = _gate(
        tmp_path, cand_a, cand_b, "--baseline", base_1, "--baseline", base_2,
        "--rule", "alpha:pass@1>=baseline",
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and doc is None
    assert str(base_1) in err and str(base_2) in err and "alpha" in err, err
