"""``etai improve`` end to end: a tiny model, two sessions, real Docker sandboxes, two iterations
(SFT, then collect -> RFT -> evaluate); and the RFT trainer on a run folder's green rows."""

from __future__ import annotations

import json

import pytest

from finetune.errors import ConfigError
from finetune.improve import improve, load_improve_config, split_metrics
from finetune.rollouts import check_prompts, read_run

from .conftest import TINY_CONFIG

pytestmark = pytest.mark.train
TRAIN = ["duration-seconds-padding"]  # the shortest sessions: this runs in make test
HELDOUT = ["retry-default-attempts"]
TINY = [
    "data.format=memory",
    "train.max_duration=2ep",
    "data.max_seq_len=768",
    "algorithms.loss_weight_schedule=false",
    "loss.name=causal_lm",
    "algorithms.tool_failure_mask=false",
]


def _config(tmp_path, **extra):
    raw = {
        "suite": "jest-bugfix",
        "out": str(tmp_path / "improve"),
        "train_sessions": TRAIN,
        "heldout_sessions": HELDOUT,
        "iterations": 1,
        "sft": {"config": str(TINY_CONFIG), "set": TINY},
        # The tiny model reaches no green here: the reference traces keep RFT's data non-empty.
        "rft": {"set": ["trainer.with_sessions=true", "train.max_duration=1ep"]},
        "collect": {"samples": 2, "temperature": 1.0, "max_new_tokens": 24, "device": "cpu"},
        "evaluate": {"max_new_tokens": 24, "device": "cpu"},
        "k": 2,
        "max_steps": 2,
        "workers": 2,
        **extra,
    }
    path = tmp_path / "improve.yaml"
    path.write_text(json.dumps(raw))
    return path


@pytest.mark.docker
@pytest.mark.slow
def test_two_iterations_end_to_end_and_resume(tmp_path, image):
    cfg = load_improve_config(_config(tmp_path))
    lines: list[str] = []
    records = improve(cfg, log=lines.append)
    out = cfg.out
    assert [r["iteration"] for r in records] == [0, 1]
    for r in records:
        assert r["train"]["n"] == 1 and r["heldout"]["n"] == 1
        assert set(r["train"]["path_accuracy"]) == {"1", "2"}
        assert 0.0 <= r["train"]["invalid_action_rate"] <= 1.0
    # the rollouts are a data set: every prompt the hf agent was given re-renders to its bytes
    collected = read_run(out / "iter-1" / "collect")
    assert len(collected) == 2 and all(r["agent_fingerprint"] for r in collected)
    assert sum(check_prompts(r) for r in collected) >= 2
    assert (out / "iter-1" / "hf" / "config.json").is_file()
    history = [json.loads(x) for x in (out / "iterations.jsonl").read_text().splitlines()]
    assert [h["iteration"] for h in history] == [0, 1]
    assert any("RFT" in line for line in lines)
    # resumed: nothing is trained or run again
    again: list[str] = []
    assert improve(cfg, log=again.append) == records
    assert all("done already" in line for line in again)


def test_rft_trains_on_the_green_rows_of_a_run_folder(tmp_path, tiny_overrides):
    from finetune.train import train

    from .test_ft_rollouts import EDIT, READ, _row

    rows = [
        _row("s1", 0, [READ, EDIT], "passed", green_at=2, final="fixed"),
        _row("s1", 1, [READ], "failed"),
        _row("s2", 0, [EDIT], "tampered", tamper=["jest config"]),
    ]
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    overrides = tiny_overrides(
        tmp_path,
        trainer__type="rft",
        data__rollouts=str(run),
        data__format="memory",
        train__max_duration="1ep",
        train__save_folder="",
        train__autoresume=False,
    )
    trainer = train(TINY_CONFIG, overrides)
    assert len(trainer.state.dataloader.dataset) == 1  # the one verified-green rollout
    rows[0]["observation_texts"][0][1] = '{"stdout": "not what the agent saw"}'
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    from finetune.errors import DataError

    with pytest.raises(DataError, match="differs from the one the agent was given"):
        train(TINY_CONFIG, overrides)


def test_config_errors_name_the_key(tmp_path):
    with pytest.raises(ConfigError, match="heldout_sessions"):
        load_improve_config(_config(tmp_path, heldout_sessions=TRAIN))
    with pytest.raises(ConfigError, match="collect.temperature"):
        load_improve_config(_config(tmp_path, collect={"temperature": 0}))
    with pytest.raises(ConfigError, match="iteratons"):
        load_improve_config(_config(tmp_path, iteratons=2))
    with pytest.raises(ConfigError, match="sft.config"):
        load_improve_config(_config(tmp_path, sft={"config": "no/such.yaml"}))
    bad = load_improve_config(_config(tmp_path, train_sessions=["no-such-session"]))
    with pytest.raises(ConfigError, match="no-such-session"):
        improve(bad)


def test_split_metrics_by_hand():
    rows = [
        {"status": "passed", "steps_to_green": 1, "green": True, "steps_used": 2, "n_invalid": 0},
        {"status": "failed", "steps_to_green": None, "steps_used": 3, "n_invalid": 3},
        {"status": "infra_error", "steps_used": 1, "n_invalid": 1},  # in no denominator
    ]
    m = split_metrics(rows, k=2)
    assert m["n"] == 2 and m["path_accuracy"] == {"1": 0.5, "2": 0.5}
    assert m["invalid_action_rate"] == pytest.approx(3 / 5) and m["green"] == 0.5


def test_cli_exit_2_names_the_key(tmp_path, capsys):
    from harness.cli import main

    assert main(["improve", str(_config(tmp_path)), "--set", "iterations=-1"]) == 2
    assert "iterations" in capsys.readouterr().err
