"""The pool's reuse of a container (harness/sandbox/_docker.py ``Pool.give_back``, runner.js
``resetContainer``): the next episode in a reused container sees nothing of the one before — no
file, no process, nothing in /tmp or Jest's cache folder, no Jest host (and so no module registry)
— and no IPC object can carry anything across. Real Docker, real Jest."""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the helper modules beside this file

from pools import first_in_line  # noqa: E402
from procs import Proc, is_host, processes  # noqa: E402

from harness import sandbox, tools
from harness.sandbox import Limits

pytestmark = [pytest.mark.docker, pytest.mark.slow]

LIMITS = Limits(memory_mb=512, timeout_s=20, scratch_mb=64)

# Episode A's test leaves what it can: a file in TMPDIR, one in Jest's cache folder, a process in
# a session of its own (so no process group of the runner's holds it) that keeps writing, and the
# pids of that process and of the Jest host it ran in.
LEAVE = r"""
const fs = require('fs');
const cp = require('child_process');
test('leaves things behind', () => {
  const tmp = process.env.TMPDIR;
  fs.writeFileSync(`${tmp}/left-by-a.txt`, 'what episode a knew');
  fs.mkdirSync(`${tmp}/jest-cache`, { recursive: true });
  fs.writeFileSync(`${tmp}/jest-cache/from-a`, 'cached by a');
  const child = cp.spawn('sh', ['-c', `while true; do echo a >> ${tmp}/writer-a.log; sleep 0.1; done`],
    { detached: true, stdio: 'ignore' });
  child.unref();
  fs.writeFileSync(`${tmp}/a-pids`, `${process.pid} ${child.pid}`);
  expect(1).toBe(1);
});
"""
GOOD = "test('fine', () => { expect(1).toBe(1); });\n"


def _kind(pid: int, p: Proc) -> str:
    uid, cmd = p.uid, p.cmd
    if pid == 1:
        return "init"
    if uid == 0 and cmd == "sleep\0infinity\0":
        return "sleep"
    if uid == 0 and cmd.endswith("/opt/etai/runner.js\0"):
        return "runner"
    # Root while it waits (the zygote, a fresh host), the sandbox user's once it served the workspace.
    if uid in (0, 10001) and cmd.endswith("/opt/etai/jest-host.js\0"):
        return "jest host"
    if uid == 10001 and "import json, os" in cmd:
        return "listing"
    return f"other: {uid} {cmd!r}"


def test_a_reused_container_shows_nothing_of_the_episode_before(tmp_path, image, make_project):
    prepared = sandbox.provider("docker").prepare(LIMITS, workers=1, image=image)
    try:
        a = prepared.start(
            make_project(
                tmp_path / "a",
                {"tests/leave.test.js": LEAVE, "src/only-in-a.js": "module.exports = 'a';\n"},
            )
        )
        r = tools.call(a, "jest_run", {"test_file": "tests/leave.test.js"})
        assert r.data["num_passed"] == 1, r.data
        left = a.exec(["sh", "-c", "cat $TMPDIR/a-pids; echo; ls $TMPDIR $TMPDIR/jest-cache"])
        host_pid, writer_pid = left.stdout.split("\n")[0].split()
        assert "left-by-a.txt" in left.stdout and "from-a" in left.stdout, left
        assert int(writer_pid) in processes(a)
        name = a.name
        a.close()

        assert first_in_line(prepared, name), f"container {name} did not come back to the pool"
        b = prepared.start(make_project(tmp_path / "b", {"tests/b.test.js": GOOD}))
        try:
            assert (b.name, b.uses) == (name, 2)  # the same container, its second episode
            procs = processes(b)
            assert int(host_pid) not in procs and int(writer_pid) not in procs, procs
            # What runs now: the container's own two, one runner (B's), B's two Jest hosts (the
            # agent's, and the fresh one that waits for a graded run) and the zygote they were
            # forked from (kept: it ran only the template), this listing.
            kinds = sorted(_kind(pid, p) for pid, p in procs.items())
            forked = b.request("host_paths", {"set": "agent"}, timeout=60)["forked"]
            hosts = ["jest host"] * (3 if forked else 2)
            assert kinds == ["init", *hosts, "listing", "runner", "sleep"], (forked, procs)
            scratch = b.exec(["ls", "-AR", "/scratch"]).stdout  # B's Jest makes its own cache
            assert "b.test.js" in scratch, scratch
            for gone in ("left-by-a.txt", "writer-a.log", "a-pids", "from-a", "only-in-a.js"):
                assert gone not in scratch, scratch
            ran = tools.call(b, "jest_run", {"test_file": "tests/b.test.js"})
            assert ran.data["num_passed"] == 1, ran.data
            # Nothing can be left in the IPC namespace either: no object can be made at all.
            ipc = b.exec(
                [
                    "python3",
                    "-c",
                    "import ctypes, os; c = ctypes.CDLL(None); rt = ctypes.CDLL('librt.so.1'); "
                    "print(c.shmget(0, 4096, 0o1600), c.msgget(0, 0o1600), c.semget(0, 1, 0o1600), "
                    "rt.mq_open(b'/etai', os.O_CREAT | os.O_RDWR, 0o600, None))",
                ]
            )
            assert ipc.stdout.split() == ["-1", "-1", "-1", "-1"], ipc
        finally:
            b.close()
    finally:
        prepared.cleanup()


