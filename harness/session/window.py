"""A window on the fix date: which sessions `etai run`, `etai report` and `etai gate` count under
``--since``/``--until`` (to evaluate only on fixes made after a model's training cut-off).

A session's fix date is the author date of the commit that fixed the bug: ``provenance.date`` of a
mined or etai-js session (harness/session/model.py ``Session.fix_date``), ``fix_date`` on its
result rows. Both ends are inclusive calendar days; a fix date is taken as its day in UTC (a fix
at 23:30 -02:00 on 4 March is a fix of 5 March). A session with no fix date is neither inside
nor outside a window: it is left out, and counted, so that the caller can say how many.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Generic, TypeVar

from harness.base.errors import InputError

T = TypeVar("T")


def _day(text: str | date, where: str) -> date:
    if isinstance(text, date) and not isinstance(text, datetime):  # YAML reads 2024-01-01 so
        return text
    try:
        return date.fromisoformat(text)
    except (TypeError, ValueError):
        raise InputError(f"not an ISO date (YYYY-MM-DD): {text!r}", where=where) from None


def fix_day(text: str, *, where: str) -> date:
    """The UTC day of an ISO 8601 fix date (a bare date is that day); InputError naming ``where``
    for one that is not ISO 8601."""
    try:
        moment = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        raise InputError(f"fix date {text!r} is not ISO 8601", where=where) from None
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.date()


@dataclass(frozen=True)
class Picked(Generic[T]):
    """What a window kept, and what it left out: outside the window, or with no fix date."""

    kept: list[T]
    outside: list[T] = field(default_factory=list)
    undated: list[T] = field(default_factory=list)


@dataclass(frozen=True)
class Window:
    since: date | None = None
    until: date | None = None

    @classmethod
    def of(cls, since: str | date | None = None, until: str | date | None = None) -> Window:
        """The window of ``--since``/``--until`` (either may be None); InputError (exit 2) for a
        date that is not ISO or a window that ends before it starts."""
        lo = _day(since, "--since") if since is not None else None
        hi = _day(until, "--until") if until is not None else None
        if lo and hi and lo > hi:
            raise InputError(
                f"{lo} is after --until {hi}: the window holds no day", where="--since"
            )
        return cls(lo, hi)

    def __bool__(self) -> bool:
        return self.since is not None or self.until is not None

    def holds(self, day: date) -> bool:
        return (self.since is None or day >= self.since) and (
            self.until is None or day <= self.until
        )

    def describe(self) -> str:
        if self.since and self.until:
            return f"fixed from {self.since} to {self.until}"
        return (
            f"fixed on or after {self.since}" if self.since else f"fixed on or before {self.until}"
        )

    def pick(
        self, items: Iterable[T], date_of: Callable[[T], str | None], name_of: Callable[[T], str]
    ) -> Picked[T]:
        """Split ``items`` by their fix date (``date_of``; None: no date); a date that is not ISO
        8601 is an InputError naming the item (``name_of``)."""
        kept, outside, undated = [], [], []
        for x in items:
            text = date_of(x)
            if not text:
                undated.append(x)
            elif self.holds(fix_day(text, where=name_of(x))):
                kept.append(x)
            else:
                outside.append(x)
        return Picked(kept, outside, undated)


def note(window: dict) -> str:
    """A summary's ``fix_window`` in words: what ran and what the window left out."""
    w = Window.of(window.get("since"), window.get("until"))
    undated = window.get("undated") or []
    text = (
        f"--since/--until: {window['kept']} session(s) {w.describe()}; "
        f"{window['outside']} outside the window"
    )
    if undated:
        shown = ", ".join(undated[:10]) + (
            f" and {len(undated) - 10} more" if len(undated) > 10 else ""
        )
        text += f"; {len(undated)} without a fix date left out ({shown})"
    return text
