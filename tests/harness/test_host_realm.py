"""The Jest host's own realm loads nothing the sandbox user can write, and a graded run is answered
by a host in which no workspace code ran before (README "What grading resists", #29).

Real sandboxes: the host reports where it looks for modules and every file it loaded into its own
realm (runner op `host_paths`); the sandbox user then checks each of them, and every folder above
it, for write access from inside the container.
"""

from __future__ import annotations

import json

import pytest

from harness import sandbox
from harness.grading.jest import from_runner
from harness.sandbox import Status

pytestmark = [pytest.mark.docker]

SRC = "exports.double = (x) => x * 2;\n"
TEST = "const { double } = require('../src/double');\ntest('doubles', () => expect(double(2)).toBe(4));\n"

# Run as the sandbox user: the paths given on stdin that it, or any folder above them, could write.
WRITABLE = r"""
import json, os, sys
bad = []
for p in json.load(sys.stdin):
    q = p
    while True:
        if os.path.exists(q) and os.access(q, os.W_OK):
            bad.append([p, q])
            break
        if q in ("/", ""):
            break
        q = os.path.dirname(q)
print(json.dumps(bad))
"""


def _writable(sb, paths: list[str]) -> list[list[str]]:
    r = sb.exec(["python3", "-c", WRITABLE], stdin=json.dumps(paths).encode(), timeout=30)
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


def _run(sb, fresh: bool):
    payload = {"timeout_ms": 60000, "output_cap": sb.limits.output_cap, "fresh": fresh}
    return from_runner(sb.request("jest", payload, timeout=60))


def test_host_realm_search_paths_and_loads_are_not_writable(image, make_project, tmp_path):
    root = make_project(tmp_path / "p", {"src/double.js": SRC, "tests/double.test.js": TEST})
    with sandbox.start("docker", root, image=image) as sb:
        # The writability check must be able to fail: the sandbox user's own scratch is writable.
        assert _writable(sb, ["/scratch/tmp/x/y.js"]) == [["/scratch/tmp/x/y.js", "/scratch/tmp"]]
        for fresh in (False, True):
            assert _run(sb, fresh).status == Status.PASSED
        for which in ("agent", "fresh"):
            info = sb.request("host_paths", {"set": which}, timeout=60)
            loaded, paths = info["loaded"], info["global_paths"]
            # Jest, the framework and the guard loaded into this realm: a real list, not an empty one.
            assert len(loaded) > 100 and any("/jest-config/" in f for f in loaded), loaded[:5]
            assert info["home"] and not info["home"].startswith(info["tmpdir"])
            assert _writable(sb, loaded + paths + [info["home"]]) == [], which
            # Jest's compiled code came from the image's cache (code-cache.js), which nobody here
            # can write: most of what the host compiled of Jest, and no entry V8 refused.
            cache = info["code_cache"]
            assert cache["hits"] > 300 and cache["rejected"] == 0, cache
            # (a forked host has its zygote's flags: runner.js startZygote)
            flags = "max-old-space-size=614" + ("_single-threaded" if info["forked"] else "")
            assert cache["folder"].endswith(f"/{flags}"), cache
            assert _writable(sb, [cache["folder"]]) == [], which


def test_code_planted_outside_the_workspace_is_refused_by_the_host(image, make_project, tmp_path):
    """A config that makes Jest's own code load a file from the sandbox user's scratch space (as a
    module Node or Jest falls back to would be): refused before it runs, and the run is tampered."""
    planted = "/scratch/tmp/planted/sequencer.js"
    root = make_project(
        tmp_path / "p",
        {"src/double.js": SRC, "tests/double.test.js": TEST},
        {"testSequencer": planted},
    )
    code = (
        "const Sequencer = require('/opt/etai/node_modules/@jest/test-sequencer').default;"
        "module.exports = class extends Sequencer {};"
    )
    with sandbox.start("docker", root, image=image) as sb:
        r = sb.exec(
            ["sh", "-c", f"mkdir -p /scratch/tmp/planted && cat > {planted}"], stdin=code.encode()
        )
        assert r.exit_code == 0, r.stderr
        for fresh in (False, True):
            run = _run(sb, fresh)
            assert run.status != Status.PASSED
            assert any(planted in t for t in run.tamper), (run.status, run.tamper, run.reason)


