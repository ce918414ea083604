"""The jobs of a session run and what turns them into rows: a preflight (the reference replayed
once per session, cached per content, image and grading code) and an episode per (session, agent,
sample); the ``SessionWorker`` that runs them wherever the executor placed them, and the
``SessionRecipe`` from which a Ray node opens the same worker (harness/runs/executors).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from harness.agents import AgentContext, from_spec
from harness.base import speed
from harness.base.errors import InputError
from harness.base.provenance import grading_digest, version
from harness.grading.verify import Gold
from harness.runs import executors
from harness.runs.executors import Batch, ShippedFolder
from harness.runs.loop import preflight, run_episode
from harness.runs.results import ResultStore, cache_key
from harness.sandbox import Limits, provider
from harness.sandbox import image as _image
from harness.sandbox.deps import sandbox_limits
from harness.session.model import Session, Suite
from harness.suites.kinds import RunSettings
from harness.suites.load import load_suite


@dataclass(frozen=True)
class PreflightJob:
    session_id: str


@dataclass(frozen=True)
class EpisodeJob:
    key: str  # its row's cache key: the driver adds the run's bookkeeping to the row by it
    session_id: str
    agent: str  # the agent's spec
    sample: int
    passing: tuple[str, ...]  # what the session's preflight measured (loop.run_episode)
    gold: dict[str, Any]
    held_out_gold: dict[str, Any] | None = None  # a session with held-out tests


class SessionWorker:
    """Turns session jobs into rows in the process that holds it: the driver's own (the local
    executor: the run's agents and sandbox pool) or one a Ray node opened from a SessionRecipe."""

    def __init__(self, sessions, agents, oracle, prepared, settings: RunSettings, *, owned=()):
        self.sessions = {s.session_id: s for s in sessions}
        self.agents = {a.spec: a for a in agents}
        self.oracle, self.prepared, self.settings = oracle, prepared, settings
        self._owned = list(owned)  # closed with the worker: what it opened itself

    def _start(self, session: Session):
        return self.prepared.start(session.workspace)

    def run(self, job: PreflightJob | EpisodeJob) -> dict[str, Any]:
        s = self.sessions[job.session_id]
        if isinstance(job, PreflightJob):
            return preflight(
                s, self.oracle, start_sandbox=self._start, regression=self.settings.regression
            )
        return run_episode(
            s,
            self.agents[job.agent],
            job.sample,
            start_sandbox=self._start,
            k=self.settings.k,
            max_steps=self.settings.max_steps,
            passing=job.passing,
            gold=Gold.from_json(job.gold),
            held_out_gold=Gold.from_json(job.held_out_gold),
            regression=self.settings.regression,
        )

    def close(self) -> None:
        for close in reversed(self._owned):
            close()


@dataclass(frozen=True)
class SessionRecipe:
    """What a Ray node needs to open its SessionWorker; checked there against the driver's run."""

    suite: ShippedFolder
    hashes: dict[str, str]  # session id -> content hash on the driver
    agents: tuple[tuple[str, str], ...]  # (spec, fingerprint) on the driver
    settings: RunSettings  # the driver's, with k and max_steps resolved
    image: str | None

    def open(self, *, slots: int) -> SessionWorker:
        owned: list = [self.suite.remove]
        try:
            st = load_suite(self.suite.path())
            sessions = [s for s in st.sessions if s.session_id in self.hashes]
            differ = sorted(
                set(self.hashes)
                - {s.session_id for s in sessions if s.content_hash == self.hashes[s.session_id]}
            )
            if differ:
                raise InputError(f"sessions differ from the driver's here: {', '.join(differ)}")
            ctx = AgentContext(st, dict(self.settings.options))
            agents = []
            for spec, fingerprint in self.agents:
                agents.append(from_spec(spec, ctx))
                owned.append(agents[-1].close)
                if agents[-1].fingerprint != fingerprint:
                    raise InputError(f"agent {spec} is not the driver's here (other weights)")
            prepared = prepare(st, self.settings.sandbox, slots)
            owned.append(prepared.cleanup)
            if prepared.image != self.image:
                raise InputError(
                    f"the sandbox image here is {prepared.image}, the driver's {self.image}: "
                    "install the same etai on every node"
                )
            oracle = from_spec("oracle", ctx)
        except BaseException:
            for close in reversed(owned):
                close()
            raise
        return SessionWorker(sessions, agents, oracle, prepared, self.settings, owned=owned)


