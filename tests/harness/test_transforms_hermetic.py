"""The transform store is hermetic (harness/sandbox/transforms.py, runner/transform-cache.js), through
real sandboxes and real Jest: an entry is used only where everything its transform read is as it
was, and a sandbox reaches only entries of files its own session holds.

Each Docker test fills a store of its own from a first sandbox of a pristine workspace (as a
preflight does), then grades a change in a second sandbox. A stored entry served where it should
not be turns that verdict green."""

from __future__ import annotations

import hashlib
import json
import stat
import sys
from pathlib import Path

import pytest

from harness.grading.verify import take_baseline, verify
from harness.sandbox import Limits, transforms

sys.path.insert(0, str(Path(__file__).parent))  # the helper modules beside this file
from test_transforms import FILES, FORGED, LIMITS, TEST, _entry  # noqa: E402

TS_TEST = "tests/calc.test.ts"
TS_FILES = {  # a JavaScript module typed by a declaration file; ts-jest type-checks the test
    ".gitignore": "node_modules\n",  # the mounted dependencies: not for the runner's baseline commit
    "tsconfig.json": '{"compilerOptions": {"strict": true, "esModuleInterop": true}}',
    "src/calc.js": "exports.add = (a, b) => a + b;\n",
    "src/calc.d.ts": "export declare function add(a: number, b: number): number;\n",
    TS_TEST: "import { add } from '../src/calc';\ntest('adds', () => { expect(add(1, 2)).toBe(3); });\n",
}
BABEL_TEST = "tests/answer.test.js"
BABEL_FILES = {  # a workspace plugin that writes the number its options give in place of 41
    "babel.config.json": '{"plugins": [["./plugin.js", {"answer": 42}]]}\n',
    "plugin.js": "module.exports = ({ types: t }, opts) => ({ visitor: { NumericLiteral(p) {\n"
    "  if (p.node.value === 41) p.replaceWith(t.numericLiteral(opts.answer));\n} } });\n",
    BABEL_TEST: "test('answer', () => expect(41).toBe(42));\n",
}


def _fill(root: Path, limits: Limits) -> int:
    """A preflight's part: the pristine workspace's baseline, then its transforms into the store."""
    from harness import sandbox

    sb = sandbox.start("docker", root, limits=limits)
    try:
        take_baseline(sb, sb.test_files)
        return transforms.harvest(sb)
    finally:
        sb.close()


def _graded(root: Path, limits: Limits, test: str, change: dict[str, str], passing=()):
    """A graded run (fresh hosts, the store mounted) after the agent's ``change``."""
    from harness import sandbox, tools

    sb = sandbox.start("docker", root, limits=limits)
    try:
        base = take_baseline(sb, sb.test_files, passing=set(passing))
        for path, text in change.items():
            assert tools.call(sb, "file_write", {"file": path, "content": text}).ok
        return verify(sb, base, [test])
    finally:
        sb.close()


def _stored(code: bytes) -> list[Path]:
    return [
        p
        for p in transforms.store().rglob("*")
        if p.is_file() and p.suffix != ".map" and code in p.read_bytes()
    ]


@pytest.mark.docker
@pytest.mark.slow
def test_a_declaration_file_edit_is_type_checked_whatever_the_store(
    tmp_path, make_project, image, monkeypatch
):
    """ts-jest type-checks a test against every file of the program (here src/calc.d.ts, which is
    never `require`d): no key names them all, so its output is never stored. With the test's
    compiled code taken from the store, the rename below passed; `jest --ci` fails it (TS2305).
    ts-jest and typescript: fastest-validator's dependencies."""
    sys.path.insert(0, str(Path(__file__).parent))
    from realrepos import realrepos

    from harness.sandbox.deps import node_modules

    deps = str(node_modules(realrepos() / "fastest-validator"))  # in the machine's cache
    monkeypatch.setenv("ETAI_CACHE", str(tmp_path / "cache"))
    limits = Limits(memory_mb=2048, timeout_s=120, node_modules=deps)
    root = make_project(tmp_path / "ws", TS_FILES, {"transform": {"^.+\\.ts$": "ts-jest"}})
    _fill(root, limits)
    renamed = "export declare function plus(a: number, b: number): number;\n"
    v = _graded(root, limits, TS_TEST, {"src/calc.d.ts": renamed})
    assert not v.green, "the .d.ts rename was not type-checked"
    assert "TS2305" in str(v.failed_tests) or "TS2724" in str(v.failed_tests), v.failed_tests
    assert not _stored(b"toBe(3)"), "a type-checked transform was stored"


@pytest.mark.docker
@pytest.mark.slow
def test_a_babel_config_edit_changes_the_transform(tmp_path, make_project, image, monkeypatch):
    monkeypatch.setenv("ETAI_CACHE", str(tmp_path / "cache"))
    root = make_project(tmp_path / "ws", BABEL_FILES)
    assert _fill(root, LIMITS) >= 1
    assert len(_stored(b"toBe(42)")) == 1  # the test file, as the plugin rewrote it
    # the pristine config: the stored transform is right, and green
    assert _graded(root, LIMITS, BABEL_TEST, {}, passing=()).green
    # the same file, transformed under another option: expect(43).toBe(42)
    v = _graded(root, LIMITS, BABEL_TEST, {"babel.config.json": BABEL_FILES["babel.config.json"].replace("42", "43")})  # fmt: skip
    assert not v.green and "answer" in str(v.failed_tests), v.reason
    # a .babelrc that Babel finds for files under tests/ (Babel's config chain), on top of it
    rc = '{"plugins": [["../plugin.js", {"answer": 44}]]}\n'
    v = _graded(root, LIMITS, BABEL_TEST, {"tests/.babelrc": rc})
    assert not v.green and "answer" in str(v.failed_tests), v.reason


