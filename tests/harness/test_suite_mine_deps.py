"""`etai suite mine`'s dependencies (harness/authoring/mine/mine.py ``_deps``): a mine resumes only
with the dependencies its verdicts were reached with. Real git, real npm; the only sandbox call is
the prune of what a killed mine left (the commits here need no check)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harness.cli import main

sys.path.insert(0, str(Path(__file__).parent))  # the helper modules beside this file
from test_suite_mine_e2e import _git_project  # noqa: E402

pytestmark = [pytest.mark.docker]


def _deps(folder: Path, description: str) -> Path:
    folder.mkdir(parents=True)
    manifest = {"name": "p", "version": "1.0.0", "description": description}
    (folder / "package.json").write_text(json.dumps(manifest))
    lock = {"name": "p", "version": "1.0.0", "lockfileVersion": 3, "requires": True,
            "packages": {"": {"name": "p", "version": "1.0.0"}}}  # fmt: skip
    (folder / "package-lock.json").write_text(json.dumps(lock))
    return folder


def test_a_resume_with_other_dependencies_is_refused(tmp_path, monkeypatch, capsys):
    repo, commit = _git_project(tmp_path, monkeypatch)
    commit("add", {repo / "lib" / "a.js": "module.exports = 1;\n"})
    commit("docs", {repo / "README.md": "p\n"})  # not a candidate: a verdict without a sandbox
    out = tmp_path / "mined"
    argv = ["suite", "mine", str(repo), "--out", str(out), "--range", "HEAD~1..HEAD"]
    argv += ["--no-progress", "--src", "lib"]
    first = _deps(tmp_path / "deps1", "one")
    assert main([*argv, "--deps", str(first)]) == 1  # nothing kept, one verdict written
    rows = (out / "commits.jsonl").read_text()
    assert json.loads(rows)["verdict"] == "not_a_candidate"
    digest = json.loads((out / "summary.json").read_text()).get("deps_digest")
    capsys.readouterr()
    other = _deps(tmp_path / "deps2", "two")
    assert main([*argv, "--deps", str(other)]) == 2
    err = capsys.readouterr().err
    assert "--deps" in err and "other dependencies" in err and digest and digest in err, err
    # nothing half written: the verdicts and the dependencies they were reached with stay
    assert (out / "commits.jsonl").read_text() == rows
    assert (out / "deps" / "package.json").read_bytes() == (first / "package.json").read_bytes()
    assert not (out / ".deps-new").exists()
    assert main([*argv, "--deps", str(first)]) == 1  # the same dependencies resume
    assert (out / "commits.jsonl").read_text() == rows
