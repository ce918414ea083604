"""The speed paths' switches (harness/base/speed.py): the registry's names and errors, and, in real
sandboxes, that each switch turns its path off — what the differential harness
(scripts/differential.py) relies on to compare a path on against the same path off."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the helper modules beside this file

from pools import first_in_line  # noqa: E402

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
