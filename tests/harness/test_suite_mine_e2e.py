"""`etai suite mine` end to end on a real history: fastest-validator's bundle in
../shared/realrepos-history, with the dependencies of ../shared/realrepos/fastest-validator (both
read in place), mined in the sandbox over 8 commits that keep 3; then the oracle must reach green on
every session within its own reference and the do-nothing agent on none. In make test (`make
mined-suites` mines more)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harness.authoring import MEMORY_MB
from harness.authoring.mine import fix
from harness.cli import main
from harness.runs.runner import run
from harness.session.intents import INTENTS
from harness.session.workspace import workspace_paths
from harness.suites.load import load_suite

sys.path.insert(0, str(Path(__file__).parent))  # the helper modules beside this file
from realrepos import realrepos  # noqa: E402

BUNDLE = realrepos().parent / "realrepos-history" / "fastest-validator.bundle"
DEPS = realrepos() / "fastest-validator"
# Eight commits of November 2018: a fix too large for the filters, three kept fixes and four that
# are no candidates (readme, dependencies, changelog, version). An old workspace has a small suite,
# and every graded run is a whole suite. The three commits after these keep two more fixes (61 s
# of make test for all eleven, build and replay); `make mined-suites` mines the whole history.
RANGE = "22ff6311832a..274fe00ec3fd"
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(2400)]


@pytest.fixture(scope="module")
def mined(tmp_path_factory, image):
    for p in (BUNDLE, DEPS / "package-lock.json"):
        if not p.is_file():
            pytest.fail(f"{p} is missing: the shared realrepos folders are the test's input")
    out = tmp_path_factory.mktemp("mined") / "fastest-validator"
    argv = ["suite", "mine", str(BUNDLE), "--out", str(out), "--range", RANGE]
    argv += ["--deps", str(DEPS), "--max", "5", "--no-progress"]
    assert main(argv) == 0
    rows = (out / "commits.jsonl").read_text()
    assert main(argv) == 0  # the same command resumes: nothing is tried twice
    assert (out / "commits.jsonl").read_text() == rows
    return out


def _rows(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "commits.jsonl").read_text().splitlines()]


def test_mined_sessions_start_at_the_parent_and_replay_the_real_fix(mined):
    suite = load_suite(mined)
    assert len(suite.sessions) >= 3
    assert suite.sandbox.memory_mb == MEMORY_MB  # replays get the memory the mine tested with
    kept = {r["session"]["session_id"]: r for r in _rows(mined) if r["verdict"] == "kept"}
    for s in suite.sessions:
        assert s.intent in INTENTS
        run1, *reads_and_edits = s.execution_trace
        assert run1.tool_called == "jest_run" and run1.execution_result["status"] == "failed"
        assert run1.tool_args["test_file"] in s.verify_files
        reads = [x for x in reads_and_edits if x.tool_called == "file_read"]
        edits = [x for x in reads_and_edits if x.tool_called == "file_edit"]
        assert reads and edits and all(x.execution_result["status"] == "ok" for x in edits)
        # The workspace is the parent's source: each read shows it, the edits make the commit's.
        texts = {
            x.tool_args["file"]: (s.workspace / x.tool_args["file"]).read_text() for x in reads
        }
        for x in reads:
            assert x.execution_result["content"] == texts[x.tool_args["file"]]
        assert s.cursor_target.file == edits[0].tool_args["file"]
        # The instruction names a failing test and nothing only the fix introduces.
        failing = {f["name"] for f in run1.execution_result["failed_tests"]}
        assert any(name in s.user_instruction for name in failing)
        workspace = "\n".join(  # the rule's "known": each file's name and text
            f"{rel}\n{p.read_text(errors='replace')}" for rel, p in workspace_paths(s.workspace)
        )
        added = "\n".join(x.tool_args["new"] for x in edits)
        assert fix.leaks(s.user_instruction, fix.new_identifiers(added, workspace)) == []
        # PASS_TO_PASS as test ids, as a manifest row after version 1 needs them.
        p2p, f2p = s.raw["pass_to_pass"], s.raw["fail_to_pass"]
        assert isinstance(p2p, list) and all("::" in t for t in p2p) and not set(p2p) & set(f2p)
        prov = s.raw["provenance"]
        assert prov["repo"] == "fastest-validator" and s.session_id.endswith(prov["commit"][:10])
        assert "author" not in prov and len(prov["author_sha256"]) == 12
        held = kept[s.session_id]["held_out"].get("tests", [])
        shown = json.dumps([s.user_instruction, s.raw["ide_context"], s.raw["execution_trace"]])
        for tid in held:  # a held-out test is run at the final verification, never shown
            file, name = tid.split("::", 1)
            assert name not in shown and file in s.held_out
    assert any(s.raw["pass_to_pass"] for s in suite.sessions)
    summary = json.loads((mined / "summary.json").read_text())
    assert summary["kept"] == len(suite.sessions) and summary["candidates"] > summary["kept"]
    assert summary["commits_scanned"] == 8 and summary["skipped"] == {"too_large": 1}, summary


def test_oracle_green_within_its_reference_and_noop_never(mined):
    suite = load_suite(mined)
    k = suite.defaults["k"]
    assert k >= max(len(s.execution_trace) for s in suite.sessions)
    summary = run(str(mined), ["oracle", "noop"], out=mined.parent / "run", progress=False)
    oracle, noop = summary["agents"]["oracle"], summary["agents"]["noop"]
    assert oracle["reference_broken"] == [] and oracle["n_infra_error"] == 0
    assert oracle["path_accuracy"][k] == 1.0
    assert noop["path_accuracy"][k] == 0.0 and noop["pass_at_k"][1] == 0.0
    assert oracle["cursor"]["mean_px"] == 0.0  # the real fix starts at cursor_target


def test_the_projects_jest_config_says_which_scripts_are_test_files(tmp_path, image, monkeypatch):
    """Tests named ``test/add.js`` under a ``testRegex`` (no .test. in the name), beside a helper
    the config ignores: the commit is kept on its test file alone, and a commit that changes only
    the helper is left out as no_test_file, by Jest's own listing."""
    jest = {"testRegex": "/test/[^/]+\\.js$", "testPathIgnorePatterns": ["/test/helpers\\.js$"]}
    repo, commit = _git_project(tmp_path, monkeypatch, jest)
    add, test, helper = (
        repo / "lib" / "add.js",
        repo / "test" / "add.js",
        repo / "test" / "helpers.js",
    )
    commit("add", {
        add: "module.exports = (a, b) => a - b;\n",
        helper: "exports.two = 2;\n",
        test: "const add = require('../lib/add');\n\ntest('loads', () => expect(add).toBeTruthy());\n",
    })  # fmt: skip
    commit("fix: add adds", {
        add: "module.exports = (a, b) => a + b;\n",
        helper: "exports.two = 2;\nexports.three = 3;\n",
        test: "const add = require('../lib/add');\nconst { two, three } = require('./helpers');\n\n"
        "test('adds', () => expect(add(two, three)).toBe(5));\n",
    })  # fmt: skip
    commit("fix: a comment and a helper", {
        add: "// Adds.\nmodule.exports = (a, b) => a + b;\n",
        helper: "exports.two = 2;\nexports.three = 3;\nexports.four = 4;\n",
    })  # fmt: skip
    out = tmp_path / "mined"
    argv = ["suite", "mine", str(repo), "--out", str(out), "--range", "HEAD~2..HEAD"]
    assert main([*argv, "--src", "lib", "--runs", "1", "--no-progress"]) == 0
    (s,) = load_suite(out).sessions
    assert s.verify_files == ("test/add.js",)
    verdicts = {r["subject"]: r for r in _rows(out)}
    assert verdicts["fix: add adds"]["verdict"] == "kept", verdicts
    left = verdicts["fix: a comment and a helper"]
    assert left["verdict"] == "no_test_file" and left["scripts"] == ["test/helpers.js"], left


