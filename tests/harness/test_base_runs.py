"""harness/runs/base_runs.py and verify.take_baseline ``from_base``: a base + patch session's
baseline from one whole run of the suite's base and a run of the tests related to its patch, in
real sandboxes. With the speed path on and off (``base_baseline``) the preflight measures the same
passing tests; the base runs once for the sessions of a suite; a test file the patch cannot reach
answers from the base's run, and a pristine workspace that is green is found green either way."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from harness.agents import AgentContext, from_spec
from harness.runs import base_runs
from harness.runs.loop import preflight
from harness.sandbox import Limits, provider
from harness.suites.load import load_suite

sys.path.insert(0, str(Path(__file__).parent))  # the helper modules beside this file
from recording import GradedRequests  # noqa: E402

pytestmark = [pytest.mark.docker, pytest.mark.slow]

BUNDLED = Path(__file__).resolve().parents[2] / "suites" / "jest-bugfix"
BUG = "const nickname = user.profile.nickname;"
# Beside the session's own test file: one the patch cannot reach, passing, and one with a test
# failing in the base (not passing at the start, wherever it is measured).
EXTRA = {
    "src/other.js": "exports.twice = (x) => 2 * x;\n",
    "tests/other.test.js": "const { twice } = require('../src/other');\n"
    "test('doubles', () => expect(twice(2)).toBe(4));\n",
    "tests/stand.test.js": "test('stands', () => expect(1).toBe(1));\n"
    "test('falls', () => expect(1).toBe(2));\n",
}


@pytest.fixture
def suite(tmp_path):
    first = json.loads((BUNDLED / "sessions.jsonl").read_text(encoding="utf-8").splitlines()[0])
    first.pop("held_out_tests", None)
    root = tmp_path / "suite"
    shutil.copytree(BUNDLED / first["workspace"], root / "base")
    for rel, text in EXTRA.items():
        (root / "base" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "base" / rel).write_text(text)
    patches = {  # two sessions with their bug (a comment apart), one whose patch fixes it
        "a": {"old": BUG, "new": BUG + " // a"},
        "b": {"old": BUG, "new": BUG + " // b"},
        "fixed": {"old": BUG, "new": BUG.replace("profile.", "profile?.")},
    }
    lines = [
        json.dumps(
            dict(
                first,
                session_id=sid,
                workspace={"base": "base", "patch": [dict(p, file="src/profile.js")]},
            )
        )
        for sid, p in patches.items()
    ]
    (root / "sessions.jsonl").write_text("\n".join(lines) + "\n")
    return load_suite(root)


def test_the_baseline_from_the_base_measures_what_a_whole_run_does(suite, image, monkeypatch):
    prepared = provider("docker").prepare(Limits(memory_mb=1024, timeout_s=60), image=image)
    oracle = from_spec("oracle", AgentContext(suite))
    flights: dict[str, dict] = {}
    starts: dict[str, list[Path]] = {}
    harvests: list[str] = []  # the store is filled from the base's pristine run too
    real_harvest = base_runs.transforms.harvest
    monkeypatch.setattr(
        base_runs.transforms, "harvest", lambda sb: harvests.append("x") or real_harvest(sb)
    )
    firsts: dict[str, dict] = {}
    try:
        for arm, off in (("on", ""), ("off", "base_baseline")):
            monkeypatch.setenv("ETAI_SPEED_OFF", off)
            base_runs.forget()
            starts[arm], harvests[:] = [], []
            for s in suite.sessions:
                graded: list[dict] = []

                def start(x, g=graded):
                    starts[arm].append(x.workspace)
                    sb = prepared.start(x.workspace)
                    return sb if x.workspace == suite.path / "base" else GradedRequests(sb, g)

                flights[arm, s.session_id] = preflight(s, oracle, start_sandbox=start)
                firsts[arm, s.session_id] = graded[0]  # the baseline's run
            assert len(harvests) == len(suite.sessions) + (arm == "on"), (arm, harvests)
    finally:
        prepared.cleanup()
        base_runs.forget()
    base = suite.path / "base"
    # On: the base ran once, for all three sessions; each baseline ran what its patch reaches.
    assert [w for w in starts["on"] if w == base] == [base] and base not in starts["off"]
    for sid in ("a", "b", "fixed"):
        on, off = firsts["on", sid], firsts["off", sid]
        assert on["scope"]["changed"] == ["src/profile.js"], on
        assert on["scope"]["include"] == ["tests/profile.test.js"], on
        assert "scope" not in off and not off.get("test_files"), off  # a whole run
    # The same preflight either way: the passing tests (those of files the patch cannot reach
    # from the base's run), and for the session whose patch fixes the bug, green at the start.
    for sid in ("a", "b"):
        on, off = flights["on", sid], flights["off", sid]
        assert on["ok"] and off["ok"], (on, off)
        assert on["passing"] == off["passing"] and on["gold"] == off["gold"]
        assert "tests/other.test.js::doubles" in on["passing"]
        assert "tests/stand.test.js::stands" in on["passing"]
        assert "tests/stand.test.js::falls" not in on["passing"]
    for arm in ("on", "off"):
        assert flights[arm, "fixed"] == {
            "ok": False,
            "reason": "workspace is green before any action",
        }
