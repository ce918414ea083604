"""The dry run of a config's data pipeline (finetune/epoch.py): what one epoch is on N ranks,
checked by hand on agent-8xa100 as it stands (#34: the bundled suite makes it a smoke test) and
on a DPO config, and its refusals naming the key. No model is built."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from finetune.config import load_config
from finetune.epoch import epoch_of, main, table

pytestmark = pytest.mark.train
PROJECT = Path(__file__).resolve().parents[2]
A100 = PROJECT / "finetune" / "configs" / "agent-8xa100.yaml"
TINY = PROJECT / "finetune" / "configs" / "tiny-cpu.yaml"
# no hub here: a tiny tokenizer trained on the sessions stands in for starcoder2's
OFFLINE = ["model.pretrained=null", "model.tiny={arch: llama, layers: 1, heads: 1, hidden: 8}"]


def test_agent_8xa100_is_one_step_an_epoch_on_the_bundled_suite():
    epoch = epoch_of(load_config(A100, OFFLINE), ranks=8)
    # 10 training sessions (finetune/splits/jest-bugfix.yaml) on 8 ranks: 2 samples per rank,
    # 6 of the 16 repeated; one step of 16 samples, not 64; 12 epochs of one step.
    assert epoch.sources == {"data.sessions": 10} and epoch.examples == 10
    assert (epoch.duplicates, epoch.global_batch, epoch.steps_per_epoch) == (6, 16, 1)
    assert epoch.total_steps == 12
    assert epoch.warmup_steps == pytest.approx(0.03 * 12)  # t_warmup 0.03dur: a third of a step
    assert (epoch.eval_every_steps, epoch.evaluations) == (3, 4)  # interval 3ep
    assert epoch.tokens > 10 * 100 and epoch.truncated == 0
    assert "| steps per epoch | 1 |" in table(epoch)


def test_dpo_pairs_are_counted_with_both_sides(tmp_path):
    sets = [
        f"data.sessions={PROJECT / 'tests/finetune/fixtures/sessions.jsonl'}",
        "trainer.type=dpo",
        "loss.name=dpo",
        "train.batch_size=3",
        "train.max_duration=20ba",
        "scheduler.t_warmup=1ep",
    ]
    epoch = epoch_of(load_config(TINY, sets), ranks=2)
    assert list(epoch.sources) == ["data.pairs"]
    per_rank = math.ceil(epoch.examples / 2)
    assert epoch.steps_per_epoch == math.ceil(per_rank / 3) and epoch.total_steps == 20
    assert epoch.warmup_steps == epoch.steps_per_epoch
    assert epoch.eval_every_steps is None and epoch.evaluations == 0


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--ranks", "0"], "--ranks: must be at least 1"),
        (["--set", "scheduler.t_warmup=5x"], "scheduler.t_warmup: '5x' is not a Composer time"),
    ],
)
def test_refusals_name_the_key(capsys, extra, words):
    assert main([str(A100), *(x for o in OFFLINE for x in ("--set", o)), *extra]) == 2
    assert words in capsys.readouterr().err
