"""Epoch schedules for the composite loss weights (pure; applied by ``LossWeightSchedule``).

The loss never reads the training state: an Algorithm asks a schedule for the weights of the
current epoch and hands them to the loss (docs/training.md#weight-schedules).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from finetune.registry import Registry


@dataclass(frozen=True)
class CompositeWeights:
    code: float = 0.8
    intent: float = 0.25
    cursor: float = 0.15
    reward: float = 0.20


Schedule = Callable[[int], CompositeWeights]
SCHEDULES: Registry[Schedule] = Registry(
    "weight schedule", "algorithms.loss_weight_schedule.schedule", group="etai.schedules"
)


@SCHEDULES.register("default")
def default_schedule(epoch: int) -> CompositeWeights:
    """Code first, then shift toward execution feedback: the code weight decays to a floor of 0.4,
    intent and cursor drop once their heads have had a few epochs, reward rises after ten."""
    return CompositeWeights(
        code=max(0.4, 0.8 - 0.02 * epoch),
        intent=0.25 if epoch < 5 else 0.15,
        cursor=0.15 if epoch < 3 else 0.10,
        reward=0.20 if epoch < 10 else 0.25,
    )


@SCHEDULES.register("constant")
def constant_schedule(epoch: int) -> CompositeWeights:
    """The epoch-0 weights of the default schedule, for every epoch."""
    return default_schedule(0)
