"""Nothing that serves or forks a graded run is within the sandbox user's reach (docs/grading.md,
"Nothing that serves a graded run is within reach"), tested by enumeration in a real container:
a plain ``node`` of the sandbox user, started as a command of the agent's and from a module a
graded run's test loads, sends every signal to every process it can see, connects to every
listening socket and to the inspector's port, and opens every descriptor and memory file under
/proc. What it reached is only the sandbox user's own processes that already ran workspace code;
the zygote, the hosts that wait for a graded run and the runner answer EPERM; nothing listens; and
the graded verdicts are those of the untouched sandbox. With forked hosts and without."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the helper modules beside this file

from procs import is_host, processes  # noqa: E402

from harness import sandbox, tools
from harness.grading.jest import from_runner
from harness.sandbox import Limits

pytestmark = [pytest.mark.docker, pytest.mark.slow]

LIMITS = Limits(memory_mb=1024, timeout_s=30, cpus=1)
SANDBOX_UID = 10001

# Every process but itself and its own ancestors up to its Jest host (signalling those would only
# end its own run): every signal but 32 and 33 (glibc keeps them), SIGKILL and SIGSTOP last; then
# every listening socket of /proc/net and 127.0.0.1:9229, and every /proc/<pid>/fd/N and
# /proc/<pid>/mem opened for writing. Prints what worked, as JSON, and writes it to OUT if given.
REACH = r"""
const fs = require('fs'), net = require('net');
const status = (p) => { try { return fs.readFileSync('/proc/' + p + '/status', 'utf8'); } catch (e) { return ''; } };
const field = (p, k) => Number((new RegExp('^' + k + ':\\s*(\\d+)', 'm').exec(status(p)) || [])[1]);
const cmd = (p) => { try { return fs.readFileSync('/proc/' + p + '/cmdline', 'latin1'); } catch (e) { return ''; } };
const own = new Set([process.pid]);
for (let p = field(process.pid, 'PPid'); p > 1; p = field(p, 'PPid')) { own.add(p); if (cmd(p).includes('jest-host.js')) break; }
const pids = fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d)).map(Number).filter((p) => !own.has(p));
const seen = Object.fromEntries(pids.map((p) => [p, { uid: field(p, 'Uid'), cmd: cmd(p) }]));
const signalled = {}, opened = [];
const sigs = [...Array(65).keys()].filter((s) => s > 0 && s !== 32 && s !== 33 && s !== 9 && s !== 19).concat([19, 9]);
for (const p of pids) for (const s of sigs) { try { process.kill(p, s); (signalled[p] = signalled[p] || []).push(s); } catch (e) { /* EPERM, ESRCH */ } }
for (const p of pids) {
  let fds = [];
  try { fds = fs.readdirSync('/proc/' + p + '/fd'); } catch (e) { /* not ours to list */ }
  for (const f of fds.map((n) => '/proc/' + p + '/fd/' + n).concat(['/proc/' + p + '/mem'])) {
    try { fs.closeSync(fs.openSync(f, 'r+')); opened.push(f); } catch (e) { /* refused */ }
  }
}
const listening = [];
for (const t of ['tcp', 'tcp6', 'udp', 'udp6', 'unix']) {
  let lines = [];
  try { lines = fs.readFileSync('/proc/net/' + t, 'utf8').trim().split('\n').slice(1); } catch (e) { /* none */ }
  for (const l of lines) {
    const c = l.trim().split(/\s+/);
    if (t === 'unix' ? c[5] === '01' && (c[3] & 0x10000) : t.startsWith('tcp') ? c[3] === '0A' : c[3] === '07') listening.push(t + ' ' + l.trim());
  }
}
const ports = [9229].concat(listening.filter((l) => l.startsWith('tcp ')).map((l) => parseInt(l.split(/\s+/)[2].split(':')[1], 16)));
const connect = (port) => new Promise((ok) => { const s = net.connect(port, '127.0.0.1');
  s.on('connect', () => { s.destroy(); ok(true); }); s.on('error', () => ok(false)); });
