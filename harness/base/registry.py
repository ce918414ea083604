"""One name -> implementation registry per concept, for every package of the project.

Sandboxes, agents, tools, suite kinds and metrics (harness), losses, trainers and weight schedules
(finetune) each have one ``Registry``. A name is found, in this order:

1. among the package's own entries (registered by the modules that define them, imported the
   first time the registry is used);
2. among the entry points of installed distributions in the registry's group (``etai.agents``,
   ``etai.sandboxes``, ``etai.suite_kinds``, ``etai.metrics``, ...): that is how a third-party
   package plugs in without touching this repository. An entry point is loaded only when its
   name is asked for (or when every entry is listed with ``items``);
3. as ``package.module:Attr``, imported on demand (Composer's ``import_object`` spelling, with a
   colon, so a dotted module path is never ambiguous), where the registry allows it.

A name registered twice is an error, so a plug-in can never silently replace a built-in.
Unknown names raise the error the owner chose (``InputError`` naming the flag for the CLI's
registries, ``ConfigError`` naming the key for finetune's). Pure stdlib: cheap to import.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterable
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar

from harness.base.errors import InputError

T = TypeVar("T")


def _input_error(where: str | None) -> Callable[[str], Exception]:
    def make(message: str) -> Exception:
        return InputError(message, where=where)

    return make


class Registry(Generic[T]):
    """Entries of one concept; ``group`` is the entry-point group plug-ins register under."""

    def __init__(
        self,
        concept: str,
        *,
        group: str | None = None,
        builtins: Iterable[str] = (),
        optional: Iterable[str] = (),
        where: str | None = None,
        error: Callable[[str], Exception] | None = None,
        imports: bool = False,
    ):
        self.concept = concept  # e.g. "agent", for messages
        self.group = group
        self._builtins = tuple(builtins)  # modules that register the built-in entries
        self._optional = tuple(optional)  # the same, skipped when an extra they need is missing
        self._error = error or _input_error(where)
        self._imports = imports
        self._items: dict[str, T] = {}
        self._about: dict[str, dict[str, Any]] = {}
        self._plugins: dict[str, Any] | None = None  # name -> EntryPoint, not loaded yet
        self._loaded = False
        self._loading = False
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ registering
    def register(self, name: str, obj: T | None = None, **about: Any) -> Any:
        """``register(name, obj, description=...)``, or ``@register(name)`` as a decorator."""
        if obj is None:

            def decorate(o: T) -> T:
                self.register(name, o, **about)
                return o

            return decorate
        if name in self._items:
            if self._items[name] is obj:  # the same object again (a module re-registering on use)
                return obj
            raise ValueError(f"{self.concept} {name!r} registered twice")
        self._items[name] = obj
        self._about[name] = about
        return obj

    # ------------------------------------------------------------------ looking up
    def get(self, name: object) -> T:
        """The entry called ``name`` (built-in, plug-in, or ``module:Attr``); the owner's error otherwise."""
        if not isinstance(name, str) or not name:
            raise self._error(f"expected a {self.concept} name, got {name!r}")
        self._load()
        if name in self._items:
            return self._items[name]
        plugin = self._entry_points().get(name)
        if plugin is not None:
            return self._load_plugin(name, plugin)
        if self._imports and ":" in name:
            return self._import(name)
        raise self._error(
            f"unknown {self.concept} {name!r}; known: {', '.join(sorted(self.names()))}"
            + ("; or 'module:Class'" if self._imports else "")
        )

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._items or name in self._entry_points()

    def names(self) -> tuple[str, ...]:
        """Built-ins in registration order, then plug-ins (not loaded) by name."""
        self._load()
        return tuple(self._items) + tuple(
            sorted(n for n in self._entry_points() if n not in self._items)
        )

    def items(self) -> list[tuple[str, T]]:
        """Every entry, plug-ins loaded."""
        return [(n, self.get(n)) for n in self.names()]

    def loaded(self) -> list[tuple[str, T]]:
        """The entries loaded so far (built-ins, plug-ins already used), loading nothing new."""
        return list(self._items.items())

    def about(self, name: str) -> dict[str, Any]:
        """What the entry was registered with (``description=``, ...); a plug-in's is its docstring."""
        self.get(name)
        return self._about.get(name, {})

    # ------------------------------------------------------------------ loading
    def _load(self) -> None:
        # Worker threads may ask for their first entry at once: the others wait until every
        # built-in is registered (half loaded, it would call a built-in such as 'docker' unknown).
        # Re-entrant: a built-in being imported may use the registry on the importing thread.
        if self._loaded:
            return
        with self._lock:
            if self._loaded or self._loading:
                return
            self._loading = True
            try:
                for mod in self._builtins:
                    importlib.import_module(mod)
                for mod in self._optional:
                    try:
                        importlib.import_module(mod)
                    except ImportError as e:  # the module is absent; an error inside it is a bug
                        if not (e.name and mod.startswith(e.name)):
                            raise
            finally:
                self._loading = False
            self._loaded = True

    def _entry_points(self) -> dict[str, Any]:
        if self._plugins is None:
            self._plugins = (
                {ep.name: ep for ep in entry_points(group=self.group)} if self.group else {}
            )
        return self._plugins

    def _load_plugin(self, name: str, ep: Any) -> T:
        try:
            obj = ep.load()
        except Exception as e:  # a broken plug-in names itself rather than crashing the caller
            raise self._error(
                f"{self.concept} {name!r} from entry point {ep.value!r} "
                f"(group {self.group}) failed to load: {type(e).__name__}: {e}"
            ) from e
        doc = (getattr(obj, "__doc__", None) or "").strip().splitlines()
        dist = getattr(getattr(ep, "dist", None), "name", None)
        self.register(
            name, obj, description=(doc[0] if doc else "") + (f" (plug-in: {dist})" if dist else "")
        )
        return obj

    def _import(self, name: str) -> T:
        module_name, _, attr = name.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:
            raise self._error(f"cannot import {module_name!r} for {name!r}: {e}") from e
        try:
            return getattr(module, attr)
        except AttributeError:
            raise self._error(f"module {module_name!r} has no {attr!r}") from None
