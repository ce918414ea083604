"""HarnessEval's asynchronous mode (#17) on a real Composer Trainer (tiny-cpu, CPU): at the
interval the checkpoint is exported and a real ``etai run --agent hf:FOLDER`` process evaluates
it (the ``local`` sandbox: Node on this machine, no Docker); training goes on while it runs, and
its metrics are logged at the step they arrive, with the batch the checkpoint is of as a field."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from composer import Callback
from composer.loggers import LoggerDestination

from finetune.callbacks import HarnessEval
from finetune.config import load_config
from finetune.errors import ConfigError
from finetune.trainers import build_trainer
from harness.runs.results import read_rows

pytestmark = pytest.mark.train
TINY_CONFIG = Path(__file__).resolve().parents[2] / "finetune" / "configs" / "tiny-cpu.yaml"
SESSION = "profile-display-name-null"


class Recorder(LoggerDestination):
    """Every log_metrics call as (step it is logged against, batch when it was logged, metrics)."""

    def __init__(self, state) -> None:
        self.state, self.calls = state, []

    def log_metrics(self, metrics, step=None) -> None:
        self.calls.append((step, int(self.state.timestamp.batch), dict(metrics)))

    def logged(self, key):
        return [(step, at, m[key]) for step, at, m in self.calls if key in m]


class HoldUntilEnded(Callback):
    """At batch 3: notes whether batch 2's evaluation is still running (training went on without
    it), then waits for it to end, so batch 4's check finds it ended, whatever the machine's load."""

    def __init__(self, evals: HarnessEval) -> None:
        self.evals, self.running_at_3 = evals, None

    def batch_end(self, state, logger) -> None:
        if int(state.timestamp.batch) != 3:
            return
        [pending] = self.evals._async.pending
        self.running_at_3 = not pending.done()
        deadline = time.monotonic() + 300
        while not pending.done() and time.monotonic() < deadline:
            time.sleep(0.2)


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("ETAI_LONG"),
    reason="about 1 min (two etai run processes): ETAI_LONG=1 runs it (make test-long)",
)
def test_async_eval_runs_beside_training_and_logs_its_batch_as_a_field(tmp_path, tiny_overrides):
    spec = (
        f"{{interval: 2ba, mode: async, sandbox: local, sessions: [{SESSION}], k: 1, "
        "max_steps: 1, workers: 1, allow_overlap: true, generation: {max_new_tokens: 8}}"
    )
    overrides = tiny_overrides(
        tmp_path,
        data__format="memory",
        train__max_duration="4ba",
        train__save_interval="100ep",
        train__autoresume="false",
        callbacks__harness_eval=spec,
    )
    trainer = build_trainer(load_config(TINY_CONFIG, overrides))
    [evals] = [cb for cb in trainer.state.callbacks if isinstance(cb, HarnessEval)]
    hold = HoldUntilEnded(evals)
    trainer.state.callbacks.append(hold)
    rec = Recorder(trainer.state)
    trainer.logger.destinations = (*trainer.logger.destinations, rec)
    try:
        trainer.fit()
    finally:
        trainer.close()
    root = tmp_path / "ckpt" / "harness-eval"
    assert hold.running_at_3  # batch 3 trained while batch 2's evaluation ran
    # The start costs training only the export, logged at the batch itself.
    assert [(s, a) for s, a, _ in rec.logged("harness/export_seconds")] == [(2, 2), (4, 4)]
    # Batch 2's metrics arrive at batch 4 (first batch end after it ended), logged at step 4
    # with the checkpoint's batch as a field; batch 4's at fit end, after the bounded wait.
    assert [(s, a) for s, a, _ in rec.logged("harness/path_accuracy@1")] == [(4, 4), (4, 4)]
    assert [v for _, _, v in rec.logged("harness/checkpoint_batch")] == [2.0, 4.0]
    assert [v for _, _, v in rec.logged("harness/error")] == [0.0, 0.0]
    assert all(v > 0 for _, _, v in rec.logged("harness/eval_seconds"))
    for batch in (2, 4):
        [row] = read_rows(root / f"ba{batch}" / "results.jsonl")
        # the exported checkpoint of that batch, removed once evaluated (keep_exports: false)
        assert row["agent"] == f"hf:{root / f'hf-ba{batch}'}" and row["session_id"] == SESSION
        assert row["status"] != "infra_error", row.get("reason")
        assert not (root / f"hf-ba{batch}").exists()
    assert evals._async.pending == []


def test_finished_metrics_are_logged_at_the_current_step_with_their_checkpoint():
    """What the long test above sees, without the processes: a real Composer Logger at batch 6
    given batch 2's and batch 4's finished evaluations."""
    import torch
    from composer.core import State, Timestamp
    from composer.devices import DeviceCPU
    from composer.loggers import Logger

    state = State(model=torch.nn.Linear(1, 1), rank_zero_seed=0, run_name="t", device=DeviceCPU())
    state.timestamp = Timestamp(batch=6)
    rec = Recorder(state)
    cb = HarnessEval(mode="async", sessions=[SESSION])
    finished = [(2, {"harness/pass@1": 0.5}), (4, {"harness/pass@1": 1.0})]
    cb._log_async(Logger(state, [rec]), finished)
    assert [(step, at) for step, at, _ in rec.calls] == [(6, 6), (6, 6)]
    assert [m for _, _, m in rec.calls] == [
        {"harness/pass@1": 0.5, "harness/checkpoint_batch": 2.0},
        {"harness/pass@1": 1.0, "harness/checkpoint_batch": 4.0},
    ]
    assert cb.last == rec.calls[-1][2]


def test_async_options_are_checked_when_the_trainer_is_built():
    with pytest.raises(ConfigError, match="async_command.*only with mode: async"):
        HarnessEval(async_command="etai run --agent hf:{folder}")
    with pytest.raises(ConfigError, match="mode.*sync or async"):
        HarnessEval(mode="later")
    with pytest.raises(ConfigError, match=r"async_command.*bad template.*'chekpoint'"):
        HarnessEval(mode="async", async_command="etai run --agent hf:{chekpoint}")
    cb = HarnessEval(
        mode="async",
        sessions=[SESSION],
        async_command="ssh gpu7 {etai} run --agent hf:{folder} --out {out} {sessions}",
    )
    from finetune.async_eval import render, values_of

    argv = render(cb.async_command, values_of(cb, folder=Path("/f"), out=Path("/o"), batch=6))
    assert argv[:2] == ["ssh", "gpu7"] and argv[3:] == [
        "run",
        "--agent",
        "hf:/f",
        "--out",
        "/o",
        "--session",
        SESSION,
    ]
