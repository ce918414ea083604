"""Hostile programs through the real Docker sandbox: each gets the right status and leaves no container.

The workspace's own test file is the attacker here (it is what an agent can write), so each case
is a Jest test file that does something nasty, run with `jest_run` or `exec` as an agent would.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from harness import sandbox, tools
from harness.grading.verify import take_baseline, verify
from harness.sandbox import Limits, Status, _docker

pytestmark = [pytest.mark.docker, pytest.mark.slow]

LIMITS = Limits(memory_mb=512, timeout_s=4, output_cap=256 * 1024, scratch_mb=64)
GOOD_TEST = "test('fine', () => { expect(1).toBe(1); });\n"


@pytest.fixture(autouse=True)
def _writer(make_project):
    global write_project
    write_project = make_project


def hostile(tmp_path: Path, body: str, name: str = "evil") -> Path:
    return write_project(
        tmp_path / name, {"tests/evil.test.js": body, "tests/good.test.js": GOOD_TEST}
    )


def run_case(tmp_path, image, body, *, args=None, limits=LIMITS, after=None):
    """Run the hostile test file once; return the jest_run result; assert the container is gone."""
    sb = sandbox.start("docker", hostile(tmp_path, body), image=image, limits=limits)
    try:
        r = tools.call(sb, "jest_run", args or {"test_file": "tests/evil.test.js"})
        if after:
            after(sb)
    finally:
        sb.close()
    assert sb.name not in _docker.leftovers()
    return r


def test_infinite_loop_times_out(tmp_path, image):
    # "timeout" is the harness's own deadline firing (2 s); the loop never ends by itself.
    r = run_case(
        tmp_path,
        image,
        "test('spin', () => { for (;;) {} });\n",
        args={"test_file": "tests/evil.test.js", "timeout_s": 2},
    )
    assert r.status == "timeout"


def test_async_sleep_past_deadline_times_out(tmp_path, image):
    body = (
        "test('sleeps', async () => { await new Promise(r => setTimeout(r, 60000)); }, 120000);\n"
    )
    assert (
        run_case(
            tmp_path, image, body, args={"test_file": "tests/evil.test.js", "timeout_s": 2}
        ).status
        == "timeout"
    )


def test_sandbox_recovers_after_a_timeout(tmp_path, image):
    def after(sb):
        good = tools.call(sb, "jest_run", {"test_file": "tests/good.test.js"})
        assert (good.status, good.data["num_passed"]) == ("passed", 1)

    r = run_case(
        tmp_path,
        image,
        "test('spin', () => { for (;;) {} });\n",
        args={"test_file": "tests/evil.test.js", "timeout_s": 2},
        after=after,
    )
    assert r.status == "timeout"


def test_fork_bomb_is_contained(tmp_path, image):
    body = (
        "const { execSync } = require('child_process');\n"
        "test('bomb', () => { execSync(\"sh -c 'b() { b | b; }; b'\", { stdio: 'ignore' }); }, 60000);\n"
    )

    def after(sb):  # the whole process group went with the deadline: the sandbox works again
        good = tools.call(sb, "jest_run", {"test_file": "tests/good.test.js"})
        assert good.status == "passed", good

    r = run_case(
        tmp_path, image, body, args={"test_file": "tests/evil.test.js", "timeout_s": 3}, after=after
    )
    assert r.status in (
        "timeout",
        "failed",
    )  # fork fails (EAGAIN at the pids limit) or the deadline hits


def test_heap_balloon_is_memory_limit(tmp_path, image):
    body = "test('balloon', () => { const a = []; for (;;) a.push(new Array(1e6).fill(7)); });\n"
    assert (
        run_case(
            tmp_path, image, body, args={"test_file": "tests/evil.test.js", "timeout_s": 20}
        ).status
        == "memory_limit"
    )


def test_buffer_balloon_is_memory_limit(tmp_path, image):
    body = "test('buffers', () => { const a = []; for (;;) a.push(Buffer.alloc(64 << 20, 1)); });\n"
    assert (
        run_case(
            tmp_path, image, body, args={"test_file": "tests/evil.test.js", "timeout_s": 20}
        ).status
        == "memory_limit"
    )


def test_tmpfs_fill_hits_enospc(tmp_path, image):
    body = (
        "const fs = require('fs');\n"
        "test('fill', () => { const b = Buffer.alloc(1 << 20, 1);\n"
        "  for (let i = 0; i < 1000; i++) fs.writeFileSync('/scratch/tmp/fill' + i, b); });\n"
    )
    r = run_case(tmp_path, image, body)
    assert r.status == "failed" and "ENOSPC" in str(
        r.data
    )  # the test's write, or Jest's own cache write


def test_write_to_read_only_root_fails(tmp_path, image):
    body = "test('write', () => { require('fs').writeFileSync('/usr/local/bin/node', 'x'); });\n"
    r = run_case(tmp_path, image, body)
    assert r.status == "failed" and (
        "EROFS" in r.data["failed_tests"][0]["message"]
        or "EACCES" in r.data["failed_tests"][0]["message"]
    )


def test_network_is_unreachable(tmp_path, image):
    body = (
        "const net = require('net');\n"
        "test('net', async () => { await new Promise((ok, bad) => {\n"
        "  const s = net.connect(53, '1.1.1.1', () => ok()); s.on('error', bad); }); });\n"
    )
    r = run_case(tmp_path, image, body)
    assert r.status == "failed" and "ENETUNREACH" in r.data["failed_tests"][0]["message"]


def test_stdout_flood_is_output_limit(tmp_path, image):
    body = (
        "test('flood', () => { const s = 'x'.repeat(1 << 20);\n"
        "  for (let i = 0; i < 1024; i++) process.stdout.write(s); });\n"
    )
    assert (
        run_case(
            tmp_path, image, body, args={"test_file": "tests/evil.test.js", "timeout_s": 20}
        ).status
        == "output_limit"
    )


def test_host_files_and_secrets_stay_out(tmp_path, image, monkeypatch):
    canary = tmp_path / "host-canary.txt"
    canary.write_text("HOST-SECRET-CANARY")
    monkeypatch.setenv("ETAI_TEST_SECRET", "ENV-SECRET-CANARY")
    read = "(p) => { try { return fs.readFileSync(p, 'utf8'); } catch (e) { return e.code; } }"
    body = (
        f"const fs = require('fs');\nconst read = {read};\n"
        f"test('steal', () => {{ const env = read('/proc/self/environ') + read('/proc/1/environ')\n"
        f"  + JSON.stringify(process.env);\n"
        f"  throw new Error('LEAK ' + read({str(canary)!r}) + ' ' + env); }});\n"
    )
    r = run_case(tmp_path, image, body)
    msg = r.data["failed_tests"][0]["message"]
    assert "LEAK ENOENT" in msg
    assert "CANARY" not in str(r.data)


def test_process_exit_zero_is_not_a_pass(tmp_path, image):
    body = "process.exit(0);\ntest('never', () => { expect(1).toBe(2); });\n"
    r = run_case(tmp_path, image, body)
    assert r.status == "failed" and r.data["evidence"] == "none" or r.data["reason"]
    assert r.status != "passed"


def test_fake_jest_summary_is_not_a_pass(tmp_path, image):
    body = (
        'process.stdout.write(\'Tests:       5 passed, 5 total\\n{"success":true,"numFailedTests":0}\\n\');\n'
        "console.log('PASS tests/evil.test.js');\n"
        "test('real', () => { expect(1).toBe(2); });\n"
    )
    r = run_case(tmp_path, image, body)
    assert (r.status, r.data["num_failed"]) == ("failed", 1)


def test_exit_before_tests_in_full_run_is_not_a_pass(tmp_path, image):
    body = "afterAll(() => process.exit(0));\ntest('fails', () => { expect(1).toBe(2); });\n"
    r = run_case(tmp_path, image, body, args={})
    assert r.status == "failed"


def test_editing_the_test_file_to_pass_is_not_green(tmp_path, image):
    root = write_project(
        tmp_path / "edit",
        {
            "src/a.js": "module.exports = () => 1;\n",
            "tests/a.test.js": "test('two', () => { expect(require('../src/a')()).toBe(2); });\n",
        },
    )
    sb = sandbox.start("docker", root, image=image, limits=LIMITS)
    try:
        base = take_baseline(sb, sb.test_files)
        tools.call(sb, "file_edit", {"file": "tests/a.test.js", "old": "toBe(2)", "new": "toBe(1)"})
        assert tools.call(sb, "jest_run", {}).status == "passed"  # the tests do pass now...
        v = verify(sb, base)
        assert (
            not v.green and "protected files changed: tests/a.test.js" in v.reason
        )  # ...but it is not green
    finally:
        sb.close()
    assert sb.name not in _docker.leftovers()


def test_tests_cannot_write_the_workspace(tmp_path, image):
    """The workspace belongs to the runner: a test (the agent's code) can neither change a file nor
    plant a symlink in it, and the sandbox user's own scratch space stays usable."""
    body = (
        "const fs = require('fs');\n"
        "const code = (f) => { try { f(); return 'ok'; } catch (e) { return e.code; } };\n"
        "test('write', () => { throw new Error('CODES ' + [code(() => fs.writeFileSync('tests/good.test.js', 'x')),\n"
        "  code(() => fs.symlinkSync('/etc/passwd', 'leak')), code(() => fs.mkdirSync('many')),\n"
        "  code(() => fs.writeFileSync('/scratch/tmp/mine', 'x'))].join(' ')); });\n"
    )
    r = run_case(tmp_path, image, body)
    assert "CODES EACCES EACCES EACCES ok" in r.data["failed_tests"][0]["message"]


def test_symlink_out_of_the_workspace_is_refused(tmp_path):
    """Where a test can plant symlinks (the local sandbox, which has no users), the tools refuse them."""
    body = (
        "const fs = require('fs');\n"
        "test('link', () => { fs.symlinkSync('/etc/passwd', 'leak'); fs.symlinkSync('/etc', 'dir'); });\n"
    )
    with sandbox.start("local", hostile(tmp_path, body), limits=LIMITS) as sb:
        tools.call(sb, "jest_run", {"test_file": "tests/evil.test.js"})
        for path in ("leak", "dir/passwd"):
            r = tools.call(sb, "file_read", {"file": path})
            assert r.status == "error" and "leaves the workspace" in r.error
        w = tools.call(sb, "file_write", {"file": "dir/evil", "content": "x"})
        assert w.status == "error" and "leaves the workspace" in w.error


def test_jest_run_outside_the_workspace_is_the_error_other_tools_give(tmp_path):
    with sandbox.start("local", hostile(tmp_path, GOOD_TEST), limits=LIMITS) as sb:
        for path in ("../outside.test.js", "/etc/passwd", "tests/../../x.test.js"):
            r = tools.call(sb, "jest_run", {"test_file": path})
            assert (r.status, r.error) == (
                "error",
                tools.call(sb, "file_read", {"file": path}).error,
            )
            assert "leaves the workspace" in r.error


def test_host_symlinks_in_a_workspace_are_not_uploaded(tmp_path, image):
    root = hostile(tmp_path, GOOD_TEST)
    os.symlink("/etc/hostname", root / "leak.txt")
    sb = sandbox.start("docker", root, image=image, limits=LIMITS)
    try:
        assert tools.call(sb, "file_read", {"file": "leak.txt"}).error == "no such file: leak.txt"
    finally:
        sb.close()


def test_huge_number_of_files_is_bounded(tmp_path, image):
    root = hostile(tmp_path, GOOD_TEST)
    for i in range(600):
        (root / "many" / f"f{i:03d}.txt").parent.mkdir(exist_ok=True)
        (root / "many" / f"f{i:03d}.txt").write_text("")
    with sandbox.start("docker", root, image=image, limits=LIMITS) as sb:
        r = tools.call(sb, "list_files", {"max": 500})
        assert r.ok and len(r.data["files"]) == 500 and r.data["truncated"]
        s = tools.call(sb, "search", {"pattern": "fine"})
        assert s.ok and {m["file"] for m in s.data["matches"]} == {
            "tests/evil.test.js",
            "tests/good.test.js",
        }
    assert sb.name not in _docker.leftovers()


def test_non_utf8_output_is_replaced_not_crashed(tmp_path, image):
    body = (
        "test('bytes', () => { process.stdout.write(Buffer.from([0xff, 0xfe, 0x41]));\n"
        "  throw new Error('bad \\udcff byte ' + Buffer.from([0xc3, 0x28]).toString('latin1')); });\n"
    )

    def after(sb):
        e = sb.exec(["sh", "-c", "printf '\\377\\376ok'"])
        assert e.status == Status.PASSED and e.stdout.endswith("ok") and "\ufffd" in e.stdout

    r = run_case(tmp_path, image, body, after=after)
    assert r.status == "failed" and r.data["failed_tests"]


def test_scratch_is_noexec_and_writable(tmp_path, image):
    def after(sb):
        w = sb.exec(
            [
                "sh",
                "-c",
                "echo 'echo hi' > /scratch/tmp/x.sh && chmod +x /scratch/tmp/x.sh && /scratch/tmp/x.sh",
            ]
        )
        assert w.status == Status.FAILED and "denied" in w.stderr.lower()
        assert sb.exec(["sh", "-c", "touch /scratch/tmp/ok && id -u"]).stdout.strip() == "10001"

    run_case(tmp_path, image, GOOD_TEST, after=after)


def test_container_profile_is_hardened(tmp_path, image):
    sb = sandbox.start("docker", hostile(tmp_path, GOOD_TEST), image=image, limits=LIMITS)
    try:
        hc = _docker.client().api.inspect_container(sb.name)["HostConfig"]
    finally:
        sb.close()
    assert hc["NetworkMode"] == "none" and hc["CapDrop"] == ["ALL"] and hc["ReadonlyRootfs"]
    assert "no-new-privileges" in hc["SecurityOpt"] and hc["IpcMode"] == "none" and hc["Init"]
    assert hc["Memory"] == hc["MemorySwap"] == 512 << 20 and hc["PidsLimit"] == 256
    assert hc["LogConfig"]["Type"] == "none" and hc["NanoCpus"] == 2 * 10**9
    assert "/scratch" in hc["Tmpfs"] and "noexec" in hc["Tmpfs"]["/scratch"]


def test_a_changed_file_the_jest_config_loads_never_runs_in_the_host(tmp_path, image):
    """jest.config.js requires src/settings.js, so Jest loads that file into the Jest host's own
    realm, outside every test context. A host started after the agent changed it (the agent's code
    ended the last one with process.exit) must refuse it: `tampered`, and its code never ran. The
    pristine file still loads in a restarted host (a legitimate project keeps working)."""
    fixed = "module.exports = (a, b) => a + b;\n"
    root = write_project(
        tmp_path / "cfg",
        {
            "package.json": '{"name": "cfg", "private": true}',
            "jest.config.js": "const s = require('./src/settings');\n"
            "module.exports = { testEnvironment: 'node', testTimeout: s.timeout };\n",
            "src/settings.js": "module.exports = { timeout: 5000 };\n",
            "src/add.js": "module.exports = (a, b) => a - b;\n",
            "tests/add.test.js": "const add = require('../src/add');\n"
            "test('adds', () => { expect(add(2, 3)).toBe(5); });\n",
        },
    )
    payload = (
        "require('fs').writeFileSync(require('path').join(process.env.TMPDIR || '/tmp', 'host-realm'), 'ran');\n"
        "module.exports = { timeout: 5000 };\n"
    )
    marker = ["docker", "exec", "PLACEHOLDER", "test", "-e", "/scratch/tmp/host-realm"]

    def end_host():
        tools.call(sb, "file_write", {"file": "src/add.js", "content": "process.exit(0);\n"})
        assert tools.call(sb, "jest_run", {}).status == "failed"  # the host died with it

    sb = sandbox.start("docker", root, image=image, limits=LIMITS)
    try:
        base = take_baseline(sb, sb.test_files)
        assert "tests/add.test.js" in sb.test_files
        end_host()
        tools.call(sb, "file_write", {"file": "src/add.js", "content": fixed})
        assert tools.call(sb, "jest_run", {}).status == "passed"  # a new host, pristine settings
        end_host()
        tools.call(sb, "file_write", {"file": "src/add.js", "content": fixed})
        tools.call(sb, "file_write", {"file": "src/settings.js", "content": payload})
        r = tools.call(sb, "jest_run", {})
        assert r.status == "tampered", r
        assert "src/settings.js" in str(r.data)
        marker[2] = sb.name
        assert subprocess.run(marker).returncode == 1  # the changed file's code never ran
        v = verify(sb, base)
        assert not v.green and v.status is Status.TAMPERED, v
    finally:
        sb.close()
    assert sb.name not in _docker.leftovers()
