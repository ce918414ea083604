"""harness/runs/loop.py: which Jest runs an episode costs, in a real Docker sandbox on a bundled session.

An episode that called no tool that writes files needs no verification run once the preflight
found the pristine workspace not green (loop.UNCHANGED); every other episode is verified.
"""

from __future__ import annotations

import time

import pytest

from harness.agents import AgentContext, from_spec
from harness.agents._builtin import ScriptedEpisode
from harness.agents.etai_format import Action
from harness.grading.verify import Gold
from harness.runs import loop
from harness.runs.loop import preflight, run_episode
from harness.sandbox import Limits, _docker, provider
from harness.suites.load import load_suite

pytestmark = [pytest.mark.docker, pytest.mark.slow]


class Counting:
    """A sandbox that records the op of every request it forwards (a Jest run is op ``jest``)."""

    def __init__(self, sb, ops: list[str]):
        self._sb, self._ops = sb, ops

    def request(self, op, payload, **kw):
        self._ops.append(op)
        return self._sb.request(op, payload, **kw)

    def __getattr__(self, name):
        return getattr(self._sb, name)


class RunsTheTests:
    """Runs the failing test file once, changes nothing, finishes."""

    spec, fingerprint = "runs-the-tests", ""

    def __init__(self, test_file: str):
        self.test_file = test_file

    def start(self, task, sample):
        return ScriptedEpisode([Action("jest_run", {"test_file": self.test_file})])


@pytest.fixture(scope="module")
def setting(image):
    suite = load_suite("jest-bugfix")
    session = suite.get("retry-default-attempts")
    ctx = AgentContext(suite)
    prepared = provider("docker").prepare(Limits(memory_mb=1024, timeout_s=30), image=image)
    try:
        flight = preflight(
            session, from_spec("oracle", ctx), start_sandbox=lambda s: prepared.start(s.workspace)
        )
        assert flight["ok"], flight
        yield suite, session, ctx, prepared, flight
    finally:
        prepared.cleanup()


def _episode(setting, agent, *, with_preflight: bool):
    suite, session, ctx, prepared, flight = setting
    ops: list[str] = []
    row = run_episode(
        session,
        agent,
        0,
        start_sandbox=lambda s: Counting(prepared.start(s.workspace), ops),
        k=3,
        max_steps=10,
        passing=flight["passing"] if with_preflight else None,
        gold=Gold.from_json(flight["gold"]) if with_preflight else None,
    )
    return row, ops.count("jest")


def test_an_episode_that_changed_nothing_costs_no_jest_run(setting):
    row, runs = _episode(setting, from_spec("noop", setting[2]), with_preflight=True)
    assert runs == 0
    assert (row["status"], row["green"], row["checks"]) == ("failed", False, ["verification"])
    assert "no file was changed" in row["reason"]


def test_the_agents_own_test_runs_are_its_only_ones_when_it_changed_nothing(setting):
    session = setting[1]
    agent = RunsTheTests(session.verify_files[0])
    row, runs = _episode(setting, agent, with_preflight=True)
    assert runs == 1 and [s["tool"] for s in row["steps"]] == ["jest_run"]
    assert row["status"] == "failed" and not row["green"]


def test_without_a_preflight_an_unchanged_workspace_is_verified(setting):
    row, runs = _episode(setting, from_spec("noop", setting[2]), with_preflight=False)
    assert runs >= 1  # the baseline and the verification (one run may serve both)
    assert row["status"] == "failed" and "no file was changed" not in (row["reason"] or "")


def test_an_episode_that_edits_is_verified(setting):
    row, runs = _episode(setting, from_spec("oracle", setting[2]), with_preflight=True)
    assert runs >= 1 and row["green"] and row["status"] == "passed"
    # Where its time went: every phase it went through, within the episode's own duration.
    phases = row["phases"]
    assert set(phases) == {"acquire", "baseline", "agent", "tools", "verify", "close"}, phases
    assert phases["acquire"] > 0 and phases["tools"] > 0 and phases["verify"] > 0, phases
    assert sum(phases.values()) <= row["duration_s"] + 0.01, (phases, row["duration_s"])


