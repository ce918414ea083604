"""scripts/eval_share.py with its default, relative ``--out`` (#34): a run's log is read where
its child process wrote it. Only the no-evaluation mode runs (one tiny-cpu batch, no Docker);
before the fix it ended in FileNotFoundError, the log written one folder deeper."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.train
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "eval_share.py"


@pytest.mark.slow
def test_the_default_relative_out_finds_the_childs_log(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("eval_share", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    monkeypatch.chdir(tmp_path)
    args = script.parse(["--batches", "1"])
    assert not Path(args.out).is_absolute()  # the default a new user gets
    run = script._run("none", 1, args)
    folder = tmp_path / args.out / "none-1"
    assert (folder / "log0.txt").is_file() and (folder / "ckpt").is_dir()
    assert run["wall"] > 0 and run["logged"] == {}  # no evaluation: no harness metric
    assert not (folder / args.out).exists()  # nothing joined twice
