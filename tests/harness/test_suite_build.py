"""`etai suite build` without Jest: the base + patch session format, suite.yaml's sandbox section,
the mutation operators on a real parse, the session's snippets and cursor, and the CLI's refusals.
The end-to-end build from a real project is test_suite_build_e2e.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.authoring.build import compose, mutants
from harness.base.errors import InputError
from harness.cli import main
from harness.runs.session_jobs import sandbox_profile
from harness.sandbox.deps import lockfile_digest, node_modules
from harness.suites.load import load_suite

BUNDLED = Path(__file__).resolve().parents[2] / "suites" / "jest-bugfix"
EDIT = {"file": "src/profile.js", "old": "'Anonymous'", "new": "'Nobody'"}


@pytest.fixture
def patched(tmp_path: Path):
    """A suite whose one session is the bundled first session on a shared base plus a patch."""
    first = json.loads((BUNDLED / "sessions.jsonl").read_text(encoding="utf-8").splitlines()[0])
    first.pop("held_out_tests")  # the patched sessions here hold nothing out
    root = tmp_path / "suite"
    shutil.copytree(BUNDLED / first["workspace"], root / "base")

    def write(*patches, yaml: str = "") -> Path:
        lines = []
        for i, patch in enumerate(patches):
            s = dict(first, session_id=f"s{i}", workspace={"base": "base", "patch": patch})
            lines.append(json.dumps(s))
        (root / "sessions.jsonl").write_text("\n".join(lines) + "\n")
        (root / "suite.yaml").write_text(yaml)
        return root

    return write


def test_a_patched_workspace_is_the_base_with_the_edit_and_shares_its_files(patched):
    suite = load_suite(patched([EDIT], [dict(EDIT, new="'Someone'")]))
    a, b = suite.sessions
    assert "'Nobody'" in (a.workspace / "src/profile.js").read_text()
    assert "'Someone'" in (b.workspace / "src/profile.js").read_text()
    assert a.workspace != b.workspace and a.content_hash != b.content_hash
    # Unchanged files are the base's own (hard links), not copies; the suite holds one base.
    base_test = suite.path / "base" / "tests/profile.test.js"
    assert (a.workspace / "tests/profile.test.js").stat().st_ino == base_test.stat().st_ino
    assert not (suite.path / "workspaces").exists()


def test_the_content_hash_covers_the_base_and_the_patch(patched):
    root = patched([EDIT])
    h1 = load_suite(root).sessions[0].content_hash
    readme = root / "base" / "tests" / "extra.txt"
    readme.write_text("a change to the base\n")
    assert load_suite(root).sessions[0].content_hash != h1


@pytest.mark.parametrize(
    "patch, field, reason",
    [
        ([dict(EDIT, old="nowhere in the file")], "workspace.patch[0].old", "occurs 0 times"),
        ([dict(EDIT, old="user")], "workspace.patch[0].old", "(must be once)"),
        ([dict(EDIT, file="src/missing.js")], "workspace.patch[0].file", "is not a file"),
        ([dict(EDIT, file="../x.js")], "workspace.patch[0].file", "outside the workspace"),
        ([{"file": "src/profile.js", "old": "a"}], "workspace.patch[0]", "three strings"),
        ([], "workspace.patch", "non-empty list"),
    ],
)
def test_a_bad_patch_is_named_with_its_field(patched, patch, field, reason):
    with pytest.raises(InputError) as e:
        load_suite(patched(patch))
    assert f"{field}: " in str(e.value) and reason in str(e.value)


def test_edits_apply_in_order(patched):
    second = {"file": "src/profile.js", "old": "'Nobody'", "new": "'Nobody at all'"}
    ws = load_suite(patched([EDIT, second])).sessions[0].workspace
    assert "'Nobody at all'" in (ws / "src/profile.js").read_text()


def test_suite_yaml_sandbox_section(patched):
    suite = load_suite(
        patched([EDIT], yaml="sandbox:\n  env: {TZ: America/New_York, LANG: en_US.utf8}\n"
                "  node_modules: base\n  timeout_s: 90\n  memory_mb: 2048\n")
    )  # fmt: skip
    assert suite.sandbox.env == (("LANG", "en_US.utf8"), ("TZ", "America/New_York"))
    assert suite.sandbox.node_modules == suite.path / "base" and suite.sandbox.timeout_s == 90
    assert suite.sandbox.memory_mb == 2048
    # The variables and the memory are part of every session's hash: they change what Jest reports.
    plain = load_suite(patched([EDIT]))
    assert plain.sessions[0].content_hash != suite.sessions[0].content_hash
    memory = load_suite(patched([EDIT], yaml="sandbox:\n  memory_mb: 2048\n"))
    assert memory.sessions[0].content_hash not in (
        plain.sessions[0].content_hash,
        suite.sessions[0].content_hash,
    )
    # and every sandbox of a run gets them (harness/runs/session_jobs.py sandbox_profile)
    limits = sandbox_profile(memory)
    assert limits.memory_mb == 2048 and sandbox_profile(plain).memory_mb == 1024
    assert limits.timeout_s == sandbox_profile(plain).timeout_s


@pytest.mark.parametrize(
    "yaml, reason",
    [
        ("sandbox:\n  env: {NODE_OPTIONS: --require=x}\n", "NODE_OPTIONS may not be set"),
        ("sandbox:\n  env: {LD_PRELOAD: /x.so}\n", "LD_PRELOAD may not be set"),
        ("sandbox:\n  env: {ETAI_JEST_GUARD: 'off'}\n", "ETAI_JEST_GUARD may not be set"),
        ("sandbox:\n  env: {'A B': x}\n", "not a variable name"),
        ("sandbox:\n  node_modules: nowhere\n", "sandbox.node_modules"),
        ("sandbox:\n  node_modules: ../..\n", "sandbox.node_modules"),
        ("sandbox:\n  timeout_s: 0\n", "sandbox.timeout_s"),
        ("sandbox:\n  memory_mb: 100\n", "sandbox.memory_mb: must be a whole number"),
        ("sandbox:\n  memory_mb: 2048.5\n", "sandbox.memory_mb"),
        ("sandbox:\n  memory_mb: '2g'\n", "sandbox.memory_mb"),
        ("sandbox:\n  mounts: [/etc]\n", "must be a mapping of env"),
    ],
)
def test_suite_yaml_sandbox_refusals(patched, yaml, reason):
    with pytest.raises(InputError) as e:
        load_suite(patched([EDIT], yaml=yaml))
    assert reason in str(e.value) and "suite.yaml" in str(e.value)


SOURCE = """\
export function pick(items, n = 2, opts = { strict: true }) {
  const out = [...items];
  for (let i = 0; i < n; i++) {
    if (items[i] && items[i].ok) out.push(items[i]);
  }
  if (n >= out.length || !opts) throw new Error('too many');
  return out.slice(1, n);
}
export async function load(fetch, url) {
  const body = await fetch(url, 3);
  const month = new Date(body.at).getMonth() + 1;
  return { ...body, month, id: /^id-\\d+$/.test(body.id) };
}
export const x = 1, y = 2;
export const dotted = (s) => s.split(/\\./).length === 2;
export { pick as choose, load as fetchAll };
"""


def _mutated(ms, op):
    return {m.apply(SOURCE) for m in ms if m.operator == op}


def test_every_operator_finds_its_site_on_a_real_parse():
    ms, unparsed = mutants.find({"src/a.js": SOURCE})
    assert unparsed == 1  # `return { ...body }` without `return` is a block: it does not parse
    assert {m.operator for m in ms} == set(mutants.OPERATORS)
    assert any("const body = fetch(url, 3);" in t for t in _mutated(ms, "remove_await"))
    assert any("i <= n" in t for t in _mutated(ms, "boundary"))
    assert any("i < n - 1" in t for t in _mutated(ms, "loop_bound"))
    assert any("getMonth();" in t for t in _mutated(ms, "month_index"))
    assert any("getUTCMonth()" in t for t in _mutated(ms, "date_utc"))
    assert any("fetch(3, url)" in t for t in _mutated(ms, "swap_arguments"))
    assert any("n = 3," in t for t in _mutated(ms, "wrong_default"))
    assert any("\n  out.slice(1, n);" in t for t in _mutated(ms, "drop_return"))
    assert any("if (items[i].ok)" in t for t in _mutated(ms, "drop_null_guard"))
    assert any("/id-\\d+$/" in t for t in _mutated(ms, "regex_anchor"))
    assert any("/^id-d+$/" not in t and "/^id-\\d+/" in t for t in _mutated(ms, "regex_anchor"))
    assert any("Object.assign(body, { month" in t for t in _mutated(ms, "mutate_in_place"))
    assert any("const out = items;" in t for t in _mutated(ms, "mutate_in_place"))
    assert any("!opts) {}" in t for t in _mutated(ms, "swallow_error"))
    assert any("export { load as fetchAll }" in t for t in _mutated(ms, "wrong_export"))
    assert any("out.slice(2, n)" in t for t in _mutated(ms, "off_by_one"))
    assert any("|| items[i].ok" in t for t in _mutated(ms, "flip_logical"))
    assert any("s.split(/./)" in t for t in _mutated(ms, "regex_escape"))
    assert any(".length == 2" in t for t in _mutated(ms, "strict_equality"))
    assert any(".length !== 2" in t for t in _mutated(ms, "negate_equality"))
    assert all(
        m.intent in __import__("harness.session.intents").session.intents.INTENTS for m in ms
    )


def test_a_mutant_that_does_not_parse_is_counted_and_dropped():
    ms, unparsed = mutants.find(
        {"src/b.js": "function f() {\n  return function () { return 1; };\n}\n"}
    )
    assert unparsed == 1  # the outer `return` dropped leaves a function declaration without a name
    assert [m.operator for m in ms] == ["drop_return"]  # the inner one, `1;`


def test_duplicates_are_dropped_and_the_order_is_seeded_and_mixes_operators():
    ms, _ = mutants.find({"src/a.js": SOURCE, "src/copy.js": SOURCE})
    texts = [(m.file, m.apply(SOURCE)) for m in ms]
    assert len(texts) == len(set(texts))
    a, b = mutants.ordered(ms, 1), mutants.ordered(ms, 1)
    assert [m.id for m in a] == [m.id for m in b] != [m.id for m in mutants.ordered(ms, 2)]
    n_ops = len({m.operator for m in ms})
    assert len({m.operator for m in a[:n_ops]}) == n_ops


def test_snippets_are_unique_in_both_texts_and_the_cursor_target_inside():
    text = "a = 1\nif (x) f()\nb = 2\nif (x) f()\nc = 3\n"
    m = mutants.Mutant(
        "s.js", text.index("x", 10), text.index("x", 10) + 1, "!x", "negate_condition", 4, 5, None
    )
    old, new = compose.snippets(text, m)
    assert text.count(old) == 1 and m.apply(text).count(new) == 1
    assert old == "a = 1\nif (x) f()\nb = 2"  # grown a line each way until unique
    start = m.apply(text).index(new)
    assert start <= m.start <= start + len(new)


def test_assertion_site_is_the_first_frame_in_the_test_file():
    msg = [
        "Error: boom\n    at f (/scratch/ws/src/a.js:3:9)\n    at Object.<anonymous> (/scratch/ws/test/a.spec.js:12:7)"
    ]
    assert compose.assertion_site(msg, "test/a.spec.js", "/scratch/ws") == (12, 7)
    assert compose.assertion_site(["no frames"], "test/a.spec.js", "/scratch/ws") == (1, 1)


def test_the_cursor_target_is_the_first_character_the_fix_changes():
    """Where harness.runs.loop.edit_cursor puts the reference's edit: a flipped `a && b` is a node that
    starts at `a`, and the fix types at `&&` (line 2, column 12 of the mutated file)."""
    text = "function f(a, b) {\n  return a && b;\n}\n"
    ms, _ = mutants.find({"src/f.js": text})
    m = next(m for m in ms if m.operator == "flip_logical")
    assert (m.line, m.column) == (2, 10)
    assert compose.fix_site(text, m) == {"line": 2, "column": 12}
    sess = compose.session("p", m, text, [compose.Failure("test/f.test.js", "t", "msg", 3, 5)],
                           __import__("random").Random(0))  # fmt: skip
    assert sess["cursor_target"] == {
        "file": "src/f.js",
        "line": 2,
        "column": 12,
        "placement": "before",
    }


def test_lockfile_is_required(tmp_path):
    (tmp_path / "package.json").write_text("{}")
    with pytest.raises(InputError, match="no package-lock.json"):
        lockfile_digest(tmp_path)
    (tmp_path / "package-lock.json").write_text("{}")
    d = lockfile_digest(tmp_path)
    (tmp_path / ".npmrc").write_text("legacy-peer-deps=true\n")
    assert lockfile_digest(tmp_path) != d


def test_a_dist_tag_in_the_manifest_installs_the_lockfiles_version(tmp_path, monkeypatch):
    """Real npm against the registry: "latest" has moved on since the lockfile was written (as
    luxon's `documentation: latest`), which `npm ci` refuses; the install follows the lockfile."""
    monkeypatch.setenv("ETAI_CACHE", str(tmp_path / "cache"))
    project = tmp_path / "proj"
    project.mkdir()
    (project / "package.json").write_text('{"name": "p", "version": "1.0.0", "dependencies": {}}')
    import subprocess

    made = subprocess.run(
        [
            "npm",
            "install",
            "--package-lock-only",
            "--ignore-scripts",
            "--no-audit",
            "is-number@6.0.0",
        ],
        cwd=project,
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stderr
    manifest = json.loads((project / "package.json").read_text())
    manifest["dependencies"]["is-number"] = "latest"  # 7.x on the registry since 2018
    (project / "package.json").write_text(json.dumps(manifest))
    nm = node_modules(project)
    assert json.loads((nm / "is-number" / "package.json").read_text())["version"] == "6.0.0"
    assert (
        json.loads((project / "package.json").read_text())["dependencies"]["is-number"] == "latest"
    )


@pytest.mark.parametrize(
    "argv, where",
    [
        (["--max", "0"], "--max"),
        (["--env", "TZ"], "--env"),
        (["--runs", "0"], "--runs"),
        (["--src", "nowhere"], "--src"),
    ],
)
def test_cli_refuses_bad_input_with_exit_2(tmp_path, capsys, argv, where):
    (tmp_path / "package.json").write_text("{}")
    (tmp_path / "package-lock.json").write_text("{}")
    rc = main(["suite", "build", str(tmp_path), "--out", str(tmp_path / "out"), *argv])
    assert rc == 2 and where in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_cli_refuses_a_project_without_a_lockfile_and_names_the_flag(tmp_path, capsys):
    (tmp_path / "package.json").write_text("{}")
    assert main(["suite", "build", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "no package-lock.json" in err and "--resolve-lockfile" in err
    assert not (tmp_path / "out").exists()


def test_a_resolved_lockfile_pins_todays_versions_and_installs_with_legacy_peers(
    tmp_path, monkeypatch
):
    """Real npm against the registry, as dinero's copy needs: no lockfile, a manifest whose peer
    dependencies conflict (a plugin asking for an older host than the one pinned). Resolved as npm 6
    did, written into the folder with the .npmrc line that lets `npm ci` install the same tree."""
    monkeypatch.setenv("ETAI_CACHE", str(tmp_path / "cache"))
    base = tmp_path / "base"
    base.mkdir()
    manifest = {"name": "p", "version": "1.0.0",
                "devDependencies": {"rollup": "2.9.0", "rollup-plugin-babel-minify": "9.1.1"}}  # fmt: skip
    (base / "package.json").write_text(json.dumps(manifest))
    from harness.sandbox.deps import resolve_lockfile

    resolve_lockfile(base)
    lock = json.loads((base / "package-lock.json").read_text())
    assert lock["packages"]["node_modules/rollup"]["version"] == "2.9.0"
    assert "legacy-peer-deps=true" in (base / ".npmrc").read_text().splitlines()
    resolve_lockfile(base)  # again: the .npmrc line is not written twice
    assert (base / ".npmrc").read_text().count("legacy-peer-deps") == 1
    nm = node_modules(base)
    assert json.loads((nm / "rollup" / "package.json").read_text())["version"] == "2.9.0"


def test_cli_refuses_a_folder_that_is_not_a_node_project(tmp_path, capsys):
    assert main(["suite", "build", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    assert "no package.json" in capsys.readouterr().err


def test_a_second_build_on_one_out_exits_2_naming_the_holder(tmp_path, capsys):
    # Another build holds the folder (the lock `etai run` takes, flock on .etai.lock naming its pid):
    # this one is refused before anything is written, so mutants.jsonl never gets a verdict twice.
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "package.json").write_text("{}")
    (project / "package-lock.json").write_text("{}")
    (project / "src" / "a.js").write_text("module.exports = (a, b) => a < b;\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "mutants.jsonl").write_text('{"id": "m1", "verdict": "survived"}\n')
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(out / ".etai.lock")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "held\n"
        rc = main(["suite", "build", str(project), "--out", str(out), "--no-progress"])
        err = capsys.readouterr().err
    finally:
        holder.kill()
        holder.wait()
    assert (
        rc == 2 and f"{out}: the run folder is in use by another etai run (pid {holder.pid})" in err
    ), err
    assert sorted(os.listdir(out)) == [".etai.lock", "mutants.jsonl"], "nothing written"
    assert (out / "mutants.jsonl").read_text() == '{"id": "m1", "verdict": "survived"}\n'


HOLD_LOCK = """import fcntl, os, sys, time
f = open(sys.argv[1], "a+"); fcntl.flock(f, fcntl.LOCK_EX); f.write(str(os.getpid())); f.flush()
print("held", flush=True); time.sleep(600)
"""