def test_warm_jest_hosts_are_kept_only_when_no_workspace_code_ran(tmp_path, image, make_project):
    """A host is kept only if it ran nothing but its template. The first episode of a workspace lists
    its tests in the agent's first host (Jest loads its config: workspace code), so that one goes at
    the reset; later ones get that listing. An episode that runs Jest on both agent hosts leaves
    only the fresh ones (graded runs; none ran here). Each count is the reset's after that very
    episode: two agent hosts (the second is started at init for a workspace of several test files)
    and two fresh ones."""
    work = make_project(tmp_path / "w", {"tests/ok.test.js": GOOD, "tests/two.test.js": GOOD})
    prepared = sandbox.provider("docker").prepare(LIMITS, workers=1, image=image)
    try:
        kept = []
        for step in ("lists", "nothing", "runs jest", "next"):
            sb = prepared.start(work)
            assert sb.test_files == ["tests/ok.test.js", "tests/two.test.js"]
            if step == "runs jest":
                assert tools.call(sb, "jest_run", {}).data["num_passed"] == 2
            name = sb.name
            sb.close()
            assert first_in_line(prepared, name), f"container {name} did not come back to the pool"
            kept.append(next(s for s in prepared._pool._ready if s.name == name).kept_hosts)
        assert kept == [3, 4, 2, 4], kept
    finally:
        prepared.cleanup()


def test_a_container_with_the_suites_node_modules_is_reset_and_reused(
    tmp_path, image, make_project
):
    """A real-project suite's dependencies are a read-only bind mount at <workspace>/node_modules.
    The reset leaves that mount (rmdir of a mount point is EBUSY: every reset failed, and each
    episode of a real-project suite got a new container) and empties the rest: the next episode
    runs in the same container, the dependencies still there, the episode's files gone."""
    deps = tmp_path / "deps"
    (deps / "dep").mkdir(parents=True)
    (deps / "dep" / "index.js").write_text("module.exports = 41;\n")
    (deps / "dep" / "package.json").write_text('{"name": "dep", "main": "index.js"}\n')
    uses = "test('dep', () => expect(require('dep') + 1).toBe(42));\n"
    limits = dataclasses.replace(LIMITS, node_modules=str(deps))
    prepared = sandbox.provider("docker").prepare(limits, workers=1, image=image)
    try:
        seen = []
        for i in range(2):
            files = {"tests/dep.test.js": uses, f"src/only-in-{i}.js": "module.exports = 1;\n"}
            sb = prepared.start(make_project(tmp_path / f"p{i}", files))
            seen.append((sb.name, sb.uses))
            r = tools.call(sb, "jest_run", {"test_file": "tests/dep.test.js"})
            assert r.data["num_passed"] == 1, r.data
            ws = sb.exec(["ls", "-A", "/scratch/ws", "/scratch/ws/src"]).stdout
            assert "node_modules" in ws and f"only-in-{i}.js" in ws, ws
            assert f"only-in-{1 - i}.js" not in ws, ws
            name = sb.name
            sb.close()
            if i == 0:
                assert first_in_line(prepared, name), (
                    f"container {name} did not come back to the pool"
                )
        assert seen[1] == (seen[0][0], 2), seen
        assert (deps / "dep" / "index.js").read_text() == "module.exports = 41;\n"
    finally:
        prepared.cleanup()


# Looks for a Jest host's template project (jest-host.js `warm`, in TMPDIR) for 1.5 s.
WATCH_WARM = r"""
const fs = require('fs');
test('no template project is in reach', async () => {
  const end = Date.now() + 1500;
  let seen = null;
  while (!seen && Date.now() < end) {
    seen = fs.readdirSync(process.env.TMPDIR).find((n) => n.startsWith('etai-warm-')) || null;
    await new Promise((ok) => setTimeout(ok, 5));
  }
  expect(seen).toBe(null);
});
"""


def test_no_workspace_code_runs_while_a_host_warms_on_its_template(tmp_path, image, make_project):
    """The second Jest host of a workspace of several test files starts (and runs its template
    project, in TMPDIR) at init. Workspace code running meanwhile could rewrite that template, and
    what the guard finds in a template run is dropped: so a Jest run waits for every warm-up."""
    work = make_project(
        tmp_path / "w", {"tests/watch.test.js": WATCH_WARM, "tests/b.test.js": GOOD}
    )
    sb = sandbox.start("docker", work, image=image, limits=LIMITS)
    try:
        r = tools.call(sb, "jest_run", {"test_file": "tests/watch.test.js"})
        assert r.data["num_passed"] == 1, r.data
    finally:
        sb.close()


# A test that leaves a timer throwing after its file is done, as rxjs's hostReportError does when
# a subscriber throws (a redux mutant's rxjs test, #16).
LATE_THROW = (
    "test('leaves a throwing timer', () => {\n"
    "  setTimeout(() => { throw new Error('thrown after the run'); }, 300);\n"
    "  expect(1).toBe(1);\n});\n"
)


def test_an_error_thrown_between_runs_leaves_the_host_serving_the_next_run(
    tmp_path, image, make_project
):
    """The run that left the timer was answered already; the host it kills between runs would fail
    whichever request came next (no_result_record). The host carries on: the next run is served by
    the same, warm, process."""
    root = make_project(tmp_path / "p", {"tests/late.test.js": LATE_THROW})
    with sandbox.start("docker", root, image=image, limits=LIMITS) as sb:

        def hosts() -> set[int]:
            return {pid for pid, p in processes(sb).items() if is_host(p)}

        first = tools.call(sb, "jest_run", {})
        assert first.status == "passed", first
        before = hosts()
        time.sleep(1.0)  # the timer fires while the host waits for the next request
        assert hosts() == before, "the host died of an error thrown after its run"
        again = tools.call(sb, "jest_run", {})
        assert again.status == "passed", again