def _git_project(tmp_path: Path, monkeypatch, jest: dict | None = None):
    """An empty project under git (lib/, test/, a lockfile without dependencies) and the function
    that commits files to it: ``commit(message, {path: text})``."""
    import subprocess

    monkeypatch.setenv("ETAI_CACHE", str(tmp_path / "cache"))
    repo = tmp_path / "p"
    (repo / "lib").mkdir(parents=True)
    (repo / "test").mkdir()
    manifest = {"name": "p", "version": "1.0.0", **({"jest": jest} if jest else {})}
    (repo / "package.json").write_text(json.dumps(manifest))
    lock = {"name": "p", "version": "1.0.0", "lockfileVersion": 3, "requires": True,
            "packages": {"": {"name": "p", "version": "1.0.0"}}}  # fmt: skip
    (repo / "package-lock.json").write_text(json.dumps(lock))
    env = {"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@example.org", "GIT_COMMITTER_NAME": "a",
           "GIT_COMMITTER_EMAIL": "a@example.org", "PATH": "/usr/bin:/bin"}  # fmt: skip

    def commit(message: str, files: dict) -> None:
        for path, text in files.items():
            path.write_text(text)
        for args in (["add", "-A"], ["commit", "-qm", message]):
            subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)

    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    return repo, commit


