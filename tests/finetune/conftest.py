"""Shared fixtures: the fixture sessions and a tiny tokenizer trained on them (nothing downloaded)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
SESSIONS_PATH = FIXTURES / "sessions.jsonl"
PROJECT = Path(__file__).resolve().parents[2]
TINY_CONFIG = PROJECT / "finetune" / "configs" / "tiny-cpu.yaml"


@pytest.fixture(scope="session")
def sessions() -> list[dict]:
    return [json.loads(line) for line in SESSIONS_PATH.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="session")
def tokenizer(sessions):
    from finetune.tokenizer import add_etai_tokens, train_tiny_tokenizer
    from harness.agents.etai_format import render_training_example

    tok = train_tiny_tokenizer([render_training_example(s)[0] for s in sessions], vocab_size=400)
    add_etai_tokens(tok)
    return tok


def _overrides(folder: Path, **extra: object) -> list[str]:
    values = {
        "data.sessions": str(SESSIONS_PATH),
        "data.mds_dir": str(folder / "mds"),
        "train.save_folder": str(folder / "ckpt"),
        "train.log_file": str(folder / "log.txt"),
        **{k.replace("__", "."): v for k, v in extra.items()},
    }
    return [f"{k}={v}" for k, v in values.items()]


@pytest.fixture
def tiny_overrides():
    """overrides(folder, **extra): point tiny-cpu at the fixtures and a private run folder."""
    return _overrides


def _launch(tmp_path: Path, overrides: list[str], port: int):
    import os
    import subprocess
    import sys

    launcher = os.path.join(os.path.dirname(sys.executable), "composer")
    cmd = [
        launcher,
        "-n",
        "2",
        "--master_port",
        str(port),
        "--stdout",
        str(tmp_path / "out{rank}.txt"),
        "--stderr",
        str(tmp_path / "err{rank}.txt"),
        "-m",
        "finetune.train",
        str(TINY_CONFIG),
    ]
    cmd += [x for o in overrides for x in ("--set", o)]
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    proc = subprocess.run(
        cmd, check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


@pytest.fixture
def launch_two_ranks(free_port):
    """Run finetune.train with TINY_CONFIG in 2 processes (gloo) through Composer's own launcher.

    Returns a function (tmp_path, overrides) that asserts the launch succeeded.
    """
    return lambda tmp_path, overrides: _launch(tmp_path, overrides, free_port())


# HarnessEval in the shared two-rank run: two bundled sessions, one per rank, after every batch.
TWO_RANK_EVAL_SESSIONS = ["profile-display-name-null", "paginate-page-size-off-by-one"]
TWO_RANK_EVAL = (
    f"{{interval: 1ba, suite: jest-bugfix, sessions: [{', '.join(TWO_RANK_EVAL_SESSIONS)}], "
    "k: 2, max_steps: 2, workers: 2, budget_s: 120, generation: {max_new_tokens: 24}}"
)


@pytest.fixture(scope="session")
def two_rank_run(tmp_path_factory, free_port) -> Path:
    """One two-process gloo launch (Composer's launcher) that two tests read, each once a launch of
    its own (about 20 s each in make test): tiny-cpu from MDS shards for 2 epochs (8 sessions, batch
    4 per rank: one batch an epoch), a checkpoint each epoch, HarnessEval after each batch.
    tests/finetune/test_ft_train.py checks the training, test_ft_callbacks.py the evaluation."""
    folder = tmp_path_factory.mktemp("two-ranks")
    overrides = _overrides(
        folder,
        train__max_duration="2ep",
        train__save_interval="1ep",
        callbacks__harness_eval=TWO_RANK_EVAL,
    )
    _launch(folder, overrides, free_port())
    return folder


REAL_PROJECTS = ("dayjs", "luxon", "commander", "fastest-validator", "dinero", "redux")


@pytest.fixture
def real_suites_stand_in(tmp_path, monkeypatch):
    """The working directory holds ``runs/real-suites/<project>/`` for the six projects of
    finetune/splits/real-projects.yaml: the bundled suite, each session id prefixed with the
    project's name as the builder names them (the real ones take `make train-set`: hours).
    agent-8xa100's relative paths resolve against the working directory first."""
    import shutil

    bundled = PROJECT / "suites" / "jest-bugfix"
    for project in REAL_PROJECTS:
        suite = tmp_path / "runs" / "real-suites" / project
        shutil.copytree(bundled, suite)
        meta = suite / "suite.yaml"
        meta.write_text(meta.read_text().replace("name: jest-bugfix", f"name: {project}", 1))
        lines = []
        for line in (bundled / "sessions.jsonl").read_text().splitlines():
            record = json.loads(line)
            record["session_id"] = f"{project}-{record['session_id']}"
            lines.append(json.dumps(record))
        (suite / "sessions.jsonl").write_text("\n".join(lines) + "\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path
