"""Forked Jest hosts (runner/fork.cc, runner.js ``forkedHost``, docs/sandbox.md#forked-hosts), real
Docker: by default every Jest host but one is a child of that one, the zygote (which ran only the
template); the runs give the verdicts a started host gives; a graded run's host is ended after it
and replaced. With ``ETAI_JEST_FORK=0`` the same checks show started hosts (the control)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the helper modules beside this file

from procs import is_host, is_runner, processes  # noqa: E402

from harness import sandbox, tools
from harness.grading.jest import from_runner
from harness.sandbox import Limits, Status

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# One agent host and one fresh host: which process is which can be told from the counts.
LIMITS = Limits(memory_mb=1024, timeout_s=30, cpus=1)
FILES = {
    "src/double.js": "module.exports = (x) => x + 2;\n",  # right for 2 only
    "tests/double.test.js": "const d = require('../src/double');\n"
    "test('two', () => expect(d(2)).toBe(4));\n"
    "test('three', () => expect(d(3)).toBe(6));\n",
    # Node reads its process ids once, at start: a forked host must not show its zygote's.
    "tests/own.test.js": "const fs = require('fs');\n"
    "test('own pid', () => expect(process.pid).toBe(Number(fs.readlinkSync('/proc/self'))));\n"
    # A stdout written synchronously (a forked host's: the zygote made it for /dev/null) must block
    # when the pipe is full; on a non-blocking one a flood was queued in memory until the OOM kill.
    "test('stdout blocks', () => {\n"
    "  const flags = parseInt(fs.readFileSync('/proc/self/fdinfo/1', 'utf8').match(/flags:\\s*(\\d+)/)[1], 8);\n"
    "  const sync = process.stdout.constructor.name === 'SyncWriteStream';\n"
    "  expect(sync && (flags & 0o4000) !== 0).toBe(false);\n});\n",
}


def _processes(sb) -> tuple[dict[int, int], int | None]:
    """The Jest hosts in the container (pid -> parent pid) and the runner's pid."""
    procs = processes(sb)
    runner = next((pid for pid, p in procs.items() if is_runner(p)), None)
    return {pid: p.ppid for pid, p in procs.items() if is_host(p)}, runner


def _settled(sb, n: int) -> tuple[dict[int, int], int]:
    """The host processes once there are ``n`` of them (a replacement host warms after a run)."""
    end = time.monotonic() + 30
    while True:
        hosts, runner = _processes(sb)
        if len(hosts) == n or time.monotonic() > end:
            return hosts, runner
        time.sleep(0.2)


def _graded(sb):
    payload = {"timeout_ms": 60000, "output_cap": sb.limits.output_cap, "fresh": True}
    return from_runner(sb.request("jest", payload, timeout=60))


@pytest.mark.parametrize("fork", [False, True], ids=["started", "forked"])
def test_hosts_are_forked_from_one_zygote_unless_told_not_to(
    fork, monkeypatch, image, make_project, tmp_path
):
    monkeypatch.setenv("ETAI_JEST_FORK", "1" if fork else "0")
    root = make_project(tmp_path / "p", FILES)
    with sandbox.start("docker", root, limits=LIMITS, image=image) as sb:
        ran = tools.call(sb, "jest_run", {}).data  # the agent's host
        assert (ran["num_passed"], ran["num_failed"]) == (3, 1), ran

        # The agent's host, the fresh one that waits for a graded run, and with forks the zygote.
        hosts, runner = _settled(sb, 3 if fork else 2)
        if fork:
            zygotes = [pid for pid, parent in hosts.items() if parent == runner]
            assert len(zygotes) == 1, (hosts, runner)
            assert all(parent == zygotes[0] for pid, parent in hosts.items() if pid != zygotes[0])
            assert len(hosts) == 3, hosts
        else:
            assert set(hosts.values()) == {runner} and len(hosts) == 2, (hosts, runner)

        graded = _graded(sb)
        assert graded.status == Status.FAILED and (graded.num_passed, graded.num_failed) == (3, 1)
        # The graded run's host is gone and a new one waits in its place; so is the agent's, which
        # had run workspace code (nothing that did is alive during a graded run); the zygote is kept.
        after, _ = _settled(sb, len(hosts))
        assert len(after) == len(hosts) and len(set(hosts) - set(after)) == 2, (hosts, after)
        if fork:
            assert zygotes[0] in after and set(after.values()) == {runner, zygotes[0]}, after

        # The fix, graded in the replacement: green.
        fix = {"file": "src/double.js", "content": "module.exports = (x) => x * 2;\n"}
        assert tools.call(sb, "file_write", fix).ok
        assert _graded(sb).status == Status.PASSED
        # Each host says how it began (asking the fresh one uses it up: it is asked last).
        for which in ("agent", "fresh"):
            assert sb.request("host_paths", {"set": which}, timeout=60)["forked"] is fork, which