(async () => {
  const connected = [];
  for (const p of ports) if (await connect(p)) connected.push(p);
  const out = JSON.stringify({ seen, signalled, opened, listening, connected });
  if (process.argv[1]) fs.writeFileSync(process.argv[1], out);
  console.log(out);
})();
"""


def _graded(sb):
    payload = {"timeout_ms": 60000, "output_cap": sb.limits.output_cap, "fresh": True}
    return from_runner(sb.request("jest", payload, timeout=90))


def _outcome(run) -> tuple:
    return run.status, run.num_passed, run.num_failed, sorted(run.failed_tests)


def _hosts(sb) -> dict[int, int]:
    """The Jest hosts (pid -> uid) once they have settled after a run: a fresh host waits again,
    and nothing changed for a second (a host starting up is root for a moment in any design)."""
    end, last, since = time.monotonic() + 30, None, time.monotonic()
    while True:
        hosts = {pid: p.uid for pid, p in processes(sb).items() if is_host(p)}
        if hosts != last:
            last, since = hosts, time.monotonic()
        elif time.monotonic() - since >= 1.0 and 0 in hosts.values():
            return hosts
        if time.monotonic() > end:
            return hosts
        time.sleep(0.2)


def _check(found: dict, protected: set[int]) -> None:
    """What REACH reached is the sandbox user's own; nothing listens; none of ``protected`` (the
    processes that wait to serve or fork a graded run) was touched, though REACH saw them."""
    reached = {int(p) for p in found["signalled"]} | {int(f.split("/")[2]) for f in found["opened"]}
    assert {p: found["seen"][str(p)]["uid"] for p in reached} == dict.fromkeys(reached, SANDBOX_UID)
    assert not found["listening"] and not found["connected"], found
    seen_root = {int(p) for p, v in found["seen"].items() if v["uid"] == 0}
    assert protected <= seen_root and not reached & protected, (protected, reached, found["seen"])


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "started"])
def test_no_process_that_serves_a_graded_run_is_within_reach(
    fork, monkeypatch, image, make_project, tmp_path
):
    monkeypatch.setenv("ETAI_JEST_FORK", "1" if fork else "0")
    files = {
        "src/double.js": "module.exports = (x) => x + 2;\n",  # right for 2 only
        "tests/double.test.js": "const d = require('../src/double');\n"
        "test('two', () => expect(d(2)).toBe(4));\n"
        "test('three', () => expect(d(3)).toBe(6));\n",
    }
    root = make_project(tmp_path / "p", files)
    with sandbox.start("docker", root, limits=LIMITS, image=image) as sb:
        before = _outcome(_graded(sb))
        assert before[:3] == ("failed", 1, 1), before
        assert tools.call(sb, "jest_run", {}).ok  # the agent's own host has run workspace code

        # As a command of the agent's.
        hosts = _hosts(sb)
        waiting = {pid for pid, uid in hosts.items() if uid == 0}  # the zygote, a fresh host
        assert len(waiting) == (2 if fork else 1), hosts
        r = sb.exec(["node", "-e", REACH], timeout=60)
        assert r.exit_code == 0, r.stderr
        _check(json.loads(r.stdout), waiting)
        assert _outcome(_graded(sb)) == before

        # From a module a graded run's test loads (the graded host has become the sandbox user).
        hosts = _hosts(sb)
        waiting = {pid for pid, uid in hosts.items() if uid == 0}
        code = (
            "require('child_process').spawnSync('node', ['-e', "
            + json.dumps(REACH)
            + ", require('path').join(process.env.TMPDIR, 'reach.json')], { timeout: 30000 });\n"
        )
        assert tools.call(
            sb, "file_write", {"file": "src/double.js", "content": code + files["src/double.js"]}
        ).ok
        assert _outcome(_graded(sb)) == before  # the same module, loaded after REACH ran
        r = sb.exec(["sh", "-c", "cat /scratch/tmp-*/reach.json"], timeout=30)
        assert r.exit_code == 0 and r.stdout.strip(), r.stderr
        found = json.loads(r.stdout.strip().splitlines()[0])
        # The host that served the run was one of them; REACH leaves its own host alone.
        _check(found, {p for p in waiting if str(p) in found["seen"]})

        # And every graded run after it: the buggy module as it was, then the fix.
        assert tools.call(
            sb, "file_write", {"file": "src/double.js", "content": files["src/double.js"]}
        ).ok
        assert _outcome(_graded(sb)) == before
        fix = "module.exports = (x) => x * 2;\n"
        assert tools.call(sb, "file_write", {"file": "src/double.js", "content": fix}).ok
        assert _outcome(_graded(sb))[:3] == ("passed", 2, 0)


# Left running in the agent's own host by a module its `jest_run` loads: a timer that, every 2 ms,
# ends every other process of the sandbox user (the graded host too, once it has become that user)
# or puts a file in every fresh host's TMPDIR. Captured at load: after the run, Jest's `require` is
# torn down, but the host and its timers live on.
LEFTOVER = {
    "signals": "const d = fs.readdirSync('/proc').filter((p) => /^\\d+$/.test(p) && Number(p) !== me);"
    " for (const p of d) { let st = ''; try { st = fs.readFileSync('/proc/' + p + '/status', 'utf8'); } catch (e) { continue; }"
    " if (/^Uid:\\s*10001\\b/m.test(st)) { try { process.kill(Number(p), 'SIGKILL'); } catch (e) {} } }",
    "plants": "for (const t of fs.readdirSync('/scratch')) if (t.startsWith('tmp-fresh-')) {"
    " try { fs.writeFileSync('/scratch/' + t + '/planted', 'x'); } catch (e) {} }",
}


@pytest.mark.parametrize("what", sorted(LEFTOVER))
@pytest.mark.parametrize("fork", [True, False], ids=["forked", "started"])
def test_what_the_agents_runs_left_running_does_not_reach_a_graded_run(
    fork, what, monkeypatch, image, make_project, tmp_path
):
    monkeypatch.setenv("ETAI_JEST_FORK", "1" if fork else "0")
    fixed = "module.exports = (x) => x * 2;\n"
    files = {
        "src/double.js": fixed,
        "tests/double.test.js": "const d = require('../src/double');\n"
        "test('two', () => expect(d(2)).toBe(4));\n",
        # The graded host's TMPDIR is its own and empty when its run starts.
        "tests/tmp.test.js": "const fs = require('fs'), os = require('os');\n"
        "test('nothing planted', () => expect(fs.readdirSync(os.tmpdir()).filter((f) => f === 'planted')).toEqual([]));\n",
    }
    root = make_project(tmp_path / "p", files)
    with sandbox.start("docker", root, limits=LIMITS, image=image) as sb:
        before = _outcome(_graded(sb))
        assert before == ("passed", 2, 0, []), before
        code = (
            "const fs = require('fs'), me = process.pid;\n"
            "if (!global.__left) { global.__left = 1; setInterval(() => { try { "
            + LEFTOVER[what]
            + " } catch (e) {} }, 2); }\n"
        )
        assert tools.call(sb, "file_write", {"file": "src/double.js", "content": code + fixed}).ok
        assert tools.call(sb, "jest_run", {}).ok  # the agent's host runs it and keeps its timer
        assert tools.call(sb, "file_write", {"file": "src/double.js", "content": fixed}).ok
        time.sleep(0.5)  # the timer has ticked many times before the graded run
        assert _outcome(_graded(sb)) == before
        assert _outcome(_graded(sb)) == before  # and the next graded run
        assert tools.call(sb, "jest_run", {}).ok  # the agent's next run, in a new host
