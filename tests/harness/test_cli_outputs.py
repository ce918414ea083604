"""The output paths of `etai gate` and `etai report`, checked when the CLI dispatches them: a folder
for a file, a file for the folder, a place that cannot be written is exit 2 before any work (no
traceback after the runs were loaded, nothing written), through the real CLI on a real run."""

from __future__ import annotations

import os

import pytest

from harness.cli import main

ONE = "retry-default-attempts"


@pytest.fixture(scope="module")
def a_run(tmp_path_factory):
    """A real run folder of one session (noop), for the commands to have something to load."""
    out = tmp_path_factory.mktemp("runs") / "noop"
    argv = ["run", "--suite", "jest-bugfix", "--agent", "noop", "--session", ONE, "--out", str(out)]
    assert main([*argv, "--no-progress", "--workers", "1"]) == 0
    return out


def _cases(tmp_path, tmpfs):
    folder, file = tmp_path / "a-folder", tmp_path / "a-file"
    folder.mkdir()
    file.write_text("keep me\n")
    ro = tmpfs(tmp_path / "ro", ro=True)
    return {
        "folder": (folder, "is a folder; name a file"),
        "under-a-file": (file / "gate.xml", f"{file} is a file, not a folder"),
        "read-only": (ro / "sub" / "gate.xml", f"{ro} cannot be written"),
    }


@pytest.mark.docker
@pytest.mark.parametrize("flag", ["--junit", "--markdown", "--json"])
@pytest.mark.parametrize("case", ["folder", "under-a-file", "read-only"])
def test_gate_outputs_that_cannot_be_written_exit_2_before_any_work(
    a_run, tmp_path, tmpfs, capsys, flag, case
):
    target, problem = _cases(tmp_path, tmpfs)[case]
    rc = main(["gate", str(a_run), "--rule", "pass@1>=0", flag, str(target)])
    out, err = capsys.readouterr()
    assert rc == 2 and f"etai: error: {flag}: {target}: {problem}" in err, err
    assert out == "", "refused before the gate ran"
    assert (tmp_path / "a-file").read_text() == "keep me\n"
    assert os.listdir(tmp_path / "a-folder") == [] and os.listdir(tmp_path / "ro") == []


@pytest.mark.docker
def test_report_out_that_is_a_file_or_cannot_be_written_exits_2(a_run, tmp_path, tmpfs, capsys):
    cases = _cases(tmp_path, tmpfs)
    file = tmp_path / "a-file"
    for target, problem in [
        (file, "is a file; name a folder"),
        (file / "report", f"{file} is a file, not a folder"),
        (cases["read-only"][0].parent, f"{tmp_path / 'ro'} cannot be written"),
    ]:
        assert main(["report", str(a_run), "--out", str(target)]) == 2
        out, err = capsys.readouterr()
        assert f"etai: error: --out: {target}: {problem}" in err and out == "", err
    assert file.read_text() == "keep me\n" and os.listdir(tmp_path / "ro") == []
    # A folder that does not exist yet is made by the report, as before.
    assert main(["report", str(a_run), "--out", str(tmp_path / "new" / "report")]) == 0


@pytest.mark.docker
@pytest.mark.parametrize("case", ["folder", "under-a-file", "read-only"])
def test_view_out_that_cannot_be_written_exits_2_before_any_work(
    a_run, tmp_path, tmpfs, capsys, case
):
    target, problem = _cases(tmp_path, tmpfs)[case]
    assert main(["view", str(a_run), "--out", str(target)]) == 2
    out, err = capsys.readouterr()
    assert f"etai: error: --out: {target}: {problem}" in err and out == "", err
    assert (tmp_path / "a-file").read_text() == "keep me\n"
    assert os.listdir(tmp_path / "a-folder") == [] and os.listdir(tmp_path / "ro") == []
