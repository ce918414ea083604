"""harness/runs/executors without a cluster: what --executor refuses before anything runs (exit 2, the
run folder not made), and the folder that travels by value. The executors at work: the runner
tests (local) and test_executor_ray.py (a real two-node Ray cluster)."""

from __future__ import annotations

import pickle
import sys

import pytest

from harness.cli import main
from harness.runs.executors import EXECUTORS, ShippedFolder


def _refused(capsys, tmp_path, *args: str) -> str:
    out = tmp_path / "run"
    argv = ["run", "--suite", "jest-bugfix", "--agent", "noop", "--out", str(out), *args]
    assert main([*argv, "--no-progress"]) == 2
    assert not out.exists(), "nothing written"
    return capsys.readouterr().err


def test_the_built_in_executors_are_registered():
    assert EXECUTORS.names()[:2] == ("local", "ray")


def test_an_unknown_executor_is_refused_with_the_known_ones(capsys, tmp_path):
    err = _refused(capsys, tmp_path, "--executor", "slurm")
    assert "--executor" in err and "unknown executor 'slurm'" in err and "local, ray" in err


def test_the_local_executor_takes_no_address(capsys, tmp_path):
    assert "takes no address" in _refused(capsys, tmp_path, "--executor", "local:x")


def test_ray_without_the_extra_says_how_to_install_it(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    err = _refused(capsys, tmp_path, "--executor", "ray:127.0.0.1:1")
    assert "pip install 'etai[ray]'" in err and "--executor" in err


def test_ray_with_no_cluster_at_the_address_is_refused_at_once(capsys, tmp_path, free_port):
    port = free_port()  # nothing listens there
    err = _refused(capsys, tmp_path, "--executor", "ray", "--ray-address", f"127.0.0.1:{port}")
    assert f"no Ray cluster answers at '127.0.0.1:{port}'" in err


def test_ray_address_goes_only_with_the_ray_executor(capsys, tmp_path):
    err = _refused(capsys, tmp_path, "--ray-address", "127.0.0.1:6379")
    assert "--ray-address goes with --executor ray" in err


def test_a_kind_that_hands_out_no_jobs_runs_only_locally(capsys, tmp_path):
    out = tmp_path / "run"
    argv = ["run", "--suite", "humaneval", "--agent", "canonical", "--out", str(out)]
    assert main([*argv, "--executor", "ray", "--no-progress"]) == 2
    assert "suite kind 'humaneval' runs only on the local executor" in capsys.readouterr().err
    assert not out.exists()


def test_a_shipped_folder_arrives_whole_and_its_copy_is_removed(tmp_path):
    src = tmp_path / "suite"
    (src / "workspaces" / "a").mkdir(parents=True)
    (src / "sessions.jsonl").write_text("{}\n")
    (src / "workspaces" / "a" / "x.js").write_bytes(b"module.exports = 1;\n")
    arrived = pickle.loads(pickle.dumps(ShippedFolder(src)))
    there = arrived.path()
    assert there != src
    files = sorted(p.relative_to(there) for p in there.rglob("*") if p.is_file())
    assert [str(f) for f in files] == ["sessions.jsonl", "workspaces/a/x.js"]
    assert (there / "workspaces" / "a" / "x.js").read_bytes() == b"module.exports = 1;\n"
    arrived.remove()
    assert not there.exists() and src.exists(), "only the copy goes"


@pytest.mark.parametrize("spec", ["ray:", "ray"])
def test_ray_without_an_address_uses_ray_address_then_auto(spec, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    assert "no Ray cluster answers at '127.0.0.1:1'" in _refused(
        capsys, tmp_path, "--executor", spec
    )


def test_ray_is_imported_only_when_its_executor_opens():
    import subprocess

    code = (
        "import sys; from harness.runs.executors import EXECUTORS, parse; import harness.runs.session_kind; "
        "EXECUTORS.names(); parse('ray:127.0.0.1:1'); print('ray' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
