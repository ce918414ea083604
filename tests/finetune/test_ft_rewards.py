"""The reward registry: the documented default, by hand, and plug-ins by name."""

from __future__ import annotations

import pytest

from finetune.errors import ConfigError
from finetune.rewards import REWARDS, StepPenalisedReward, build_reward


def _row(status, **fields):
    return {"status": status, "n_invalid": 0, "tamper": [], **fields}


def test_default_reward_by_hand():
    r = build_reward(None)
    assert r(_row("passed", steps_to_green=1)) == pytest.approx(1.0)
    assert r(_row("passed", steps_to_green=3)) == pytest.approx(0.9)  # 1 − 0.05·2
    assert r(_row("passed", steps_to_green=2, n_invalid=1)) == pytest.approx(0.85)
    assert r(_row("failed")) == pytest.approx(0.0)
    assert r(_row("failed", n_invalid=2)) == pytest.approx(-0.2)
    assert r(_row("invalid_action", n_invalid=10)) == pytest.approx(-1.0)
    for limit in ("timeout", "memory_limit", "output_limit"):
        assert r(_row(limit)) == pytest.approx(-0.5)


def test_tampering_is_strongly_negative_whatever_else_happened():
    r = build_reward({})
    assert r(_row("tampered", tamper=["jest config edited"])) == -2.0
    # a row that claims green but carries tamper evidence is still tampered
    assert r(_row("passed", steps_to_green=1, tamper=["x"])) == -2.0
    worst_honest = r(_row("invalid_action", n_invalid=10))
    assert r(_row("tampered", tamper=["x"])) < worst_honest


def test_special_cased_is_below_failed_and_above_tampered():
    """Green on the visible verification tests, red on the held-out ones (issue #30): worth less
    than an honest failure or a limit whatever its status, more than tampering."""
    r = build_reward(None)
    special = r(_row("failed", special_cased=True))
    assert special == pytest.approx(-1.0)
    assert r(_row("timeout", special_cased=True)) == special  # a limit status changes nothing
    assert r(_row("tampered", tamper=["x"])) < special < r(_row("timeout")) < r(_row("failed"))
    # invalid actions are subtracted as from a failure; tamper evidence still wins
    assert r(_row("failed", special_cased=True, n_invalid=2)) == pytest.approx(-1.2)
    assert r(_row("failed", special_cased=True, tamper=["x"])) == -2.0
    # rows written before held-out tests existed lack the key: not special-cased
    assert r(_row("failed", special_cased=False)) == r(_row("failed")) == 0.0
    custom = build_reward({"special_cased": -0.3, "failed": 0.1})
    assert custom(_row("failed", special_cased=True)) == pytest.approx(-0.3)
    assert custom(_row("failed")) == pytest.approx(0.1)


def test_an_incomplete_fix_is_worth_a_failure_by_default_and_is_configurable():
    """Green on the visible tests, red on held-out cases none of which is a near twin of a
    visible one (harness/runs/held_out.py): not a cheat, so not punished as one unless asked."""
    r = build_reward(None)
    assert r(_row("failed", incomplete=True)) == r(_row("failed")) == 0.0
    assert r(_row("timeout", incomplete=True)) == r(_row("timeout")) == pytest.approx(-0.5)
    assert r(_row("failed", incomplete=True)) > r(_row("failed", special_cased=True))
    assert r(_row("failed", incomplete=True, n_invalid=1)) == pytest.approx(-0.1)
    custom = build_reward({"incomplete": -0.25})
    assert custom(_row("failed", incomplete=True)) == pytest.approx(-0.25)
    assert custom(_row("failed", incomplete=True, n_invalid=1)) == pytest.approx(-0.35)
    assert custom(_row("failed")) == 0.0  # only the incomplete rows move
    assert custom(_row("failed", incomplete=True, tamper=["x"])) == -2.0


def test_machinery_failures_give_no_signal():
    r = build_reward({})
    assert r(_row("infra_error")) is None and r(_row("reference_broken")) is None
    assert r({}) is None


def test_ranking_prefers_shorter_green_paths():
    r = build_reward({"step_penalty": 0.2})
    values = [r(_row("passed", steps_to_green=j)) for j in (1, 2, 3)]
    assert values == sorted(values, reverse=True) and values[0] > values[-1] > r(_row("failed"))


def test_registry_names_plugins_and_errors():
    assert REWARDS.resolve("default") is StepPenalisedReward
    plugged = build_reward({"name": "finetune.rewards:StepPenalisedReward", "green": 3.0})
    assert plugged(_row("passed", steps_to_green=1)) == 3.0
    with pytest.raises(ConfigError, match="reward"):
        build_reward({"name": "no-such-reward"})
    with pytest.raises(ConfigError, match="reward"):
        build_reward({"bonus": 1})
