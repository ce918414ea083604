"""The harness inside training: HarnessEval on a real Composer Trainer (tiny-cpu), its failure
path, config-time validation, and the hf:FOLDER export loaded back by the harness."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from finetune.config import load_config
from finetune.errors import ConfigError
from finetune.train import EXIT_BAD_INPUT, main, train
from finetune.trainers import build_trainer

TINY_CONFIG = Path(__file__).resolve().parents[2] / "finetune" / "configs" / "tiny-cpu.yaml"

pytestmark = pytest.mark.train

SUITE = "jest-bugfix"
TWO = ["profile-display-name-null", "paginate-page-size-off-by-one"]
EVAL = (
    f"{{interval: 2ba, suite: {SUITE}, sessions: [{', '.join(TWO)}], k: 2, max_steps: 2, "
    "workers: 2, budget_s: 120, generation: {max_new_tokens: 24}}"
)


def _quick(folder, tiny_overrides, **extra):
    """tiny-cpu for 4 batches (8 fixture sessions, batch 4: 2 per epoch), in memory, no checkpoints."""
    return tiny_overrides(
        folder,
        data__format="memory",
        train__max_duration="4ba",
        train__save_interval="100ep",
        train__autoresume="false",
        **extra,
    )


def _logged(trainer, key):
    from composer.loggers import InMemoryLogger

    memory = next(d for d in trainer.logger.destinations if isinstance(d, InMemoryLogger))
    return [(int(ts.batch), float(v)) for ts, v in memory.data.get(key, [])]


@pytest.mark.docker
@pytest.mark.slow
def test_harness_eval_logs_metrics_at_the_interval_and_writes_results(tmp_path, tiny_overrides):
    trainer = train(TINY_CONFIG, _quick(tmp_path, tiny_overrides, callbacks__harness_eval=EVAL))
    assert int(trainer.state.timestamp.batch) == 4
    assert trainer.state.model.training  # train mode restored after each evaluation
    for key in (
        "harness/path_accuracy@1",
        "harness/path_accuracy@2",
        "harness/pass@1",
        "harness/steps_to_green",
        "harness/invalid_actions",
        "harness/infra_errors",
        "harness/eval_seconds",
        "harness/error",
    ):
        assert [b for b, _ in _logged(trainer, key)] == [2, 4], key  # not again at FIT_END
    assert [v for _, v in _logged(trainer, "harness/error")] == [0.0, 0.0]
    assert [v for _, v in _logged(trainer, "harness/infra_errors")] == [0.0, 0.0]
    for batch in (2, 4):
        out = tmp_path / "ckpt" / "harness-eval" / f"ba{batch}"
        rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
        assert sorted(r["session_id"] for r in rows) == sorted(TWO)
        assert {r["agent"] for r in rows} == {f"hfmem:tiny-cpu-ba{batch}"}
        summary = json.loads((out / "summary.json").read_text())
        pa = summary["agents"][f"hfmem:tiny-cpu-ba{batch}"]["path_accuracy"]["1"]
        logged = dict(_logged(trainer, "harness/path_accuracy@1"))[batch]
        assert (pa is None and math.isnan(logged)) or pa == logged
    print("eval seconds:", _logged(trainer, "harness/eval_seconds"))


def test_harness_eval_failure_is_a_metric_and_training_finishes(
    tmp_path, tiny_overrides, monkeypatch
):
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:9")  # nothing answers: ensure_image fails
    trainer = train(TINY_CONFIG, _quick(tmp_path, tiny_overrides, callbacks__harness_eval=EVAL))
    assert int(trainer.state.timestamp.batch) == 4
    assert _logged(trainer, "harness/error") == [(2, 1.0), (4, 1.0)]
    assert [b for b, _ in _logged(trainer, "harness/eval_seconds")] == [2, 4]
    assert _logged(trainer, "harness/pass@1") == []
    assert _logged(trainer, "loss/train/total")  # training itself went on


@pytest.mark.parametrize(
    "spec, key",
    [
        ("{suite: no/such/suite}", "callbacks.harness_eval.suite"),
        ("{sessions: [no-such-session]}", "callbacks.harness_eval.sessions"),
        ("{sessions: []}", "callbacks.harness_eval.sessions"),
        ("{interval: 200}", "callbacks.harness_eval.interval"),
        ("{interval: 2 batches}", "callbacks.harness_eval.interval"),
        ("{generation: {temperature: -1}}", "callbacks.harness_eval.generation"),
        ("{generation: {beams: 4}}", "callbacks.harness_eval.generation"),
        ("{intervl: 2ba}", "callbacks.harness_eval"),
    ],
)
def test_bad_harness_eval_config_fails_at_config_time(tmp_path, tiny_overrides, spec, key):
    cfg = load_config(TINY_CONFIG, _quick(tmp_path, tiny_overrides, callbacks__harness_eval=spec))
    with pytest.raises(ConfigError) as err:
        build_trainer(cfg)
    assert err.value.key == key
    assert not (tmp_path / "mds").exists()  # nothing was built before the check


def test_cli_exits_2_on_a_missing_suite(tmp_path, tiny_overrides, capsys):
    args = _quick(tmp_path, tiny_overrides, callbacks__harness_eval="{suite: no/such/suite}")
    assert main([str(TINY_CONFIG), *[a for o in args for a in ("--set", o)]]) == EXIT_BAD_INPUT
    assert "callbacks.harness_eval.suite" in capsys.readouterr().err


def _export_and_check(tmp_path, tiny_overrides):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from finetune.export import HEADS_FILE
    from harness.agents._model_chat import ETAI_CHAT_TEMPLATE

    folder = tmp_path / "export"
    trainer = train(TINY_CONFIG, _quick(tmp_path, tiny_overrides, export__folder=str(folder)))
    live = trainer.state.model
    assert json.loads((folder / "etai.json").read_text())["max_result_chars"] == 400
    assert (folder / HEADS_FILE).is_file() and not (folder / "export.partial").exists()
    tok = AutoTokenizer.from_pretrained(str(folder))
    assert tok.chat_template == ETAI_CHAT_TEMPLATE and live.tokenizer.chat_template is None
    loaded = AutoModelForCausalLM.from_pretrained(str(folder)).eval()
    ids = torch.tensor([tok("<TRACE_START>fix the test")["input_ids"]])
    live.eval()
    with torch.no_grad():
        assert torch.allclose(loaded(ids).logits, live.lm(ids).logits, atol=1e-5)
    from safetensors.torch import load_file

    heads = load_file(str(folder / HEADS_FILE))
    assert torch.equal(heads["tool_bias"], live.tool_bias)
    assert "intent_head.0.weight" in heads and not any(k.startswith("lm.") for k in heads)
    return folder


def test_export_writes_a_folder_transformers_loads(tmp_path, tiny_overrides):
    _export_and_check(tmp_path, tiny_overrides)


@pytest.mark.docker
@pytest.mark.slow
def test_exported_folder_runs_through_the_harness(tmp_path, tiny_overrides):
    import harness

    folder = _export_and_check(tmp_path, tiny_overrides)
    summary = harness.run(
        SUITE,
        [f"hf:{folder}"],
        k=2,
        max_steps=2,
        workers=2,
        out=tmp_path / "run",
        options={"max_new_tokens": 24, "device": "cpu"},
        progress=False,
        session_ids=TWO,
    )
    rows = [
        json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()
    ]
    assert sorted(r["session_id"] for r in rows) == sorted(TWO)
    assert summary["complete"] and summary["agents"][f"hf:{folder}"]["n_rows"] == 2


@pytest.mark.docker
def test_spent_budget_skips_every_session_not_a_hang(tmp_path, tiny_overrides):
    spent = EVAL.replace("budget_s: 120", "budget_s: 0.001")
    overrides = _quick(tmp_path, tiny_overrides, callbacks__harness_eval=spent)
    trainer = train(TINY_CONFIG, [*overrides, "train.max_duration=2ba"])
    assert _logged(trainer, "harness/skipped_budget") == [(2, 2.0)]  # neither episode started
    assert _logged(trainer, "harness/complete") == [(2, 0.0)]
    assert _logged(trainer, "harness/error") == [(2, 0.0)]  # the harness ran; the budget cut it


def test_live_model_is_an_agent_spec_only_inside_its_block(tokenizer):
    from finetune.lm import build_tiny
    from harness.agents import AgentContext, from_spec
    from harness.agents.hf import live_model
    from harness.base.errors import InputError
    from harness.suites.load import load_suite

    lm = build_tiny({"arch": "gpt2", "layers": 1, "heads": 2, "hidden": 32}, len(tokenizer), 256)
    ctx = AgentContext(load_suite(SUITE), {"max_new_tokens": 4})
    with live_model("t", lm, tokenizer, fingerprint="f1", max_result_chars=123) as spec:
        agent = from_spec(spec, ctx)
        try:
            assert (agent.spec, agent.fingerprint, agent.gen.max_result_chars) == (
                "hfmem:t",
                "f1",
                123,
            )
            assert agent.model is lm and agent.gen.max_new_tokens == 4
        finally:
            agent.close()
    with pytest.raises(InputError, match="hfmem:t"):
        from_spec("hfmem:t", ctx)


@pytest.mark.docker
@pytest.mark.slow
def test_two_ranks_share_the_eval_and_both_log_the_broadcast_metrics(two_rank_run):
    # conftest.py's two-rank run: 8 sessions, batch 4 per rank, 2 ranks: one batch per epoch, 2
    # epochs, HarnessEval every batch on two sessions
    run = two_rank_run
    for batch in (1, 2):
        rows = (run / "ckpt" / "harness-eval" / f"ba{batch}" / "results.jsonl").read_text()
        assert len(rows.splitlines()) == 2  # one evaluation per interval, merged by rank 0
        for rank in (0, 1):  # no FSDP: each rank evaluated its half of the sessions
            shard = run / "ckpt" / "harness-eval" / f"ba{batch}" / f"rank{rank}"
            assert len((shard / "results.jsonl").read_text().splitlines()) == 1
    assert not (run / "ckpt" / "harness-eval" / "ba3").exists()
    rank1 = (run / "err1.txt").read_text() + (run / "out1.txt").read_text()
    assert "harness/path_accuracy@1" in rank1 and "harness/error: 0" in rank1