@pytest.mark.docker
@pytest.mark.slow
def test_no_session_reads_an_entry_of_a_file_it_does_not_hold(
    tmp_path, make_project, image, monkeypatch
):
    """The membership oracle: session B's workspace is session A's with one file changed (a mutant
    suite: A holds B's original). B's own hosts, which hold every token B's sandbox has, are
    handed A's exact text of that file by the agent, and still cannot reach A's entry for it (made
    to say the bug is fixed: served, B would go green). Files both sessions hold share entries."""
    monkeypatch.setenv("ETAI_CACHE", str(tmp_path / "cache"))
    a = make_project(tmp_path / "a" / "ws", FILES)  # same folder name: the same package.json
    b = make_project(tmp_path / "b" / "ws", {**FILES, "src/add.js": "exports.add = (a, b) => a * b;\n"})  # fmt: skip
    assert _fill(a, LIMITS) >= 3
    [add] = _stored(b"a - b")
    [util] = _stored(b"exports.id")
    add.write_bytes(_entry(FORGED))
    util.write_bytes(_entry("exports.id = (x) => x + 100;\n"))
    v = _graded(b, LIMITS, TEST, {"src/add.js": FILES["src/add.js"]}, passing={f"{TEST}::zero"})
    failed = str(v.failed_tests)
    assert "adds" in failed, "session B read session A's entry of a file B does not hold"
    assert "zero" in failed, "an entry of a file both sessions hold was not shared"


def test_tokens_name_a_file_and_its_content_under_this_machines_secret(tmp_path, monkeypatch):
    import base64

    monkeypatch.setenv("ETAI_CACHE", str(tmp_path))
    enc = {k: base64.b64encode(v.encode()).decode() for k, v in FILES.items()}
    scope = transforms.scope("img", "/deps", ())
    keys = transforms.file_keys(enc, scope)
    assert set(keys) == set(FILES) and all(len(k) == 64 for k in keys.values())
    # another session holding the same file: the same token; another content, path or scope: not
    other = transforms.file_keys({**enc, "src/add.js": base64.b64encode(b"x").decode()}, scope)
    assert other[TEST] == keys[TEST] and other["src/add.js"] != keys["src/add.js"]
    assert transforms.file_keys({"b.js": enc[TEST]}, scope)["b.js"] != keys[TEST]
    assert transforms.file_keys(enc, transforms.scope("img", "/deps2", ()))[TEST] != keys[TEST]
    # not a plain digest of what a sandbox sees: the secret, kept beside the store, not in it
    assert keys[TEST] != hashlib.sha256(f"{TEST}\0".encode()).hexdigest()
    secret = tmp_path / transforms.SECRET
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600 and len(secret.read_bytes()) == 32
    assert transforms.store() not in secret.parents
    # a new secret (another machine): other tokens
    secret.unlink()
    assert transforms.file_keys(enc, scope)[TEST] != keys[TEST]
    secret.write_bytes(b"short")
    with pytest.raises(Exception, match="32-byte"):
        transforms.file_keys(enc, scope)
    assert json.loads(scope) == ["img", "/deps", []]


@pytest.mark.docker
def test_no_token_is_within_the_sandbox_users_reach(tmp_path, make_project, image, monkeypatch):
    """The tokens travel over the runner's pipe and its hosts' IPC channels only: not in any
    environment, command line or file the sandbox user can read (with them, code under test could
    name its own session's entries, which is harmless; the machine's secret never leaves here)."""
    from harness import sandbox
    from harness.session.workspace import workspace_files

    monkeypatch.setenv("ETAI_CACHE", str(tmp_path / "cache"))
    dump = (  # what a test and a process it starts have in their environment, where both can write
        "const { execSync } = require('child_process');\nconst fs = require('fs');\n"
        "test('env', () => { fs.writeFileSync(`${require('os').tmpdir()}/env-${process.pid}`,"
        " JSON.stringify(process.env) + execSync('env')); });\n"
    )
    root = make_project(tmp_path / "ws", {**FILES, "tests/env.test.js": dump})
    with sandbox.start("docker", root, limits=LIMITS) as sb:
        take_baseline(sb, sb.test_files)  # its hosts have been told the tokens
        scope = transforms.scope(sb.image, sb.limits.node_modules, sb.limits.env)  # as init's
        secrets = [*transforms.file_keys(workspace_files(root), scope).values()]
        secrets.append(transforms.secret().hex())
        looked = sb.exec(["sh", "-c", "cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline | tr '\\0' '\\n'"], timeout=60)  # fmt: skip
        grep = ["grep", "-rlsF", "/scratch", "/tmp", "-e"]  # every file there it can read
        found = sb.exec([*grep, "\n".join(secrets)], timeout=60)
        canary = sb.exec([*grep, "a - b", "-e", "ETAI_WORKSPACE"], timeout=60)  # what it reaches
    assert "ETAI_WORKSPACE=" in looked.stdout  # the environments were read
    assert not [s for s in secrets if s in looked.stdout]
    assert "/scratch/ws/src/add.js" in canary.stdout and "/env-" in canary.stdout, canary
    assert not found.stdout, found
