"""scripts/preflight_diff.py: the preflights of a suite with a speed path on and off, compared
field by field; a real run on one bundled session, a difference reported, bad input refused."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from script_module import load  # noqa: E402

pdiff = load("scripts/preflight_diff.py")


@pytest.mark.docker
@pytest.mark.slow
def test_the_preflights_repeat_alone_records_what_the_whole_repeat_does(
    tmp_path, make_suite, image, capsys
):
    suite = make_suite(tmp_path / "suite", ["retry-default-attempts"])
    assert pdiff.main(["--path", "verification_rerun", str(suite)]) == 0
    out = capsys.readouterr().out
    assert "1 sessions (1 sound) in 1 suites, 0 different; on " in out, out


def test_a_difference_is_printed_and_exits_1(monkeypatch, tmp_path, make_suite, capsys):
    suite = make_suite(tmp_path / "suite", ["retry-default-attempts"])
    flights = {"": {"ok": True, "passing": ["a::x"]}, "base_baseline": {"ok": True, "passing": []}}

    def arm(suites, off, workers):  # the two arms' records, written here: the comparison is tested
        return {("s", "retry-default-attempts"): dict.fromkeys(pdiff.FIELDS) | flights[off]}

    monkeypatch.setattr(pdiff, "arm", arm)
    assert pdiff.main(["--path", "base_baseline", str(suite)]) == 1
    out = capsys.readouterr().out
    assert "DIFFERENT s/retry-default-attempts passing: on ['a::x'] | off []" in out, out


@pytest.mark.parametrize("path", ["nope", "preflight_cache"])
def test_a_path_no_preflight_runs_with_is_refused(path, capsys):
    with pytest.raises(SystemExit) as e:
        pdiff.main(["--path", path, "jest-bugfix"])
    assert e.value.code == 2 and "--path" in capsys.readouterr().err
