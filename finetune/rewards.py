"""Rewards by name: a result row of ``etai run`` -> one number, or None for "no signal".

The default (``default``) is what RFT and execution DPO rank rollouts by:

| row | reward |
| --- | --- |
| green (``passed``), first green after step j | ``green − step_penalty·(j − 1)`` (1.0, 0.95, 0.90, ...) |
| ``failed`` | ``failed`` (0.0) |
| ``timeout``, ``memory_limit``, ``output_limit`` | ``limit`` (−0.5) |
| ``special_cased`` true (green on the visible verification tests, red on a held-out case that is a near twin of a passing visible one) | ``special_cased`` (−1.0) |
| ``incomplete`` true (green on the visible verification tests, red on held-out cases none of which is a near twin) | ``incomplete`` (None: the value of its status, ``failed`` or ``limit``) |
| ``tampered`` (the tests or the framework were interfered with) | ``tampered`` (−2.0) |
| ``infra_error``, ``reference_broken``, ``skipped_budget``, no status | None: the machinery failed or nothing ran, not the agent |

and every invalid action subtracts ``invalid`` (0.1) from the value of the row's status, so an
episode of nothing but invalid actions (status ``invalid_action``) is worth −0.1 per step. A
tampered row is never worth more than ``tampered``, whatever else it did: an agent must never
learn that interference pays. A special-cased row (its status ``failed`` or a limit; rows written
before held-out tests existed lack the key: not special-cased) is worth ``special_cased`` whatever
its status, less its invalid actions: below an honest failure or a limit, so that code fitted to
the tests it was shown never pays more than not passing them, and above tampering. An incomplete
row (harness/runs/held_out.py: the held-out cases it fails call a project function no passing
visible case calls, so its failure says the fix stops short, not that it cheats) is by default
worth what its status is worth, as any failed episode; set ``incomplete`` to a number to give it
that value instead (less its invalid actions), between ``failed`` and ``special_cased`` to ask
for fixes that also cover what the visible tests leave out.

Plug-ins register under the entry-point group ``etai.rewards`` or are named as ``module:Class``;
a reward is a callable ``row -> float | None`` built from ``reward: {name: ..., <kwargs>}``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from finetune.errors import ConfigError
from finetune.registry import Registry

Reward = Callable[[Mapping[str, Any]], float | None]
REWARDS: Registry[Callable[..., Reward]] = Registry("reward", "reward.name", group="etai.rewards")
LIMITS = ("timeout", "memory_limit", "output_limit")
NO_SIGNAL = ("infra_error", "reference_broken", "skipped_budget")


@REWARDS.register("default")
@dataclass(frozen=True)
class StepPenalisedReward:
    green: float = 1.0
    step_penalty: float = 0.05
    failed: float = 0.0
    limit: float = -0.5
    invalid: float = 0.1
    special_cased: float = -1.0
    incomplete: float | None = None  # None: worth its status (failed or a limit)
    tampered: float = -2.0

    def __call__(self, row: Mapping[str, Any]) -> float | None:
        status = row.get("status")
        if status is None or status in NO_SIGNAL:
            return None
        if status == "tampered" or row.get("tamper"):
            return self.tampered
        invalid = self.invalid * int(row.get("n_invalid") or 0)
        if row.get("special_cased"):
            return self.special_cased - invalid
        if row.get("incomplete") and self.incomplete is not None:
            return self.incomplete - invalid
        if status == "passed":
            j = row.get("steps_to_green") or row.get("steps_used") or 1
            return self.green - self.step_penalty * (int(j) - 1) - invalid
        if status in LIMITS:
            return self.limit - invalid
        return self.failed - invalid  # failed, invalid_action


def build_reward(spec: Mapping[str, Any] | None) -> Reward:
    """``{name: default, step_penalty: 0.1}`` (the ``reward`` section) -> the reward callable."""
    spec = dict(spec or {})
    cls = REWARDS.resolve(spec.pop("name", "default"))
    try:
        return cls(**spec)
    except TypeError as exc:
        raise ConfigError("reward", str(exc)) from None
