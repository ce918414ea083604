"""The reward head learns from rollout outcomes: every rollout of a run folder, its target the
episode's reward from the registry, scaled to [0, 1]; and a real Composer run on CPU that lowers
the head's loss on those rollouts and ranks green ones above failed ones."""

from __future__ import annotations

import json

import pytest
import torch

from finetune.config import load_config
from finetune.errors import ConfigError
from finetune.examples import IGNORE, MISSING
from finetune.outcomes import outcome_examples, outcome_target
from finetune.rewards import build_reward
from finetune.rollouts import read_run

from .conftest import SESSIONS_PATH, TINY_CONFIG
from .test_ft_rollouts import BAD_EDIT, EDIT, READ, RUN, _row

pytestmark = pytest.mark.train


def _training_rows():
    """Green and failed rollouts of three sessions, as the loop writes them (no green and failed
    one share a step before their last, so every step's target can be learned)."""
    rows = []
    for sid in ("s1", "s2", "s3"):
        rows += [
            _row(sid, 0, [EDIT], "passed", green_at=1),
            _row(sid, 1, [READ, EDIT], "passed", green_at=2),
            _row(sid, 2, [BAD_EDIT], "failed"),
            _row(sid, 3, [RUN, BAD_EDIT], "failed"),
        ]
    return rows


def _rows():
    """Those, and rollouts of every other kind: limits, tampering, special-casing, no signal, no
    step."""
    return _training_rows() + [
        _row("s4", 0, [READ, RUN, EDIT], "passed", green_at=3, invalid=(2,)),
        _row("s4", 1, [RUN], "timeout"),
        _row("s4", 2, [EDIT], "tampered", tamper=["jest config"]),
        _row("s4", 3, [EDIT], "infra_error"),  # the machinery failed: no signal
        _row("s4", 4, [], "failed", final="nothing to do"),  # no step: nothing to read at
        # green on the visible verification tests, red on the held-out ones (issue #30)
        {**_row("s4", 5, [EDIT], "failed"), "special_cased": True},
    ]


@pytest.mark.parametrize(
    ("spec", "reward_range"),
    [(None, (0.0, 1.0)), ({"step_penalty": 0.2, "failed": 0.1}, (-2.0, 1.0))],
)
def test_targets_come_from_the_reward_registry(tokenizer, spec, reward_range):
    reward, rows = build_reward(spec), _rows()
    examples = outcome_examples(rows, reward, tokenizer, 4096, 300, reward_range)
    kept = [r for r in rows if reward(r) is not None and r["observations"]]
    assert len(examples) == len(kept) == len(rows) - 2
    low, high = reward_range
    for row, ex in zip(kept, examples):
        want = min(max((reward(row) - low) / (high - low), 0.0), 1.0)
        assert outcome_target(row, reward, reward_range) == pytest.approx(want)
        # every step's <RESULT> carries the episode's target; nothing else is learned
        assert len(ex.reward_pos) == len(row["observations"])
        assert [tokenizer.convert_ids_to_tokens(ex.input_ids[p]) for p in ex.reward_pos] == [
            "<RESULT>"
        ] * len(ex.reward_pos)
        assert ex.reward_label == pytest.approx((want,) * len(ex.reward_pos))
        assert set(ex.labels) == {IGNORE} and set(ex.tool_label) <= {MISSING}
        assert ex.intent == ex.cursor_pos == ex.exit_label == MISSING
    by_status = {(r["session_id"], r["sample"]): t.reward_label[0] for r, t in zip(kept, examples)}
    if spec is None:  # the documented default: green by step, everything else 0
        assert by_status[("s1", 0)] == 1.0 and by_status[("s1", 1)] == pytest.approx(0.95)
        assert by_status[("s4", 0)] == pytest.approx(0.8)  # green at 3, one invalid step
        assert by_status[("s1", 2)] == by_status[("s4", 1)] == by_status[("s4", 2)] == 0.0
        assert by_status[("s4", 5)] == 0.0
    else:  # the wide range keeps the order of the bad outcomes
        assert by_status[("s4", 2)] == 0.0 < by_status[("s4", 1)] < by_status[("s1", 2)]
        # tampered < special-cased (-1.0: 1/3) < timeout < failed
        assert by_status[("s4", 2)] < by_status[("s4", 5)] < by_status[("s4", 1)]
        assert by_status[("s4", 5)] == pytest.approx(1 / 3)
    assert len({e.uid for e in examples}) == len(examples)  # one uid per rollout


def test_a_changed_row_is_refused(tokenizer):
    from finetune.errors import DataError

    row = _row("s1", 0, [READ, EDIT], "passed", green_at=2)
    row["observation_texts"][0][1] = '{"stdout": "not what the agent saw"}'
    with pytest.raises(DataError, match="differs from the one the agent was given"):
        outcome_examples([row], build_reward(None), tokenizer, 4096, 300)
    with pytest.raises(ConfigError, match="reward_range"):
        outcome_target(row, build_reward(None), (1.0, 1.0))