def test_a_timer_left_by_workspace_code_never_answers_a_graded_run(image, make_project, tmp_path):
    """Workspace code that outlives its run (a timer reading the host's channel to the runner):
    the test context's fs refuses the descriptor, and a graded run goes to a host that ran no
    workspace code; a stray process the run left is ended before the next graded run."""
    src = (
        "const fs = require('fs');\n"
        "let said = [];\n"
        "for (const fd of [3, 4, 5]) { try { fs.fstatSync(fd); said.push(fd); } catch (e) { said.push(e.code); } }\n"
        "globalThis.__said = said;\n"
        "setInterval(() => { try { fs.readSync(3, Buffer.alloc(64)); } catch (e) {} }, 5).unref();\n"
        "require('child_process').spawn('sleep', ['30'], { detached: true, stdio: 'ignore' }).unref();\n"
        "exports.double = (x) => x * 2;\n"
    )
    root = make_project(tmp_path / "p", {"src/double.js": src, "tests/double.test.js": TEST})
    with sandbox.start("docker", root, image=image) as sb:
        agent = _run(sb, False)
        assert any("channel to the runner" in t for t in agent.tamper), agent.tamper
        graded = _run(sb, True)
        assert graded.status != Status.PASSED or graded.tamper
        assert any("channel to the runner" in t for t in graded.tamper), graded.tamper
        left = sb.exec(["sh", "-c", "ls /proc | grep -c '^[0-9]'"], timeout=30)
        # tini, sleep infinity, the runner, its hosts and this shell: no `sleep 30` left over.
        ps = sb.exec(["sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '"], timeout=30)
        assert "sleep 30" not in ps.stdout, (left.stdout, ps.stdout)


def test_host_buffer_and_hash_methods_stay_as_node_made_them(image, make_project, tmp_path):
    """Buffer and crypto's Hash are this realm's objects, held by every test context, and this realm
    encodes source maps and keys transforms with them while it loads the next test file: a method
    planted there would rewrite that file's compiled code (locked: guard.js `lockShared`)."""
    test = (
        "const crypto = require('crypto');\n"
        "const hash = Object.getPrototypeOf(crypto.createHash('sha256'));\n"
        "test('plant', () => {\n"
        "  const planted = [];\n"
        "  for (const [obj, key] of [[Buffer.prototype, 'toString'], [Buffer, 'from'], [hash, 'update'], [hash, 'digest']]) {\n"
        "    const before = obj[key];\n"
        "    try { obj[key] = function () { return 'planted'; }; } catch (e) { /* refused */ }\n"
        "    try { Object.defineProperty(obj, key, { value: () => 'planted' }); } catch (e) { /* refused */ }\n"
        "    if (obj[key] !== before) planted.push(key);\n"
        "  }\n"
        "  expect(planted).toEqual([]);\n"
        "  expect(Buffer.from('hi').toString('base64')).toBe('aGk=');\n"
        "});\n"
    )
    root = make_project(tmp_path / "p", {"src/double.js": SRC, "tests/plant.test.js": test})
    with sandbox.start("docker", root, image=image) as sb:
        for fresh in (False, True):
            r = _run(sb, fresh)
            assert r.status == Status.PASSED, (r.status, r.failed_tests)


def test_a_trusted_module_wrapper_is_made_without_host_array_methods(image, make_project, tmp_path):
    """Workspace code reaches this realm's Array.prototype through a host array; Jest's module
    wrapper joined its parameters with it. A `join` replaced for the length of one require of a file
    the image installed put code into that trusted file's wrapper (guard.js
    `constructModuleWrapperStart`)."""
    src = (
        "const HA = Object.getPrototypeOf(Buffer.from('a').toJSON().data);\n"
        "const join = HA.join;\n"
        "const payload = 'module,exports,require,__dirname,__filename,jest){ globalThis.__injected = 1; },"
        ' "x": function(module,exports,require,__dirname,__filename,jest\';\n'
        "HA.join = function (sep) { return this[0] === 'module' ? payload : Reflect.apply(join, this, [sep]); };\n"
        "try { require('/opt/etai/node_modules/is-number/index.js'); } catch (e) { /* not there */ }\n"
        "finally { HA.join = join; }\n"
        "exports.double = (x) => x * 2;\n"
    )
    test = (
        "const { double } = require('../src/double');\n"
        "test('not injected', () => { expect(globalThis.__injected).toBeUndefined(); "
        "expect(double(2)).toBe(4); });\n"
    )
    root = make_project(tmp_path / "p", {"src/double.js": src, "tests/double.test.js": test})
    with sandbox.start("docker", root, image=image) as sb:
        assert (
            sb.exec(
                ["test", "-f", "/opt/etai/node_modules/is-number/index.js"], timeout=30
            ).exit_code
            == 0
        )
        for fresh in (False, True):
            r = _run(sb, fresh)
            assert r.status == Status.PASSED, (r.status, r.failed_tests)