def test_an_episode_records_jests_own_time_and_its_floor(setting):
    """``jest_s``: the agent's runs (the oracle's trace has one jest_run), every graded run, and the
    final visible verdict's run; the floor (agent + final) is inside the episode's wall time. The
    agent's observation of its jest_run does not carry Jest's time."""
    row, runs = _episode(setting, from_spec("oracle", setting[2]), with_preflight=True)
    js, steps = row["jest_s"], row["steps"]
    (run,) = [s for s in steps if s["tool"] == "jest_run"]
    assert run["jest_s"] > 0 and js["agent"] == run["jest_s"], (js, steps)
    assert 0 < js["final"] <= js["graded"], js
    assert js["agent"] + js["final"] < row["duration_s"], (js, row["duration_s"])
    (seen,) = [o for o in row["observations"] if o["tool_called"] == "jest_run"]
    assert "jest_s" not in seen["execution_result"] and "_harness" not in seen["execution_result"]
    # A noop episode runs no Jest at all: every figure is zero.
    row, _ = _episode(setting, from_spec("noop", setting[2]), with_preflight=True)
    assert row["jest_s"] == {"agent": 0.0, "graded": 0.0, "final": 0.0}, row["jest_s"]


def test_the_preflight_runs_jest_once_on_the_untouched_workspace(setting, monkeypatch):
    """Its baseline run also gives the verdict "not green at the start" (the workspace is the same):
    retry-default-attempts (read, edit, run) costs the baseline, the verification after the edit,
    the trace's own run and the second verification of the reference's green: four Jest runs. The
    verdict at the end is the edit's (no file changed since: speed path ``unchanged_final``); with
    that path off, the end verifies again (a run came after the edit): five. Its held-out tests add
    three: their run after the green, their second run, and their run on the pristine workspace
    (in a sandbox of its own)."""
    suite, session, ctx, prepared, _ = setting
    assert [st.tool_called for st in session.execution_trace] == [
        "file_read",
        "file_edit",
        "jest_run",
    ]
    for off, runs in (("", 4), ("unchanged_final", 5)):
        monkeypatch.setenv("ETAI_SPEED_OFF", off)
        ops: list[str] = []
        flight = preflight(
            session,
            from_spec("oracle", ctx),
            start_sandbox=lambda s, ops=ops: Counting(prepared.start(s.workspace), ops),
        )
        assert flight["ok"], flight
        assert session.held_out and ops.count("jest") == runs + 3, (off, ops)


class OutOfTime(RunsTheTests):
    """An agent whose time budget (the in-training evaluation's ``deadline``) is already spent."""

    def __init__(self, test_file: str):
        super().__init__(test_file)
        self.deadline = time.monotonic()


def test_a_sandbox_not_ready_by_the_agents_deadline_is_given_up_and_closed(setting, image):
    suite, session, ctx, _, flight = setting
    # A pool of its own: a closed sandbox goes back to its pool, which removes it at cleanup; one
    # never closed is not the pool's any more, and would be left behind.
    prepared = provider("docker").prepare(Limits(memory_mb=1024, timeout_s=30), image=image)
    started = []

    def start(s):
        sb = prepared.start(s.workspace)
        started.append(sb.name)
        return sb

    try:
        row = run_episode(
            session,
            OutOfTime(session.verify_files[0]),
            0,
            start_sandbox=start,
            k=3,
            max_steps=10,
            passing=flight["passing"],
            gold=Gold.from_json(flight["gold"]),
        )
        assert row["status"] == "skipped_budget" and row["steps"] == [], row
        assert "ran out while its sandbox started" in row["reason"]
        loop._await_abandoned()  # what the process does at exit
    finally:
        prepared.cleanup()
    assert len(started) == 1 and started[0] not in _docker.leftovers()  # it started, then closed
