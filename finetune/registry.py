"""finetune's registries (losses, trainers, weight schedules): ``harness.base.registry.Registry`` with
finetune's error. Plug-ins add entries through the entry-point groups ``etai.losses``,
``etai.trainers`` and ``etai.schedules``; a ``package.module:Attr`` name is imported on demand.
"""

from __future__ import annotations

from typing import TypeVar

from finetune.errors import ConfigError
from harness.base.registry import Registry as _Registry

T = TypeVar("T")


class Registry(_Registry[T]):
    def __init__(self, kind: str, config_key: str, *, group: str):
        self.config_key = config_key  # e.g. "loss.name", the key a ConfigError names
        super().__init__(
            kind,
            group=group,  # named, not made from kind: "loss" + "s" is not etai.losses
            error=lambda message: ConfigError(config_key, message),
            imports=True,
        )

    def resolve(self, name: object) -> T:
        """The registered object, a plug-in's, or the imported ``module:Attr``; ConfigError otherwise."""
        return self.get(name)
