"""Progress bars that suit where stderr goes: tqdm's redrawn line on a terminal; elsewhere (a CI
log, a file, a pipe) a plain line now and then, since carriage-return frames there pile up as one
unreadable line or as thousands."""

from __future__ import annotations

import sys
from typing import Any

LOG_EVERY_S = 30.0  # seconds between lines when stderr is not a terminal


class _Lines:
    """A stream for tqdm that turns each frame into a line of its own and drops the erasures."""

    def __init__(self, stream: Any):
        self._stream = stream

    def write(self, s: str) -> None:
        frame = s.replace("\r", "").strip()
        if frame:
            self._stream.write(frame + "\n")

    def flush(self) -> None:
        self._stream.flush()


# Without tqdm's remaining time and rate: for a caller that states its own estimate as the postfix
# (``bar.set_postfix_str("ETA ...")``), where items differ so much in cost that the rate misleads.
_OWN_ETA = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]"


def bar(
    total: int,
    desc: str,
    *,
    enabled: bool = True,
    unit: str = "job",
    leave: bool = True,
    own_eta: bool = False,
):
    """A tqdm bar on stderr (``enabled=False``: none at all; ``own_eta``: see ``_OWN_ETA``)."""
    # tqdm (~9 ms) only where a bar is drawn: plug-in imports (suites.humaneval) stay light
    from tqdm import tqdm

    err = sys.stderr
    if err is None or not enabled:
        return tqdm(total=total, desc=desc, unit=unit, disable=True)
    fmt = {"bar_format": _OWN_ETA} if own_eta else {}
    if err.isatty():
        return tqdm(total=total, desc=desc, unit=unit, leave=leave, file=err, **fmt)
    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        **fmt,
        leave=True,  # the last line says how far it got
        file=_Lines(err),
        mininterval=LOG_EVERY_S,
        maxinterval=LOG_EVERY_S,
        ncols=80,
        dynamic_ncols=False,
    )
