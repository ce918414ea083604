"""The dry run of a config's data pipeline (finetune/epoch.py): what one epoch is on N ranks,
checked by hand on agent-8xa100 (on stand-ins of its real-project suites, and on the built ones
when make train-set has run) and on a DPO config, and its refusals naming the key. No model is
built."""

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


def test_agent_8xa100_trains_on_four_projects_counted_by_hand(real_suites_stand_in):
    epoch = epoch_of(load_config(A100, OFFLINE), ranks=8)
    # Stand-ins of 14 sessions a project; four projects train (finetune/splits/real-projects.yaml):
    # 56 examples on 8 ranks, 7 a rank, one step of 56 samples an epoch; 4 epochs.
    assert epoch.sources == {"data.sessions": 56} and epoch.examples == 56
    assert (epoch.duplicates, epoch.global_batch, epoch.steps_per_epoch) == (0, 56, 1)
    assert epoch.total_steps == 4 and epoch.warmup_steps == 4  # t_warmup: 4ba
    assert (epoch.eval_every_steps, epoch.evaluations) == (2, 2)  # interval 2ep
    assert epoch.tokens > 56 * 100 and epoch.truncated == 0
    assert "| steps per epoch | 1 |" in table(epoch)


BUILT = PROJECT / "runs" / "real-suites"


@pytest.mark.slow
@pytest.mark.skipif(
    not all((BUILT / p / "sessions.jsonl").is_file() for p in ("dayjs", "luxon", "redux")),
    reason="the real-project suites are built by make train-set (hours): runs/real-suites/",
)
def test_agent_8xa100_on_the_built_suites_trains_on_at_least_300_sessions(monkeypatch):
    monkeypatch.chdir(PROJECT)
    epoch = epoch_of(load_config(A100, OFFLINE), ranks=8)
    assert epoch.sources["data.sessions"] >= 300 and epoch.global_batch == 64
    print(table(epoch))


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
def test_refusals_name_the_key(capsys, extra, words, real_suites_stand_in):
    assert main([str(A100), *(x for o in OFFLINE for x in ("--set", o)), *extra]) == 2
    assert words in capsys.readouterr().err
