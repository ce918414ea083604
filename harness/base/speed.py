"""Speed paths: every optimisation that keeps something between runs, episodes or sessions, by
name, with the one switch that turns it off (docs/grading.md, "Speed paths and their switches").

Each is a channel between agents or a stale answer unless it is out of reach of workspace code or
keyed on everything it depends on; the differential harness (scripts/differential.py, `make
differential`) runs the same episodes with each one off and requires the same verdicts. A new
speed path lands here, with its switch, and so in that harness.

``ETAI_SPEED_OFF=name,name`` in the environment where the harness runs turns paths off (``all``:
every one); the runner in the sandbox learns the ones it implements from ``runner_env``.
"""

from __future__ import annotations

import os

from harness.base.errors import InputError

PATHS: dict[str, str] = {
    "forked_hosts": "Jest hosts forked from a warm zygote instead of started (runner.js forkedHost)",
    "container_reuse": "a container reset by its runner and handed to the next episode "
    "(harness/sandbox/_docker.py Pool.give_back)",
    "transform_store": "transformed code read from the trusted store "
    "(harness/sandbox/transforms.py, runner/transform-cache.js)",
    "code_cache": "V8's compiled code of Jest from the image (runner/code-cache.js)",
    "warm_hosts": "the agent's Jest runs in hosts kept warm between its runs (runner.js hosts)",
    "scoped_regression": "a graded run of the test files the change can reach, not every one "
    "(harness/grading/verify.py regression='related')",
    "preflight_cache": "a session's preflight replay kept across runs "
    "(harness/runs/session_jobs.py preflights)",
    "base_baseline": "a suite's base workspace run whole once per process and image: the tests "
    "passing there answer for those a base + patch session's patch cannot reach "
    "(harness/runs/base_runs.py)",
    "verification_first": "a workspace the agent's next action changes runs its verification "
    "files first, the rest only if they pass untampered (harness/runs/loop.py _grade_step)",
    "unchanged_final": "the final verdict is the last whole graded run's when no workspace file "
    "changed since it began (harness/runs/loop.py _kept_state)",
    "verification_rerun": "the preflight's second run of the reference's final workspace runs "
    "the verification files alone, not a whole graded run (harness/runs/loop.py preflight)",
}

VARIABLE = "ETAI_SPEED_OFF"


def turned_off() -> frozenset[str]:
    """The paths ``ETAI_SPEED_OFF`` turns off (and ``ETAI_JEST_FORK=0``, the older switch of one)."""
    raw = os.environ.get(VARIABLE, "")
    names = {n.strip() for n in raw.split(",") if n.strip()}
    if "all" in names:
        names = set(PATHS)
    unknown = sorted(names - set(PATHS))
    if unknown:
        raise InputError(
            f"{VARIABLE}: unknown speed path(s) {', '.join(unknown)}; known: {', '.join(PATHS)}"
        )
    if os.environ.get("ETAI_JEST_FORK") == "0":
        names.add("forked_hosts")
    return frozenset(names)


def on(name: str) -> bool:
    """Whether speed path ``name`` is on (every path is, unless turned off)."""
    if name not in PATHS:
        raise KeyError(name)
    return name not in turned_off()


def runner_env() -> dict[str, str]:
    """What the in-sandbox runner reads of the switches: the paths it implements itself."""
    env = {
        "ETAI_JEST_FORK": "1" if on("forked_hosts") else "0",
        "ETAI_WARM_HOSTS": "1" if on("warm_hosts") else "0",
    }
    if not on("code_cache"):
        env["ETAI_CODE_CACHE"] = ""  # the image's own value names the cache; empty: none
    return env
