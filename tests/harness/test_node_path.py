"""A project tested with `NODE_PATH=./ jest` (harness/authoring/node_path.py): NODE_PATH leaves the
suite's env and becomes Jest's modulePaths in the workspace's config; then a real build in the
sandbox resolves the project's bare requires, and the suite loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.authoring.node_path import add_module_paths, split_node_path
from harness.base.errors import InputError
from harness.cli import main
from harness.runs.runner import run
from harness.suites.load import load_suite


def test_node_path_leaves_the_env_as_root_dir_paths():
    env = (("NODE_PATH", "./:src/lib::./src/lib"), ("TZ", "UTC"))
    assert split_node_path(env) == ((("TZ", "UTC"),), ("<rootDir>", "<rootDir>/src/lib"))
    assert split_node_path((("TZ", "UTC"),)) == ((("TZ", "UTC"),), ())


@pytest.mark.parametrize("value", ["/usr/lib/node", "../shared", "a/../../b", ".."])
def test_a_folder_outside_the_project_is_refused(value):
    with pytest.raises(InputError, match="outside the project") as e:
        split_node_path((("NODE_PATH", value),))
    assert e.value.where == "--env"


def test_module_paths_go_into_package_json_jest_section_once(tmp_path):
    pkg = tmp_path / "package.json"
    pkg.write_text(json.dumps({"name": "p", "jest": {"testEnvironment": "node"}}))
    add_module_paths(tmp_path, ("<rootDir>",))
    add_module_paths(tmp_path, ("<rootDir>", "<rootDir>/lib"))
    jest = json.loads(pkg.read_text())["jest"]
    assert jest == {"testEnvironment": "node", "modulePaths": ["<rootDir>", "<rootDir>/lib"]}
    pkg.write_text(json.dumps({"name": "p"}))  # no section yet
    add_module_paths(tmp_path, ("<rootDir>",))
    assert json.loads(pkg.read_text())["jest"] == {"modulePaths": ["<rootDir>"]}


def test_a_json_config_file_is_the_one_changed(tmp_path):
    (tmp_path / "package.json").write_text('{"name": "p"}')
    (tmp_path / "jest.config.json").write_text('{"verbose": true}')
    add_module_paths(tmp_path, ("<rootDir>",))
    assert json.loads((tmp_path / "jest.config.json").read_text())["modulePaths"] == ["<rootDir>"]
    assert json.loads((tmp_path / "package.json").read_text()) == {"name": "p"}


@pytest.mark.parametrize(
    ("files", "match"),
    [
        ({"jest.config.js": "module.exports = {}"}, "jest.config.js: add modulePaths"),
        ({"package.json": '{"jest": "./cfg.json"}'}, "not a Jest config object"),
        ({"package.json": "{not json"}, "cannot read it as JSON"),
        ({"package.json": '{"jest": {"modulePaths": "x"}}'}, "modulePaths is not a list"),
    ],
)
def test_configs_it_cannot_change_are_named(tmp_path, files, match):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    before = {p.name: p.read_text() for p in tmp_path.iterdir()}
    with pytest.raises(InputError, match=match):
        add_module_paths(tmp_path, ("<rootDir>",))
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == before  # nothing half written


def _project(root: Path) -> Path:
    """A project whose code and tests require each other by bare names from its root."""
    (root / "lib").mkdir(parents=True)
    manifest = {"name": "np", "version": "1.0.0", "scripts": {"test": "NODE_PATH=./ jest"}}
    (root / "package.json").write_text(json.dumps(manifest))
    lock = {"name": "np", "version": "1.0.0", "lockfileVersion": 3, "requires": True,
            "packages": {"": {"name": "np", "version": "1.0.0"}}}  # fmt: skip
    (root / "package-lock.json").write_text(json.dumps(lock))
    (root / "lib" / "add.js").write_text(
        "module.exports = function add(a, b) {\n  return a + b;\n};\n"
    )
    (root / "lib" / "sum.js").write_text(
        "const add = require('lib/add');\n\n"
        "module.exports = function sum(xs) {\n  return xs.reduce(add, 0);\n};\n"
    )
    (root / "test").mkdir()
    (root / "test" / "sum.test.js").write_text(
        "const sum = require('lib/sum');\nconst add = require('lib/add');\n\n"
        "test('sums a list', () => {\n  expect(sum([1, 2, 3])).toBe(6);\n});\n\n"
        "test('adds two', () => {\n  expect(add(2, 3)).toBe(5);\n});\n"
    )
    return root


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_node_path_project_builds_loads_and_replays(tmp_path, image, monkeypatch):
    monkeypatch.setenv("ETAI_CACHE", str(tmp_path / "cache"))
    project, out = _project(tmp_path / "np"), tmp_path / "suite"
    argv = ["suite", "build", str(project), "--out", str(out), "--src", "lib", "--max", "2"]
    argv += ["--runs", "1", "--env", "NODE_PATH=./", "--no-progress"]
    assert main(argv) == 0  # its baseline ran green: Jest resolved lib/sum through modulePaths
    suite = load_suite(out)  # no NODE_PATH in the suite's env: it would be refused here
    assert "NODE_PATH" not in dict(suite.sandbox.env) and len(suite.sessions) >= 1
    assert json.loads((out / "base" / "package.json").read_text())["jest"] == {
        "modulePaths": ["<rootDir>"]
    }
    assert json.loads((project / "package.json").read_text()).get("jest") is None  # read only
    summary = run(str(out), ["oracle", "noop"], out=tmp_path / "run", progress=False)
    k = summary["k"]
    assert summary["agents"]["oracle"]["path_accuracy"][k] == 1.0
    assert summary["agents"]["oracle"]["reference_broken"] == []
    assert summary["agents"]["noop"]["path_accuracy"][k] == 0.0


def _git(root: Path, *args: str) -> None:
    import subprocess

    env = {"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@example.org", "GIT_COMMITTER_NAME": "a",
           "GIT_COMMITTER_EMAIL": "a@example.org", "PATH": "/usr/bin:/bin"}  # fmt: skip
    subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_node_path_history_is_mined_and_replays(tmp_path, image, monkeypatch):
    monkeypatch.setenv("ETAI_CACHE", str(tmp_path / "cache"))
    repo = _project(tmp_path / "np")
    add = repo / "lib" / "add.js"
    add.write_text(add.read_text().replace("a + b", "a - b"))  # the bug, and a test that misses it
    test = repo / "test" / "sum.test.js"
    test.write_text(test.read_text().split("\ntest('sums")[0] + "\ntest('loads', () => {});\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "sum and add")
    add.write_text(add.read_text().replace("a - b", "a + b"))  # the fix, with the tests that see it
    _project(tmp_path / "fixed")
    test.write_text((tmp_path / "fixed" / "test" / "sum.test.js").read_text())
    _git(repo, "commit", "-qam", "fix: add adds")
    # A later commit whose new test uses an API Jest 29 no longer has: skipped, and counted so.
    (repo / "lib" / "sum.js").write_text(
        "// Sums with add.\n" + (repo / "lib" / "sum.js").read_text()
    )
    (repo / "test" / "old.test.js").write_text(
        "const add = require.requireActual('lib/add');\n\ntest('old', () => {\n"
        "  expect(add(1, 1)).toBe(2);\n});\n"
    )
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "sum: a comment and an old-style test")
    out = tmp_path / "mined"
    argv = ["suite", "mine", str(repo), "--out", str(out), "--range", "HEAD~2..HEAD"]
    argv += ["--src", "lib", "--runs", "1", "--env", "NODE_PATH=./", "--no-progress"]
    assert main(argv) == 0
    suite = load_suite(out)
    (s,) = suite.sessions
    assert "NODE_PATH" not in dict(suite.sandbox.env)
    assert json.loads((s.workspace / "package.json").read_text())["jest"] == {
        "modulePaths": ["<rootDir>"]
    }
    failing = s.execution_trace[0].execution_result["failed_tests"]
    # Failing on the bug (one of the two is held out), not on a module Jest could not find.
    assert failing and {f["name"] for f in failing} <= {"sums a list", "adds two"}
    assert not any("Cannot find module" in f["message"] for f in failing)
    mined = json.loads((out / "summary.json").read_text())
    assert mined["kept"] == 1 and mined["skipped"] == {"nothing_passes_at_commit": 1}, mined
    (old,) = [x for x in map(json.loads, (out / "commits.jsonl").read_text().splitlines())
              if x["verdict"] == "nothing_passes_at_commit"]  # fmt: skip
    assert "requireActual is not a function" in old["why"]  # what Jest said, not its heading
    summary = run(str(out), ["oracle", "noop"], out=tmp_path / "run", progress=False)
    k = summary["k"]
    assert summary["agents"]["oracle"]["path_accuracy"][k] == 1.0
    assert summary["agents"]["noop"]["path_accuracy"][k] == 0.0
