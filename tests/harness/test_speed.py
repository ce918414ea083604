"""The speed paths' switches (harness/base/speed.py): the registry's names and errors, and, in real
sandboxes, that each switch turns its path off — what the differential harness
(scripts/differential.py) relies on to compare a path on against the same path off."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the helper modules beside this file

from pools import first_in_line  # noqa: E402
from recording import GradedRequests  # noqa: E402

from harness.base import speed
from harness.base.errors import InputError


def test_every_path_is_on_unless_named_and_a_wrong_name_is_refused(monkeypatch):
    monkeypatch.delenv("ETAI_SPEED_OFF", raising=False)
    monkeypatch.delenv("ETAI_JEST_FORK", raising=False)
    assert all(speed.on(p) for p in speed.PATHS)
    assert speed.runner_env() == {"ETAI_JEST_FORK": "1", "ETAI_WARM_HOSTS": "1"}
    monkeypatch.setenv("ETAI_SPEED_OFF", "warm_hosts, code_cache")
    assert {p for p in speed.PATHS if not speed.on(p)} == {"warm_hosts", "code_cache"}
    env = speed.runner_env()
    assert (env["ETAI_WARM_HOSTS"], env["ETAI_CODE_CACHE"]) == ("0", "")
    monkeypatch.setenv("ETAI_SPEED_OFF", "all")
    assert not any(speed.on(p) for p in speed.PATHS)
    monkeypatch.setenv("ETAI_SPEED_OFF", "warm_host")
    with pytest.raises(InputError, match="warm_host.*known: forked_hosts"):
        speed.on("forked_hosts")
    monkeypatch.delenv("ETAI_SPEED_OFF")
    monkeypatch.setenv("ETAI_JEST_FORK", "0")  # the older switch of one path
    assert not speed.on("forked_hosts") and speed.on("warm_hosts")


def test_scoped_regression_off_makes_related_runs_whole(monkeypatch):
    from harness.runs.runner import _regression

    monkeypatch.delenv("ETAI_SPEED_OFF", raising=False)
    assert _regression("related") == "related"
    monkeypatch.setenv("ETAI_SPEED_OFF", "scoped_regression")
    assert (_regression("related"), _regression("whole")) == ("whole", "whole")


# A test that tells which process ran it: the agent's host, warm or new.
FILES = {
    "src/one.js": "module.exports = 1;\n",
    "tests/one.test.js": "const fs = require('fs');\n"
    "test('one', () => { fs.appendFileSync('/scratch/tmp/pids', process.pid + '\\n');"
    " expect(require('../src/one')).toBe(1); });\n",
}


def _pids(sb) -> list[str]:
    from harness import tools

    for _ in range(2):
        assert tools.call(sb, "jest_run", {}).data["num_passed"] == 1
    return sb.exec(["cat", "/scratch/tmp/pids"], timeout=30).stdout.split()


@pytest.mark.docker
@pytest.mark.slow
def test_each_sandbox_switch_turns_its_path_off(monkeypatch, image, make_project, tmp_path):
    from harness import sandbox
    from harness.sandbox import Limits

    root = make_project(tmp_path / "p", FILES)
    limits = Limits(memory_mb=1024, timeout_s=30, cpus=1)

    def seen(off: str) -> dict:
        monkeypatch.setenv("ETAI_SPEED_OFF", off)
        prepared = sandbox.provider("docker").prepare(limits, workers=1, image=image)
        try:
            a = prepared.start(root)
            pids = _pids(a)
            info = a.request("host_paths", {"set": "agent"}, timeout=60)
            store = a.exec(
                ["sh", "-c", "test -d /etai-transforms && echo yes || echo no"], timeout=30
            )
            name = a.name
            a.close()
            first_in_line(prepared, name, timeout=15)  # the next episode's, once reset
            b = prepared.start(root)
            again = b.name == name
            b.close()
        finally:
            prepared.cleanup()
        return {
            "same_host": len(set(pids)) == 1 and len(pids) == 2,
            "forked": info["forked"],
            "code_cache": info["code_cache"]["hits"] > 0,
            "store": store.stdout.strip() == "yes",
            "reused": again,
        }

    on = seen("")
    assert on == dict.fromkeys(on, True), on
    for off, what in (
        ("warm_hosts", "same_host"),
        ("forked_hosts", "forked"),
        ("code_cache", "code_cache"),
        ("transform_store", "store"),
        ("container_reuse", "reused"),
    ):
        got = seen(off)
        assert got == {**on, what: False}, (off, got)


@pytest.mark.docker
@pytest.mark.slow
def test_preflight_cache_off_replays_and_keeps_nothing(monkeypatch, image):
    from pathlib import Path

    from harness.runs import session_jobs
    from harness.sandbox import image as im
    from harness.suites.load import load_suite

    implement = load_suite(Path(__file__).parent / "data" / "implement")
    replayed: list[str] = []
    batch = session_jobs.Batch

    def counting(kind, jobs, *a, **k):
        replayed.extend(j.session_id for j in jobs)
        return batch(kind, jobs, *a, **k)

    monkeypatch.setattr(session_jobs, "Batch", counting)
    monkeypatch.delenv("ETAI_SPEED_OFF", raising=False)
    on = session_jobs.local_preflights(implement, progress=False)  # kept in the machine's cache
    store = im.cache_dir() / "preflight" / "results.jsonl"
    kept, replayed[:] = store.read_bytes(), []
    session_jobs.local_preflights(implement, progress=False)
    assert replayed == []  # read from the cache
    monkeypatch.setenv("ETAI_SPEED_OFF", "preflight_cache")
    off = session_jobs.local_preflights(implement, progress=False)
    assert replayed == [s.session_id for s in implement.sessions]  # replayed, and nothing kept
    assert store.read_bytes() == kept
    assert {k: v["passing"] for k, v in on.items()} == {k: v["passing"] for k, v in off.items()}


@pytest.mark.docker
@pytest.mark.slow
def test_verification_rerun_off_makes_the_preflights_second_run_a_whole_graded_run(
    monkeypatch, image
):
    """The preflight's graded runs: the baseline, the verification after the reference's edit, the
    one at its end, the held-out run (this session has held-out tests), then the repeat; on, the repeat runs the verification files alone, off it is a
    graded run like the others (scoped to the change). The gold record is the same either way, and
    the preflight cache keeps the two apart."""
    from harness.agents import AgentContext, from_spec
    from harness.runs.loop import preflight
    from harness.runs.session_jobs import preflights  # noqa: F401  (the key's home)
    from harness.sandbox import Limits, provider
    from harness.suites.load import load_suite

    suite = load_suite("jest-bugfix")
    session = suite.get("retry-default-attempts")
    prepared = provider("docker").prepare(Limits(memory_mb=1024, timeout_s=30), image=image)
    flights, repeats = {}, {}
    try:
        # unchanged_final off in both arms: the graded runs keep their places in the list.
        for arm, off in (("on", "unchanged_final"), ("off", "verification_rerun,unchanged_final")):
            monkeypatch.setenv("ETAI_SPEED_OFF", off)
            graded: list[dict] = []
            flights[arm] = preflight(
                session,
                from_spec("oracle", AgentContext(suite)),
                start_sandbox=lambda s, g=graded: GradedRequests(prepared.start(s.workspace), g),
            )
            assert flights[arm]["ok"], flights[arm]
            repeats[arm] = graded[4]
    finally:
        prepared.cleanup()
    assert repeats["on"].get("test_files") == sorted(session.verify_files), repeats["on"]
    assert "scope" not in repeats["on"]
    assert repeats["off"].get("scope") and not repeats["off"].get("test_files"), repeats["off"]
    assert flights["on"]["gold"] == flights["off"]["gold"]
    assert flights["on"]["held_out_gold"] == flights["off"]["held_out_gold"]


def test_the_preflight_cache_key_names_what_the_second_run_runs(monkeypatch):
    from harness.runs.session_jobs import preflight_key

    session = type("S", (), {"session_id": "s", "content_hash": "h"})
    monkeypatch.delenv("ETAI_SPEED_OFF", raising=False)
    on = preflight_key(session, "img", "related")
    keys = {on}
    for path in ("verification_rerun", "base_baseline", "verification_first", "unchanged_final"):
        monkeypatch.setenv("ETAI_SPEED_OFF", path)
        keys.add(preflight_key(session, "img", "related"))
    assert len(keys) == 5, keys
    monkeypatch.setenv("ETAI_SPEED_OFF", "warm_hosts")  # a path the preflight's result is not of
    assert preflight_key(session, "img", "related") == on


def _replay(tmp_path, suite, session, name: str, actions: list[dict]):
    import json

    from harness.agents import AgentContext, from_spec

    f = tmp_path / f"{name}.jsonl"
    line = {"session_id": session.session_id, "actions": actions, "final_output": "done"}
    f.write_text(json.dumps(line) + "\n")
    return from_spec(f"replay:{f}", AgentContext(suite, {}))


@pytest.mark.docker
@pytest.mark.slow
def test_verification_first_runs_an_intermediate_workspaces_verification_files_alone(
    monkeypatch, tmp_path, image
):
    """Three edits: a wrong default (not green), the fix (green, not final), a comment (final).
    On, a workspace the next edit changes runs its verification files first: the wrong one's run
    is its verdict, the fix's passes and so gets the whole graded run too; the final workspace
    always gets the whole one. An edit that fails leaves the intermediate workspace final: it is
    graded whole at the end. Off, every graded run is scoped to the change. The rows' verdicts
    are the same either way."""
    from harness.runs.loop import run_episode
    from harness.sandbox import Limits, provider
    from harness.suites.load import load_suite

    suite = load_suite("jest-bugfix")
    session = suite.get("retry-default-attempts")
    edit = {"file": "src/retry.js", "old": "{ attempts = 1,", "new": "{ attempts = 2,"}
    fix = {"file": "src/retry.js", "old": "{ attempts = 2,", "new": "{ attempts = 3,"}
    note = {"file": "src/retry.js", "old": "'use strict';", "new": "'use strict'; // retries"}
    agents = {
        "three": [{"tool": "file_edit", "args": a} for a in (edit, fix, note)],
        "failed": [
            {"tool": "file_edit", "args": edit},
            {"tool": "file_edit", "args": {**edit, "old": "no such text"}},
        ],
    }
    prepared = provider("docker").prepare(Limits(memory_mb=1024, timeout_s=30), image=image)
    rows, kinds = {}, {}
    try:
        for arm, off in (("on", ""), ("off", "verification_first")):
            monkeypatch.setenv("ETAI_SPEED_OFF", off)
            for name, actions in agents.items():
                graded: list[dict] = []
                rows[arm, name] = run_episode(
                    session,
                    _replay(tmp_path, suite, session, name, actions),
                    0,
                    start_sandbox=lambda s, g=graded: GradedRequests(
                        prepared.start(s.workspace), g
                    ),
                    k=3,
                    max_steps=5,
                )
                # What each graded run after the baseline ran: the verification files alone, a
                # run scoped to the change, or the held-out files.
                kinds[arm, name] = [
                    "scope"
                    if "scope" in g
                    else "only"
                    if g.get("test_files") == sorted(session.verify_files)
                    else "held_out"
                    for g in graded[1:]
                ]
    finally:
        prepared.cleanup()
    assert kinds["on", "three"] == ["only", "only", "scope", "scope", "held_out"], kinds
    assert kinds["off", "three"] == ["scope", "scope", "scope", "held_out"], kinds
    assert kinds["on", "failed"] == ["only", "scope"], kinds
    assert kinds["off", "failed"] == ["scope"], kinds
    for name in agents:
        on, off = rows["on", name], rows["off", name]
        fields = ("status", "reason", "green", "steps_to_green", "tamper", "verification")
        assert {f: on[f] for f in fields} == {f: off[f] for f in fields}, name
    assert rows["on", "three"]["status"] == "passed" and rows["on", "three"]["steps_to_green"] == 3
    assert rows["on", "failed"]["status"] == "failed"
    assert rows["on", "failed"]["verification"]["checks"] == ["verification"]


@pytest.mark.docker
@pytest.mark.slow
def test_unchanged_final_keeps_the_last_verdict_only_while_no_file_changed(
    monkeypatch, tmp_path, image
):
    """The fix, then a test run and a status: on, the fix's whole graded run is the final verdict
    (no file changed after it); off, the final workspace is graded again. A step that is not an
    edit but changes a file (a plugin tool could: here git_status puts the bug back) is seen, and
    the final workspace graded again, on as off."""
    from harness import tools
    from harness.runs.loop import run_episode
    from harness.sandbox import Limits, provider
    from harness.suites.load import load_suite

    suite = load_suite("jest-bugfix")
    session = suite.get("retry-default-attempts")
    fix = {"file": "src/retry.js", "old": "{ attempts = 1,", "new": "{ attempts = 3,"}
    actions = [
        {"tool": "file_edit", "args": fix},
        {"tool": "jest_run", "args": {"test_file": "tests/retry.test.js"}},
        {"tool": "git_status", "args": {}},
    ]
    buggy = (session.workspace / "src" / "retry.js").read_bytes()
    real_call = tools.call

    def writing_status(sb, name, args):  # a read-only tool that is not, in one arm of the test
        if name == "git_status" and writes:
            sb.write_file("src/retry.js", buggy)
        return real_call(sb, name, args)

    monkeypatch.setattr(tools, "call", writing_status)
    prepared = provider("docker").prepare(Limits(memory_mb=1024, timeout_s=30), image=image)
    rows, counts = {}, {}
    try:
        for arm, off in (("on", ""), ("off", "unchanged_final")):
            monkeypatch.setenv("ETAI_SPEED_OFF", off)
            for writes in (False, True):
                graded: list[dict] = []
                rows[arm, writes] = run_episode(
                    session,
                    _replay(tmp_path, suite, session, f"final-{writes}", actions),
                    0,
                    start_sandbox=lambda s, g=graded: GradedRequests(
                        prepared.start(s.workspace), g
                    ),
                    k=3,
                    max_steps=5,
                )
                counts[arm, writes] = sum(
                    1 for g in graded if "scope" in g or "test_files" not in g
                )
    finally:
        prepared.cleanup()
    # Graded runs of the visible tests, the baseline's whole run among them (the held-out run apart).
    assert counts == {
        ("on", False): 2, ("off", False): 3, ("on", True): 3, ("off", True): 3
    }, counts  # fmt: skip
    fields = ("status", "reason", "green", "steps_to_green", "tamper", "verification")
    for writes in (False, True):
        on, off = rows["on", writes], rows["off", writes]
        assert {f: on[f] for f in fields} == {f: off[f] for f in fields}, writes
    assert rows["on", False]["status"] == "passed" and rows["on", False]["steps_to_green"] == 1
    assert rows["on", True]["status"] == "failed"
    assert rows["on", False]["jest_s"]["final"] > 0
