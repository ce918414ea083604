"""The runner: suite x agents x samples, in parallel, resumable, crash-safe. The CLI, CI gates and the
Composer callback all call ``run``; it knows no suite kind by name (``harness.suites.kinds``).

One row per job (for sessions: session, agent, sample) is appended (fsync) to
``<out>/results.jsonl`` as soon as it is done; every row carries a cache key, so rerunning the same
command skips what is stored, a SIGKILLed run restarted loses and duplicates nothing, and Ctrl-C
removes this run's containers and keeps the rows written. ``summary.json`` is recomputed from the
rows of this command's keys.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from harness.base import speed
from harness.base.cpus import available_cpus
from harness.base.errors import InputError
from harness.base.progress import bar as progress_bar
from harness.grading.verify import check_regression
from harness.runs.executors import parse
from harness.runs.results import RunFolder
from harness.sandbox import reap_own
from harness.session.window import Window
from harness.suites.kinds import RunSettings, kind_of


def run(
    suite: object,
    agents: Sequence[str],
    *,
    k: int | None = None,
    samples: int = 1,
    max_steps: int | None = None,
    workers: int | None = None,
    out: str | Path | None = None,
    sandbox: str = "docker",
    options: dict[str, Any] | None = None,
    progress: bool = True,
    session_ids: Sequence[str] | None = None,
    executor: str = "local",
    allow_missing: bool = False,
    regression: str = "related",
    since: str | None = None,
    until: str | None = None,
) -> dict[str, Any]:
    """Run ``agents`` (spec strings) on ``suite``; return the summary (also written to summary.json).

    ``suite`` is a bundled suite's name, a suite folder, or anything a registered suite kind claims
    (``humaneval``: completions scored in the sandbox, where only ``samples`` matters).
    ``executor`` says where jobs run (harness.runs.executors): ``local`` (this process's thread pool) or
    ``ray[:ADDRESS]`` (an existing Ray cluster); rows are written here either way.
    ``allow_missing``: a ``replay:`` file may lack episodes of the run (each a rollout of no actions).
    ``regression``: ``related`` (a graded run runs the verification files and the test files related
    to what the episode changed) or ``whole`` (every test file); see harness.grading.verify.
    ``since``/``until``: ISO dates; only the sessions whose fix fell in that window, both days
    included (harness/session/window.py); the summary's ``fix_window`` counts those left out.
    Everything the caller gave is checked before anything runs (InputError); the run folder is held
    for the run's life (``RunFolder``: a second run on it is refused).
    """
    settings = RunSettings(
        samples=at_least_one("samples", samples, most=MAX_SAMPLES),
        workers=available_cpus() if workers is None else at_least_one("workers", workers),
        k=k,
        max_steps=max_steps,
        sandbox=sandbox,
        options=dict(options or {}),
        progress=progress,
        session_ids=list(session_ids) if session_ids else None,
        executor=executor,
        allow_missing=allow_missing,
        regression=_regression(regression),
        fix_window=Window.of(since, until) or None,
    )
    kind = kind_of(suite)
    _check_executor(kind, executor)
    if settings.fix_window and kind.name != "sessions":
        raise InputError(
            f"a {kind.name} task has no fix date to window on", where="--since/--until"
        )
    opened = kind.open(suite, agents, settings)
    try:
        with RunFolder(out or Path("runs") / opened.name) as folder:
            return opened.run(folder.path)
    finally:
        opened.close()


def _regression(mode: Any) -> str:
    """The mode asked for; ``related`` runs every test file where the ``scoped_regression`` speed
    path is off (harness/base/speed.py)."""
    check_regression(mode)
    return "whole" if mode == "related" and not speed.on("scoped_regression") else mode


def _check_executor(kind, spec: str) -> None:
    executor, _ = parse(spec)  # an unknown name is refused here
    if executor.name != "local" and not getattr(kind, "remote_jobs", False):
        raise InputError(
            f"suite kind {kind.name!r} runs only on the local executor (got {spec!r})",
            where="--executor",
        )


# Rollouts per session and agent: 100 times the largest pass@k a summary reports (suite_kinds.pass_ks).
# A run plans every episode before the first starts; --samples 1000000000 would plan for hours.
MAX_SAMPLES = 10_000


def at_least_one(name: str, value: Any, *, most: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{name} must be a whole number (got {value!r})")
    if value < 1:
        raise InputError(f"{name} must be at least 1 (got {value})")
    if most is not None and value > most:
        raise InputError(f"{name} must be at most {most} (got {value})")
    return value


def execute(
    jobs: list[tuple], work, workers: int, stop: threading.Event, progress: bool, what: str
) -> None:
    """Run jobs on a thread pool with a progress bar; Ctrl-C stops intake and reaps containers."""
    if not jobs:
        return

    bar = progress_bar(len(jobs), what, enabled=progress, leave=False)
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="etai")
    futures: set[Future] = {pool.submit(work, *j) for j in jobs}
    try:
        while futures:
            done, futures = wait(futures, timeout=0.5, return_when=FIRST_COMPLETED)
            for f in done:
                f.result()  # a harness bug (not an agent failure) surfaces here
                bar.update(1)
    except BaseException:
        stop.set()
        for f in futures:
            f.cancel()

        reap_own()  # kill this process's sandboxes now; running episodes then end fast
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        bar.close()
