"""The runner: suite x agents x samples, in parallel, resumable, crash-safe. The CLI, CI gates and the
Composer callback all call ``run``.

One row per (session, agent, sample) is appended (fsync) to ``<out>/results.jsonl`` as soon as it
is done; every row carries a cache key, so rerunning the same command skips what is stored, a
SIGKILLed run restarted loses and duplicates nothing, and Ctrl-C removes this run's containers
and keeps the rows written. ``summary.json`` is recomputed from the rows of this command's keys.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, Sequence

from harness import metrics
from harness.agents import AgentContext, from_spec
from harness.loop import preflight, run_episode
from harness.results import ResultStore, RunFolder, cache_key, write_json_atomic
from harness.sessions import Session, Suite, load_suite


def _pass_ks(samples: int) -> list[int]:
    return [k for k in (1, 2, 5, 10, 20, 50, 100) if k <= samples]


def _preflight_cached(session: Session, image: str | None, start, oracle, store: ResultStore) -> dict[str, Any]:
    from harness import grading_digest, version

    key = cache_key("preflight", session.content_hash, image, version(), grading_digest())
    if store.has(key):
        return store.rows([key])[0]
    row = {"cache_key": key, "session_id": session.session_id, **preflight(session, oracle, start_sandbox=start)}
    store.append(row)
    return row


def run(suite: str | Path | Suite, agents: Sequence[str], *, k: int | None = None, samples: int = 1,
        max_steps: int | None = None, workers: int | None = None, out: str | Path | None = None,
        sandbox: str = "docker", options: dict[str, Any] | None = None, progress: bool = True,
        session_ids: Sequence[str] | None = None) -> dict[str, Any]:
    """Run ``agents`` (spec strings) on ``suite``; return the summary (also written to summary.json).

    ``suite="humaneval"`` asks each agent for code completions and scores them in the sandbox
    (suites/humaneval/agents.py); there k is the tool budget no longer, only ``samples`` matters.
    Everything the caller gave is checked before anything runs (InputError); the run folder is held
    for the run's life (``RunFolder``: a second run on it is refused).
    """
    from harness.errors import InputError
    from harness.sandbox import require_kind

    samples = _at_least_one("samples", samples)
    workers = (os.cpu_count() or 1) if workers is None else _at_least_one("workers", workers)
    if isinstance(suite, str) and suite == "humaneval":
        from suites.humaneval.agents import run_agents

        with RunFolder(out or Path("runs") / "humaneval") as folder:
            return run_agents(agents, samples=samples, ks=_pass_ks(samples), out=folder.path, workers=workers,
                              options=options, task_ids=session_ids, progress=progress)

    st = suite if isinstance(suite, Suite) else load_suite(suite)
    k = _at_least_one("k", st.defaults.get("k", 3) if k is None else k)
    max_steps = _at_least_one("max_steps", st.defaults.get("max_steps", 10) if max_steps is None else max_steps)
    if max_steps < k:
        raise InputError(f"max_steps must be at least k (got max_steps={max_steps}, k={k})")
    sessions = list(st.sessions)
    if session_ids:
        unknown = sorted(set(session_ids) - {s.session_id for s in sessions})
        if unknown:
            raise InputError(f"unknown session id(s): {', '.join(unknown)}", where="--session")
        sessions = [s for s in sessions if s.session_id in set(session_ids)]
    require_kind(sandbox)
    ctx = AgentContext(st, dict(options or {}))
    agent_objs = [from_spec(spec, ctx) for spec in agents]  # bad specs fail before anything runs
    try:
        with RunFolder(out or Path("runs") / st.name) as folder:
            return _run(st, sessions, agent_objs, ctx, folder.path, k=k,
                        samples=samples, max_steps=max_steps, workers=workers, sandbox=sandbox, progress=progress)
    finally:
        for a in agent_objs:
            a.close()


def _at_least_one(name: str, value: Any) -> int:
    from harness.errors import InputError

    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{name} must be a whole number (got {value!r})")
    if value < 1:
        raise InputError(f"{name} must be at least 1 (got {value})")
    return value


def _run(st: Suite, sessions: list[Session], agent_objs: list, ctx: AgentContext, out: Path, *, k: int,
         samples: int, max_steps: int, workers: int, sandbox: str, progress: bool) -> dict[str, Any]:
    from harness import grading_digest, version
    from harness.sandbox import start as start_sandbox
    from harness.verify import Gold

    oracle = from_spec("oracle", ctx)
    store = ResultStore(out)

    image = None
    pools: list[Any] = []  # a pool of warm containers, made on the first sandbox a job needs
    pool_lock = threading.Lock()
    if sandbox == "docker":
        from harness import image as _image
        from harness.sandbox import _docker

        image = _image.ensure_image()
        _docker.prune()  # containers of runs that died (SIGKILL, reboot) before they could clean up

    def start(session: Session):
        if sandbox != "docker":
            return start_sandbox(sandbox, session.workspace, limits=_limits())
        with pool_lock:
            if not pools:
                pools.append(_docker.Pool(image, _limits(), size=min(workers, 4)))
        return start_sandbox(sandbox, session.workspace, limits=_limits(), image=image, pool=pools[0])

    stop = threading.Event()
    keys: list[str] = []
    try:
        flights = _preflights(sessions, image, start, oracle, workers, progress)
        broken = {sid: r["reason"] for sid, r in flights.items() if not r["ok"]}
        jobs = []
        for agent in agent_objs:
            for s in sessions:
                for sample in range(samples):
                    key = cache_key(agent.spec, agent.fingerprint, s.content_hash, image, version(),
                                    grading_digest(), k, max_steps, sample)
                    keys.append(key)
                    if store.has(key):
                        continue
                    base = {"cache_key": key, "suite": st.name, "session_hash": s.content_hash,
                            "harness_version": version(), "image": image}
                    if s.session_id in broken:
                        store.append({**base, "session_id": s.session_id, "agent": agent.spec, "sample": sample,
                                      "status": "reference_broken", "reason": broken[s.session_id],
                                      "intent": s.intent})
                        continue
                    jobs.append((agent, s, sample, base))

        def work(agent, s, sample, base):
            if stop.is_set():
                return
            flight = flights[s.session_id]
            row = run_episode(s, agent, sample, start_sandbox=start, k=k, max_steps=max_steps,
                              passing=flight["passing"], gold=Gold.from_json(flight["gold"]))
            if not stop.is_set():  # after Ctrl-C a killed sandbox is not the agent's result
                store.append({**base, **row})

        _execute(jobs, work, workers, stop, progress, "episodes")
    finally:
        for p in pools:
            p.close()

    rows = store.rows(keys)
    summary = {
        "suite": st.name, "k": k, "max_steps": max_steps, "samples": samples, "image": image,
        "harness_version": version(), "n_sessions": len(sessions), "out": str(store.dir),
        "agents": {spec: metrics.summarize([r for r in rows if r["agent"] == spec], k=k, ks=_pass_ks(samples))
                   for spec in [a.spec for a in agent_objs]},
        "complete": all(r.get("status") != "infra_error" for r in rows) and len(rows) == len(keys),
    }
    write_json_atomic(store.dir / "summary.json", summary)
    return summary


def _limits():
    from harness.sandbox import Limits

    return Limits(memory_mb=1024, timeout_s=30)


def _preflights(sessions, image, start, oracle, workers, progress) -> dict[str, dict[str, Any]]:
    """Replay every reference first (cached per session content, image and grading code); return
    each session's preflight row (``ok``/``reason``, and for sound ones ``passing`` and ``gold``)."""
    from harness import image as _image

    results: dict[str, dict[str, Any]] = {}
    lock = threading.Lock()
    store = ResultStore(_image.cache_dir() / "preflight")  # shared by every run on this machine

    def work(s: Session):
        r = _preflight_cached(s, image, start, oracle, store)
        with lock:
            results[s.session_id] = r

    _execute([(s,) for s in sessions], work, workers, threading.Event(), progress, "preflight")
    return results


def _execute(jobs: list[tuple], work, workers: int, stop: threading.Event, progress: bool, what: str) -> None:
    """Run jobs on a thread pool with a progress bar; Ctrl-C stops intake and reaps containers."""
    if not jobs:
        return
    from tqdm import tqdm

    bar = tqdm(total=len(jobs), desc=what, unit="job", disable=not progress, leave=False)
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
        from harness.sandbox import _docker

        _docker._reap_own()  # kill this process's containers now; running episodes then end fast
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        bar.close()