@pytest.mark.docker
@pytest.mark.slow
def test_targets_for_the_rows_of_a_real_run(bundled_oracle_noop, tokenizer):
    """`etai run --agent oracle --agent noop` on the bundled suite: every oracle rollout is green,
    its target 1 − 0.05·(j − 1) at each of its steps; noop rollouts have no step to learn at."""
    rows = read_run(bundled_oracle_noop.out)
    reward = build_reward(None)
    examples = outcome_examples(rows, reward, tokenizer, 8192, 400)
    oracle = [r for r in rows if r["agent"] == "oracle"]
    assert len(examples) == len(oracle) == 14
    for row, ex in zip(oracle, examples):
        assert row["status"] == "passed" and len(ex.reward_pos) == len(row["observations"])
        assert reward(row) == pytest.approx(1 - 0.05 * (row["steps_to_green"] - 1))
        assert ex.reward_label == pytest.approx((reward(row),) * len(ex.reward_pos))


def _outcome_batch(model, rows):
    from finetune.data import collate_examples, to_record

    examples = outcome_examples(rows, build_reward(None), model.tokenizer, 1024, 400)
    return collate_examples([to_record(e) for e in examples], model.tokenizer.pad_token_id)


def _reward_head(model, batch):
    """The composite's reward BCE on ``batch`` and the head's probability at each rollout's last
    step, in eval mode, no grad."""
    was_training = model.training
    model.eval()
    with torch.no_grad():
        out = model(batch)
        bce = model.loss_fn.components(out, batch)["reward"].item()
    model.train(was_training)
    last = (batch["reward_pos"] >= 0).sum(1) - 1
    probs = torch.sigmoid(out["reward_logits"]).gather(1, last.unsqueeze(1)).squeeze(1)
    return bce, probs


@pytest.mark.slow
def test_a_real_run_trains_the_reward_head_on_rollout_outcomes(tmp_path, tiny_overrides):
    from finetune.trainers import build_trainer

    rows = _training_rows()
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    # One reference session beside the rollouts, short sequences and the reward weighted fully:
    # the head, not the LM, is what this run is about (a few minutes on two busy cores otherwise).
    one = tmp_path / "one.jsonl"
    one.write_text(SESSIONS_PATH.read_text().splitlines()[0] + "\n")
    overrides = tiny_overrides(
        tmp_path,
        data__sessions=str(one),
        data__format="memory",
        data__max_seq_len=512,
        data__reward_rollouts=str(run),
        loss__reward=1.0,
        algorithms__loss_weight_schedule=False,
        train__max_duration="10ep",
        train__save_folder="",
        train__autoresume=False,
        heads__reward_lr=1.0e-2,
    )
    trainer = build_trainer(load_config(TINY_CONFIG, overrides))
    model = trainer.state.model
    assert len(trainer.state.dataloader.dataset) == 1 + len(rows)  # the session + rollouts
    batch = _outcome_batch(model, rows)
    before, _ = _reward_head(model, batch)
    trainer.fit()
    trainer.close()
    after, probs = _reward_head(model, batch)
    green = [p for r, p in zip(rows, probs.tolist()) if r["status"] == "passed"]
    failed = [p for r, p in zip(rows, probs.tolist()) if r["status"] != "passed"]
    print(
        f"reward head BCE on rollouts {before:.3f} -> {after:.3f}; last-step p: "
        f"green mean {sum(green) / len(green):.3f} ({min(green):.3f}..{max(green):.3f}), "
        f"failed mean {sum(failed) / len(failed):.3f} ({min(failed):.3f}..{max(failed):.3f})"
    )
    assert after < before - 0.1
    assert min(green) > max(failed)  # on the training set, every green rollout ranks first


def test_config_errors_name_the_key(tmp_path, tiny_overrides):
    from finetune.trainers import build_trainer

    def build(**extra):
        return build_trainer(
            load_config(TINY_CONFIG, tiny_overrides(tmp_path, data__format="memory", **extra))
        )

    run = tmp_path / "run"
    run.mkdir()
    (run / "results.jsonl").write_text(json.dumps(_row("s1", 0, [EDIT], "infra_error")) + "\n")
    with pytest.raises(ConfigError, match="data.reward_rollouts.*CausalLMLoss"):
        build(data__reward_rollouts=str(run), loss__name="causal_lm")
    with pytest.raises(ConfigError, match="data.reward_rollouts"):
        build(data__reward_rollouts=str(run), trainer__type="dpo", loss__name="dpo")
    with pytest.raises(ConfigError, match="data.reward_rollouts: no rollout"):
        build(data__reward_rollouts=str(run))
    with pytest.raises(ConfigError, match="data.reward_range"):
        build(data__reward_rollouts=str(run), data__reward_range="[1, 0]")
