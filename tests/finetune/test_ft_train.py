"""End to end on CPU with a real Composer Trainer and a tiny GPT-2: the tiny-cpu config learns,
logs every loss component, resumes with the same schedule state, and runs under the launcher."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from finetune.config import load_config
from finetune.errors import ConfigError
from finetune.train import main, train
from finetune.trainers import TRAINERS, DPOTrainer, SFTTrainer, build_trainer

PROJECT = Path(__file__).resolve().parents[2]
TINY_CONFIG = PROJECT / "finetune" / "configs" / "tiny-cpu.yaml"

pytestmark = pytest.mark.train


def _fixed_set_losses(model, sessions):
    """Composite components of ``model`` on all fixture sessions, in eval mode, no grad."""
    from finetune.data import collate_examples, to_record
    from finetune.examples import build_example

    records = [to_record(build_example(s, model.tokenizer, 1024, 400)) for s in sessions]
    batch = collate_examples(records, pad_id=model.tokenizer.pad_token_id)
    was_training = model.training
    model.eval()
    with torch.no_grad():
        parts = model.loss_fn.components(model(batch), batch)
    model.train(was_training)
    return {k: v.item() for k, v in parts.items()}


def _series(trainer, key):
    from composer.loggers import InMemoryLogger

    memory = next(d for d in trainer.logger.destinations if isinstance(d, InMemoryLogger))
    return [float(v) for _, v in memory.data.get(key, [])]


@pytest.mark.slow
def test_tiny_cpu_learns_and_logs_every_component(tmp_path, sessions, tiny_overrides):
    cfg = load_config(TINY_CONFIG, tiny_overrides(tmp_path))
    assert cfg.get("data.format", str) == "mds"  # the shard path: MDSWriter -> StreamingDataset
    start = time.perf_counter()
    trainer = build_trainer(cfg)
    before = _fixed_set_losses(trainer.state.model, sessions)
    trainer.fit()
    trainer.close()
    wall = time.perf_counter() - start
    after = _fixed_set_losses(trainer.state.model, sessions)
    print(
        f"tiny-cpu: {wall:.1f}s wall; fixed-set code CE {before['code']:.3f} -> {after['code']:.3f}; "
        f"intent {before['intent']:.3f} -> {after['intent']:.3f}"
    )
    assert after["code"] < before["code"] - 1.0
    assert after["tool"] < before["tool"]
    for key in ("total", "code", "intent", "tool", "cursor", "reward"):
        assert _series(trainer, f"loss/train/{key}"), key
    assert _series(trainer, "loss_weights/code")[0] == pytest.approx(0.8)
    assert _series(trainer, "loss_weights/cursor")[-1] == pytest.approx(0.10)  # epoch 11 >= 3
    assert (tmp_path / "ckpt" / "latest-rank0.pt").exists()
    assert "loss/train/reward" in (tmp_path / "log.txt").read_text()


@pytest.mark.slow
def test_autoresume_continues_the_schedule_and_tool_statistics(tmp_path, tiny_overrides):
    common = {"data__format": "memory", "train__save_interval": "2ep"}
    first = train(TINY_CONFIG, tiny_overrides(tmp_path, train__max_duration="4ep", **common))
    algos = {type(a).__name__: a for a in first.state.algorithms}
    calls_after_4 = algos["ToolFailureMask"].calls.clone()
    assert int(first.state.timestamp.epoch) == 4
    second = train(TINY_CONFIG, tiny_overrides(tmp_path, train__max_duration="6ep", **common))
    assert int(second.state.timestamp.epoch) == 6
    assert int(second.state.timestamp.batch) == int(first.state.timestamp.batch) * 6 // 4
    epochs = [int(e) for e in _series(second, "time/epoch")]
    assert min(epochs) == 4  # resumed, not restarted
    # the schedule picks up at epoch 4 (code 0.8 - 0.02*4) and moves on to epoch 5 (intent drops)
    assert _series(second, "loss_weights/code")[:2] == pytest.approx([0.72, 0.70])
    assert _series(second, "loss_weights/intent")[:2] == pytest.approx([0.25, 0.15])
    resumed = {type(a).__name__: a for a in second.state.algorithms}
    assert resumed["LossWeightSchedule"].epoch == 5
    assert torch.allclose(
        resumed["ToolFailureMask"].calls, calls_after_4 * 6 / 4
    )  # counts were restored
    assert torch.allclose(second.state.model.tool_bias, resumed["ToolFailureMask"].bias())


@pytest.mark.slow
def test_dpo_trainer_with_cached_reference(tmp_path, tiny_overrides):
    overrides = tiny_overrides(
        tmp_path,
        trainer__type="dpo",
        loss__name="dpo",
        loss__beta=0.5,
        data__format="memory",
        train__max_duration="3ep",
        train__save_folder="",
        train__autoresume=False,
        algorithms__reference="{cache: true}",
        algorithms__loss_weight_schedule=False,
        data__max_seq_len=512,
    )
    trainer = train(TINY_CONFIG, overrides)
    margins = _series(trainer, "loss/train/reward_margin")
    assert margins[-1] > margins[0]
    ref = next(a for a in trainer.state.algorithms if type(a).__name__ == "ReferenceForward")
    n_pairs = len(trainer.state.dataloader.dataset)
    assert ref.computed_rows == n_pairs  # epochs 2 and 3 came from the cache
    assert not any("ref_lm" in k for k in trainer.state.model.state_dict())


@pytest.mark.slow
def test_kl_control_sft_run(tmp_path, tiny_overrides):
    overrides = tiny_overrides(
        tmp_path,
        loss__name="kl_control",
        loss__beta=0.5,
        data__format="memory",
        train__max_duration="2ep",
        train__save_folder="",
        train__autoresume=False,
        data__max_seq_len=512,
    )
    trainer = train(TINY_CONFIG, overrides + ["algorithms.loss_weight_schedule=false"])
    kl = _series(trainer, "loss/train/kl")
    assert kl[0] == pytest.approx(0.0, abs=1e-4)  # the policy starts as the reference
    assert kl[-1] > kl[0]


def test_trainer_registry_builtins_plugin_and_unknown(tmp_path, monkeypatch):
    assert TRAINERS.resolve("sft") is SFTTrainer and TRAINERS.resolve("dpo") is DPOTrainer
    (tmp_path / "my_trainers.py").write_text(
        "from finetune.trainers import SFTTrainer\nclass Quiet(SFTTrainer):\n    default_loss = 'causal_lm'\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert TRAINERS.resolve("my_trainers:Quiet").default_loss == "causal_lm"
    with pytest.raises(
        ConfigError, match="unknown trainer 'ppo'; known: dpo, rft, sft; or 'module:Class'"
    ):
        TRAINERS.resolve("ppo")


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("trainer.type=ppo", "trainer.type"),
        ("loss.name=focal", "loss.name"),
        ("loss.name=dpo", "loss.name"),  # needs trainer.type: dpo
        ("data.sessions=no/such.jsonl", "data.sessions"),
        ("data.format=parquet", "data.format"),
        ("algorithms.tool_failure_mask={max_bais: 1}", "algorithms.tool_failure_mask"),
    ],
)
def test_main_exit_2_names_the_key(tmp_path, tiny_overrides, capsys, override, key):
    args = (
        [str(TINY_CONFIG)]
        + [x for o in tiny_overrides(tmp_path) for x in ("--set", o)]
        + ["--set", override]
    )
    assert main(args) == 2
    assert f"config error: {key}:" in capsys.readouterr().err


@pytest.mark.docker  # the shared run evaluates in the sandbox too (test_ft_callbacks.py reads it)
@pytest.mark.slow
def test_two_process_gloo_run_through_composer_launcher(two_rank_run):
    run = two_rank_run  # tiny-cpu from MDS shards for 2 epochs, a checkpoint each (conftest.py)
    # 8 sessions, batch 4 per rank, 2 ranks: one batch per epoch (a single process would need two)
    assert (run / "ckpt" / "ep2-ba2-rank0.pt").exists()
    log = (run / "log.txt").read_text()
    assert "num_cpus_per_node: 2" in log
    assert "loss/train/total" in log and "loss/train/intent" in log
    assert "loss/train/total" in (run / "err1.txt").read_text()  # rank 1 trained too
