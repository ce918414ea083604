"""Held-out evaluation (#17): the bundled suite's documented split, the build's refusal to
evaluate on training sessions (exit 2, naming the key), and agent-8xa100 holding out two real
projects (#34) on stand-ins of their suites. No training runs here: the trainer's steps are called."""

from __future__ import annotations

from pathlib import Path

import pytest

from finetune.config import load_config
from finetune.errors import ConfigError
from finetune.split import load_split
from finetune.train import main
from finetune.trainers import SFTTrainer
from harness.suites.load import load_suite

pytestmark = pytest.mark.train
PROJECT = Path(__file__).resolve().parents[2]
TINY_CONFIG = PROJECT / "finetune" / "configs" / "tiny-cpu.yaml"
A100_CONFIG = PROJECT / "finetune" / "configs" / "agent-8xa100.yaml"
SPLIT = PROJECT / "finetune" / "splits" / "jest-bugfix.yaml"
SUITE_SESSIONS = PROJECT / "suites" / "jest-bugfix" / "sessions.jsonl"


def test_bundled_split_partitions_the_suite_and_eval_intents_are_trained():
    split = load_split(SPLIT)
    suite = {s.session_id: s.intent for s in load_suite("jest-bugfix").sessions}
    assert not set(split.train) & set(split.eval)
    assert sorted(split.train + split.eval) == sorted(suite)
    assert {suite[i] for i in split.eval} <= {suite[i] for i in split.train}


def _args(tmp_path, *sets):
    base = [
        f"data.sessions={SUITE_SESSIONS}",
        "data.format=memory",
        f"train.save_folder={tmp_path / 'ckpt'}",
        f"train.log_file={tmp_path / 'log.txt'}",
    ]
    return [str(TINY_CONFIG), *(x for o in [*base, *sets] for x in ("--set", o))]


def test_evaluating_training_sessions_is_refused_at_the_cli(tmp_path, capsys):
    spec = "callbacks.harness_eval={interval: 1ba, sessions: [checkout-missing-await]}"
    assert main(_args(tmp_path, spec)) == 2
    err = capsys.readouterr().err
    assert "callbacks.harness_eval.sessions" in err and "checkout-missing-await" in err
    assert "allow_overlap" in err and not (tmp_path / "ckpt").exists()


def test_the_whole_suite_as_eval_overlaps_too(tmp_path):
    cfg = load_config(TINY_CONFIG, _args(tmp_path, "callbacks.harness_eval={interval: 1ba}")[2::2])
    trainer = SFTTrainer(cfg)
    from finetune.split import check_held_out

    with pytest.raises(ConfigError, match="14 evaluated session.*through data.sessions"):
        check_held_out(trainer.trained_ids(trainer.sessions()), trainer.callbacks())


def test_split_trains_on_train_ids_and_evaluates_the_held_out_ones(tmp_path):
    from finetune.split import check_held_out

    sets = [f"data.split={SPLIT}", "callbacks.harness_eval={interval: 1ba}"]
    cfg = load_config(TINY_CONFIG, _args(tmp_path, *sets)[2::2])
    trainer = SFTTrainer(cfg)
    sessions, [callback] = trainer.sessions(), trainer.callbacks()
    split = load_split(SPLIT)
    assert [s["session_id"] for s in sessions] == [
        i for i in [s.session_id for s in load_suite("jest-bugfix").sessions] if i in split.train
    ]
    assert callback.session_ids == split.eval
    check_held_out(trainer.trained_ids(sessions), [callback])  # no overlap: no error


def test_allow_overlap_measures_memorisation_on_purpose(tmp_path):
    from finetune.split import check_held_out

    spec = "callbacks.harness_eval={interval: 1ba, sessions: [checkout-missing-await], allow_overlap: true}"
    trainer = SFTTrainer(load_config(TINY_CONFIG, _args(tmp_path, spec)[2::2]))
    check_held_out(trainer.trained_ids(trainer.sessions()), trainer.callbacks())


def test_split_naming_a_session_the_data_lacks_is_a_config_error(tmp_path):
    sets = [
        f"data.split={SPLIT}",
        f"data.sessions={PROJECT / 'tests/finetune/fixtures/sessions.jsonl'}",
    ]
    trainer = SFTTrainer(load_config(TINY_CONFIG, _args(tmp_path, *sets)[2::2]))
    with pytest.raises(ConfigError, match="data.split: train ids not in data.sessions"):
        trainer.sessions()


def test_agent_8xa100_evaluates_the_two_held_out_projects(real_suites_stand_in):
    cfg = load_config(A100_CONFIG)
    trainer = SFTTrainer(cfg)
    from finetune.callbacks import HarnessEval
    from finetune.split import check_held_out, split_of

    [callback] = [c for c in trainer.callbacks() if isinstance(c, HarnessEval)]
    bundled = [s.session_id for s in load_suite("jest-bugfix").sessions]
    held = {f"{p}-{i}" for p in ("dinero", "redux") for i in bundled}
    assert set(callback.evaluated_ids()) == held and not callback.allow_overlap
    assert [s.name for s in callback.suites] == ["dinero", "redux"]
    sessions = trainer.sessions()
    projects = {s["session_id"].split("-")[0] for s in sessions}
    assert projects == {"dayjs", "luxon", "commander", "fastest"} and len(sessions) == 4 * 14
    check_held_out(trainer.trained_ids(sessions), [callback], split_of(cfg))