def prepare(st: Suite, sandbox: str, slots: int):
    """The sandbox backend prepared for a run of ``st`` with ``slots`` episodes at once."""

    return provider(sandbox).prepare(sandbox_profile(st), workers=slots)


def sandbox_profile(suite: Suite | None = None):
    """The sandbox profile of a run: with what the suite declares (env, read-only node_modules)."""

    limits = Limits(memory_mb=1024, timeout_s=30)
    return limits if suite is None else sandbox_limits(suite, limits)


def local_preflights(
    st: Suite,
    *,
    sandbox: str = "docker",
    workers: int = 1,
    progress: bool = True,
    regression: str = "related",
) -> dict[str, dict[str, Any]]:
    """Every session's preflight row, replayed in this process (``etai suite validate --jest``):
    the same cached replays a run makes before its episodes, for ``regression``'s graded runs."""
    sessions = list(st.sessions)
    prepared = prepare(st, sandbox, workers)
    try:
        oracle = from_spec("oracle", AgentContext(st, {}))
        settings = RunSettings(  # no episodes
            workers=workers, k=0, max_steps=0, sandbox=sandbox, regression=regression
        )
        local = SessionWorker(sessions, [], oracle, prepared, settings)
        with executors.opened("local", workers=workers, progress=progress) as ex:
            return preflights(sessions, prepared.image, ex, None, local)
    finally:
        prepared.cleanup()


def preflight_key(session: Session, image: str, regression: str) -> str:
    """What a preflight's verdict depends on: the session, image, etai version, grading code,
    regression mode, and the runs it makes (harness/runs/loop.py ``preflight``): what its baseline,
    the reference's intermediate and final workspaces and its second run run (speed paths
    ``base_baseline``, ``verification_first``, ``unchanged_final`` and ``verification_rerun``)."""
    rerun = "verification" if speed.on("verification_rerun") else "whole"
    baseline = "base" if speed.on("base_baseline") else "whole"
    first = "verification" if speed.on("verification_first") else "whole"
    final = "kept" if speed.on("unchanged_final") else "again"
    return cache_key(
        "preflight",
        session.content_hash,
        image,
        version(),
        grading_digest(),
        regression,
        f"rerun:{rerun}",
        f"baseline:{baseline}",
        f"first:{first}",
        f"final:{final}",
    )


def preflights(sessions, image, ex, recipe, local) -> dict[str, dict[str, Any]]:
    """Replay every reference first (cached per session content, image and grading code); return
    each session's preflight row (``ok``/``reason``, and for sound ones ``passing`` and ``gold``).
    The regression mode is part of the key: a reference green on its related tests may regress
    another; so are the runs the preflight makes (``preflight_key``: speed paths ``base_baseline``,
    ``verification_first``, ``unchanged_final`` and ``verification_rerun``)."""

    # Shared by every run on this machine; with the ``preflight_cache`` speed path off
    # (harness/base/speed.py) none is read or written: every preflight is replayed.
    store = ResultStore(_image.cache_dir() / "preflight") if speed.on("preflight_cache") else None
    keys = {s.session_id: preflight_key(s, image, local.settings.regression) for s in sessions}
    results = {
        sid: store.rows([key])[0]
        for sid, key in keys.items()
        if store is not None and store.has(key)
    }
    lock = threading.Lock()

    def done(job: PreflightJob, flight: dict[str, Any]) -> None:
        row = {"cache_key": keys[job.session_id], "session_id": job.session_id, **flight}
        if store is not None:
            store.append(row)
        with lock:
            results[job.session_id] = row

    jobs = [PreflightJob(sid) for sid in keys if sid not in results]
    ex.map(Batch("preflight", jobs, recipe, local), done)
    return results