def test_a_fix_of_the_tests_helper_is_left_out(tmp_path, image, monkeypatch):
    """A helper beside the sources that makes the tests' assertions (runner/test-support.js) is
    protected in every episode, so a commit that fixes it cannot be a session: its reference would
    edit a protected file. Without the support listing it is kept (the parent fails, the commit
    passes); without this check it is tried and left out only when graded."""
    repo, commit = _git_project(tmp_path, monkeypatch)
    add, check, test = (
        repo / "lib" / "add.js",
        repo / "lib" / "check.js",
        repo / "test" / "add.test.js",
    )
    commit("add", {
        add: "module.exports = (a, b) => a + b;\n",
        check: "exports.same = (got, want) => expect(got).toBe(want + 1);\n",
        test: "const add = require('../lib/add');\nconst { same } = require('../lib/check');\n\n"
        "test('adds', () => same(add(2, 3), 5));\n",
    })  # fmt: skip
    commit("fix: the helper compares what it is given", {
        check: "exports.same = (got, want) => expect(got).toBe(want);\n",
        test: "const add = require('../lib/add');\nconst { same } = require('../lib/check');\n\n"
        "test('adds', () => same(add(2, 3), 5));\ntest('adds zero', () => same(add(2, 0), 2));\n",
    })  # fmt: skip
    out = tmp_path / "mined"
    argv = ["suite", "mine", str(repo), "--out", str(out), "--range", "HEAD~1..HEAD"]
    main([*argv, "--src", "lib", "--runs", "1", "--no-progress"])
    (row,) = _rows(out)
    assert row["verdict"] == "fix_in_test_helper" and row["files"] == ["lib/check.js"], row


def test_only_eligible_cases_of_a_commit_are_held_out(tmp_path, image, monkeypatch):
    """A commit's new tests, all failing at the parent: a copy of the instruction's case with other
    names (a twin), one that asserts nothing (it throws by hand: vacuous), one that calls a
    function only the fix adds (new API) stay visible, counted by reason; only the two left are
    held out."""
    repo, commit = _git_project(tmp_path, monkeypatch)
    calc, test = repo / "lib" / "calc.js", repo / "test" / "calc.test.js"
    commit("half", {
        calc: "exports.half = (x) => x / 3;\n",
        test: "const { half } = require('../lib/calc');\n\ntest('loads', () => expect(half).toBeTruthy());\n",
    })  # fmt: skip
    commit("fix: half halves", {
        calc: "exports.half = (x) => x / 2;\nexports.twice = (x) => x * 2;\n",
        test: "const { half, twice } = require('../lib/calc');\n\n"
        "test('halves four', () => expect(half(4)).toBe(2));\n"
        "test('halves four again', () => {\n  const got = half(4);\n  expect(got).toBe(2);\n});\n"
        "test('halves quietly', () => {\n  if (half(8) !== 4) throw new Error('not half');\n});\n"
        "test('halves six', () => expect(half(6)).toBe(3));\n"
        "test('halves ten', () => expect(half(10)).toBe(5));\n"
        "test('twice one', () => expect(twice(1)).toBe(2));\n",
    })  # fmt: skip
    out = tmp_path / "mined"
    argv = ["suite", "mine", str(repo), "--out", str(out), "--range", "HEAD~1..HEAD"]
    assert main([*argv, "--src", "lib", "--runs", "1", "--no-progress"]) == 0
    (row,) = _rows(out)
    assert row["verdict"] == "kept", row
    assert len(row["session"]["fail_to_pass"]) == 6, row
    held = row["held_out"]
    assert sorted(held["tests"]) == [
        "test/calc.test.js::halves six",
        "test/calc.test.js::halves ten",
    ], held
    assert held["cases"] == {
        "considered": 5, "twin": 1, "vacuous": 1, "new_api": 1, "uncovered": 0,
        "coverage_unknown": 0, "held_out": 2,
    }, held  # fmt: skip
    summary = json.loads((out / "summary.json").read_text())
    assert summary["held_out_cases"] == held["cases"], summary
