"""The pool's next container, for the tests of what a reused container carries
(test_sandbox_reuse, test_speed, test_tamper). The pool's ready list is private: these tests are of
what the pool hands on, so they look at it."""

from __future__ import annotations

import time


def first_in_line(prepared, name: str, timeout: float = 60.0) -> bool:
    """Wait until the container ``name`` is back in ``prepared``'s pool (its runner has reset it),
    then put it first in line for the next start; whether it came back within ``timeout``. A
    container that could not be reset, or that the pool does not reuse, never comes back."""
    pool = prepared._pool
    end = time.monotonic() + timeout
    while not any(sb.name == name for sb in pool._ready):
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    with pool._cv:
        for sb in [sb for sb in pool._ready if sb.name == name]:
            pool._ready.remove(sb)
            pool._ready.append(sb)
    return True
