"""One name -> implementation registry per concept (losses, trainers, weight schedules).

Outside code plugs in without registering: a name of the form ``"package.module:Attr"`` is
imported on demand (Composer's ``import_object`` spelling, with a colon, so a dotted module path
is never ambiguous). Pure stdlib, so ``import finetune`` stays cheap.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Generic, TypeVar

from finetune.errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str, config_key: str):
        self.kind = kind  # e.g. "loss", for messages
        self.config_key = config_key  # e.g. "loss.name", the key a ConfigError names
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def decorate(obj: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} {name!r} registered twice")
            self._items[name] = obj
            return obj

        return decorate

    def names(self) -> tuple[str, ...]:
        return tuple(self._items)

    def resolve(self, name: object) -> T:
        """The registered object, or the imported ``module:Attr``; ConfigError otherwise."""
        if not isinstance(name, str) or not name:
            raise ConfigError(self.config_key, f"expected a {self.kind} name, got {name!r}")
        if name in self._items:
            return self._items[name]
        if ":" not in name:
            known = ", ".join(self._items)
            raise ConfigError(
                self.config_key, f"unknown {self.kind} {name!r}; known: {known}; or 'module:Class'"
            )
        module_name, _, attr = name.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ConfigError(
                self.config_key, f"cannot import {module_name!r} for {name!r}: {exc}"
            ) from exc
        try:
            return getattr(module, attr)
        except AttributeError:
            raise ConfigError(self.config_key, f"module {module_name!r} has no {attr!r}") from None
