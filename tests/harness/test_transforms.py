"""The trusted transform cache (harness/sandbox/transforms.py, runner/transform-cache.js) through real
sandboxes and real Jest: an entry is taken only for the file, config and workspace plugins it was
made from, never when its checksum is wrong, and nothing a sandbox user writes is ever read.

Each test edits the store as only the harness can (it is written on this machine, read-only in every
sandbox) to make a stored entry say something the file does not: a run that used it would go green
on a workspace that is not fixed. The first test shows such an entry is used when its key matches
(without the cache, that run is red); the rest, that it is not when anything it depends on changed."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from harness.grading.verify import take_baseline, verify
from harness.sandbox import Limits, transforms

TEST = "tests/add.test.js"
FILES = {
    "src/add.js": "exports.add = (a, b) => a - b;\n",  # the bug
    "src/util.js": "exports.id = (x) => x;\n",
    TEST: "const { add } = require('../src/add');\nconst { id } = require('../src/util');\n"
    "test('adds', () => expect(add(2, 3)).toBe(5));\ntest('zero', () => expect(id(add(0, 0))).toBe(0));\n",
}
FORGED = "exports.add = (a, b) => a + b;\n"  # what a poisoned entry would hand the tests
LIMITS = Limits(memory_mb=512, timeout_s=30)


def _entry(code: str) -> bytes:
    return f"{hashlib.sha256(code.encode()).hexdigest()}\n{code}".encode()


def _primed(tmp_path, make_project, monkeypatch, files=FILES) -> tuple[Path, Path]:
    """A store of this test's own, filled from a sandbox of the pristine workspace, and the store
    entry made from src/add.js."""
    from harness import sandbox

    monkeypatch.setenv("ETAI_CACHE", str(tmp_path / "cache"))
    root = make_project(tmp_path / "ws", files)
    sb = sandbox.start("docker", root, limits=LIMITS)
    try:
        take_baseline(sb, sb.test_files)
        assert transforms.harvest(sb) >= 3  # add.js, util.js and the test file at least
    finally:
        sb.close()
    made = [
        p
        for p in transforms.store().rglob("*")
        if p.suffix != ".map" and p.is_file() and b"a - b" in p.read_bytes()
    ]
    assert len(made) == 1, made
    return root, made[0]


def _verdict(root: Path, change: dict[str, str] | None = None):
    from harness import sandbox, tools

    sb = sandbox.start("docker", root, limits=LIMITS)
    try:
        base = take_baseline(sb, sb.test_files, passing={f"{TEST}::zero"})
        for path, text in (change or {}).items():
            assert tools.call(sb, "file_write", {"file": path, "content": text}).ok
        return verify(sb, base, [TEST]), sb.name
    finally:
        sb.close()


@pytest.mark.docker
@pytest.mark.slow
def test_an_entry_is_taken_only_for_the_file_it_was_made_from(
    tmp_path, make_project, image, monkeypatch
):
    root, entry = _primed(tmp_path, make_project, monkeypatch)
    pristine = entry.read_bytes()
    entry.write_bytes(_entry(FORGED))
    # unchanged add.js: the stored entry is what the tests get (without the store: red)
    assert _verdict(root)[0].green
    # any other content is a different key, transformed in the host as without the store
    v, _ = _verdict(root, {"src/add.js": "exports.add = (a, b) => a * b;\n"})
    assert not v.green and "adds" in str(v.failed_tests)
    # an entry whose checksum does not match its code is not one
    entry.write_bytes(pristine.replace(b"a - b", b"a + b"))
    assert not _verdict(root)[0].green


@pytest.mark.docker
@pytest.mark.slow
def test_a_changed_workspace_babel_plugin_never_gets_the_stored_code(
    tmp_path, make_project, image, monkeypatch
):
    # Jest's own key names a workspace plugin (its path, in Babel's options) but not its code
    files = {
        **FILES,
        "babel.config.js": "module.exports = { plugins: ['./plugin.js'] };\n",
        "plugin.js": "module.exports = () => ({ visitor: {} });\n",
    }
    root, entry = _primed(tmp_path, make_project, monkeypatch, files)
    entry.write_bytes(_entry(FORGED))
    assert _verdict(root)[0].green  # the key matches: taken
    plugin = "module.exports = () => ({ visitor: { Identifier(p) { if (p.node.name === 'zzz') p.node.name = 'yyy'; } } });\n"
    v, _ = _verdict(root, {"plugin.js": plugin})
    # not the stored code's green: the guard also refuses a changed file in the host's realm
    assert not v.green, v.reason


@pytest.mark.docker
@pytest.mark.slow
def test_nothing_a_sandbox_user_writes_is_read(tmp_path, make_project, image, monkeypatch):
    from harness import sandbox

    root, entry = _primed(tmp_path, make_project, monkeypatch)
    stored = {p: p.read_bytes() for p in transforms.store().rglob("*") if p.is_file()}
    sb = sandbox.start("docker", root, limits=LIMITS)
    try:
        base = take_baseline(sb, sb.test_files, passing={f"{TEST}::zero"})
        # as the sandbox user (what any test or command runs as): a forged entry under every
        # stored key, in the folder the hosts write and in the store itself
        forged = "f=$(printf '%s\\n%s' $1 \"$2\"); for k in $3; do "
        forged += "printf '%s' \"$f\" > /scratch/transforms/$k; "
        forged += (
            "printf '%s' \"$f\" > /etai-transforms/$(echo $k | cut -c1-2)/$k && echo WROTE; done"
        )
        code = FORGED.rstrip("\n")  # the shell's $(...) would drop a last newline
        keys = " ".join(p.name for p in stored if not p.name.endswith(".map"))
        r = subprocess.run(
            ["docker", "exec", "-u", "10001", sb.name, "sh", "-c", forged, "sh",
             hashlib.sha256(code.encode()).hexdigest(), code, keys],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert "WROTE" not in r.stdout and "Read-only file system" in r.stderr, r
        v = verify(sb, base, [TEST])
        assert not v.green and "adds" in str(v.failed_tests)
    finally:
        sb.close()
    # an episode's sandbox is never harvested: the store is as it was
    assert {p: p.read_bytes() for p in transforms.store().rglob("*") if p.is_file()} == stored


def test_the_store_drops_what_a_killed_harvest_left(tmp_path, monkeypatch):
    monkeypatch.setenv("ETAI_CACHE", str(tmp_path))
    root = transforms.store()
    dead = subprocess.Popen(["true"])
    dead.wait()
    key = "ab" * 32
    left = root / f".{key}.7.{dead.pid}.tmp"  # thread 7 of a process that is gone
    live = root / f".{key}.map.7.{os.getpid()}.tmp"  # a harvest under way here
    left.write_text("partial")
    live.write_text("partial")
    assert transforms.store() == root and not left.exists() and live.exists()
    assert transforms._valid(key, _entry("x = 1;")) and not transforms._valid(key, b"0\nx = 1;")


def test_a_store_under_another_folder_name_is_removed(tmp_path, monkeypatch):
    """Every sandbox reads the store: one kept under another name may hold transforms of sealed
    (held-out) test files, which this store never admits (transforms.NAME)."""
    monkeypatch.setenv("ETAI_CACHE", str(tmp_path))
    old = tmp_path / "transforms" / "ab" / ("ab" * 32)
    old.parent.mkdir(parents=True)
    old.write_bytes(_entry("expect(held(1)).toBe(2);"))
    root = transforms.store()
    assert root == tmp_path / transforms.NAME and root.is_dir()
    assert not (tmp_path / "transforms").exists()


@pytest.mark.docker
def test_a_preflight_stores_the_pristine_workspace_and_not_the_fix(tmp_path, monkeypatch, image):
    """Every sandbox reads the store, the code under test included: a transform of a file as the
    reference changed it would hand an agent the fix (technique store-reference-at-run-time)."""
    import dataclasses
    import json
    import sys

    from harness import sandbox
    from harness.runs.session_jobs import local_preflights
    from harness.suites.load import load_suite

    sys.path.insert(0, str(Path(__file__).parent))  # the helper modules beside this file
    from tamper_corpus import fixed_text

    monkeypatch.setenv("ETAI_CACHE", str(tmp_path / "cache"))
    st = load_suite("jest-bugfix")
    s = next(x for x in st.sessions if x.session_id == "paginate-page-size-off-by-one")
    flights = local_preflights(dataclasses.replace(st, sessions=[s]), progress=False)
    assert flights[s.session_id]["ok"], flights
    target = s.cursor_target.file
    sources = []
    for p in transforms.store().rglob("*.map"):
        sources += json.loads(p.read_text()).get("sourcesContent") or []
    pristine, fixed = (s.workspace / target).read_text(), fixed_text(s, target)
    assert pristine != fixed and pristine in sources and fixed not in sources
    # Nor can the code under test list the store: an entry is read by its key, which names the
    # source it was made from (an earlier session's fix, in a mined suite, lies there too).
    entry = next(p for p in transforms.store().rglob("*") if p.is_file())
    shard = entry.parent.name
    with sandbox.start("docker", s.workspace, image=image) as sb:
        for folder in (transforms.MOUNT, f"{transforms.MOUNT}/{shard}"):
            assert sb.exec(["ls", folder], timeout=30).exit_code != 0, folder
        read = sb.exec(["cat", f"{transforms.MOUNT}/{shard}/{entry.name}"], timeout=30)
        assert read.exit_code == 0
