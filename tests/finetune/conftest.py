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
    from harness.etai_format import render_training_example

    tok = train_tiny_tokenizer([render_training_example(s)[0] for s in sessions], vocab_size=400)
    add_etai_tokens(tok)
    return tok


@pytest.fixture
def tiny_overrides():
    """overrides(folder, **extra): point tiny-cpu at the fixtures and a private run folder."""

    def overrides(folder: Path, **extra: object) -> list[str]:
        values = {
            "data.sessions": str(SESSIONS_PATH),
            "data.mds_dir": str(folder / "mds"),
            "train.save_folder": str(folder / "ckpt"),
            "train.log_file": str(folder / "log.txt"),
            **{k.replace("__", "."): v for k, v in extra.items()},
        }
        return [f"{k}={v}" for k, v in values.items()]

    return overrides
