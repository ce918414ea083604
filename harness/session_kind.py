"""The session-replay suite kind: each (session, agent, sample) is an episode of the replay loop in
a fresh sandbox, scored by Path Accuracy@1..k, pass@k, path match and cursor error.

Every reference is replayed first (the preflight, cached per session content, image and grading
code): a session whose reference does not reach green is ``reference_broken`` and left out of the
denominators. One row per episode is appended to ``<out>/results.jsonl`` as soon as it is done,
by this process, whichever executor ran the episode (harness/executors: the jobs are picklable
specs, and a ``SessionRecipe`` lets another machine open the same suite, agents and sandbox).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import executors, metrics
from harness.agents import AgentContext, check_plan, from_spec
from harness.errors import InputError
from harness.executors import Batch, ShippedFolder
from harness.loop import preflight, run_episode
from harness.records import NON_TERMINAL, SCHEMA_VERSION
from harness.results import ResultStore, cache_key, write_json_atomic
from harness.runner import at_least_one
from harness.sessions import DEFAULTS, Session, Suite, load_suite
from harness.suite_kinds import SUITE_KINDS, RunSettings, extra_metrics, pass_ks


class SessionKind:
    """Replayed IDE sessions (a suite folder with sessions.jsonl, or a bundled suite's name)."""

    name = "sessions"
    remote_jobs = True  # preflights and episodes are Batches: any executor runs them
    metrics = (
        "path_accuracy",
        "pass_at_k",
        "path_match",
        "steps_to_green",
        "cursor",
        "invalid_actions",
        "tamper_rate",
        "special_case_rate",
        "n_infra_error",
        "n_skipped_budget",
        "reference_broken",
    )

    def claims(self, suite: object) -> bool:
        return isinstance(
            suite, (str, Path, Suite)
        )  # the last resort: load_suite names what is wrong

    def open(self, suite: object, agents: Sequence[str], settings: RunSettings) -> OpenSessions:
        from harness.sandbox import require_kind

        st = suite if isinstance(suite, Suite) else load_suite(suite)
        k = at_least_one(
            "k", st.defaults.get("k", DEFAULTS["k"]) if settings.k is None else settings.k
        )
        max_steps = at_least_one(
            "max_steps",
            st.defaults.get("max_steps", DEFAULTS["max_steps"])
            if settings.max_steps is None
            else settings.max_steps,
        )
        if max_steps < k:
            raise InputError(f"max_steps must be at least k (got max_steps={max_steps}, k={k})")
        sessions = list(st.sessions)
        if settings.session_ids:
            wanted = set(settings.session_ids)
            unknown = sorted(wanted - {s.session_id for s in sessions})
            if unknown:
                raise InputError(f"unknown session id(s): {', '.join(unknown)}", where="--session")
            sessions = [s for s in sessions if s.session_id in wanted]
        require_kind(settings.sandbox)
        ctx = AgentContext(st, dict(settings.options))
        agent_objs = []
        try:
            for spec in agents:  # bad specs fail before anything runs
                agent_objs.append(from_spec(spec, ctx))
                ids = [s.session_id for s in sessions]
                check_plan(
                    agent_objs[-1], ids, settings.samples, allow_missing=settings.allow_missing
                )
        except BaseException:
            for a in agent_objs:
                a.close()
            raise
        return OpenSessions(st, sessions, agent_objs, ctx, k, max_steps, settings)

    def table(self, summary: dict[str, Any]) -> str:
        from harness.tables import session_table

        return session_table(summary)


@dataclass
class OpenSessions:
    suite: Suite
    sessions: list[Session]
    agents: list
    ctx: AgentContext
    k: int
    max_steps: int
    settings: RunSettings

    @property
    def name(self) -> str:
        return self.suite.name

    def run(self, out: Path) -> dict[str, Any]:
        s = self.settings
        return _run(
            self.suite,
            self.sessions,
            self.agents,
            self.ctx,
            out,
            k=self.k,
            samples=s.samples,
            max_steps=self.max_steps,
            workers=s.workers,
            sandbox=s.sandbox,
            progress=s.progress,
            executor=s.executor,
        )

    def close(self) -> None:
        for a in self.agents:
            a.close()


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

    def __init__(self, sessions, agents, oracle, prepared, *, k, max_steps, owned=()):
        self.sessions = {s.session_id: s for s in sessions}
        self.agents = {a.spec: a for a in agents}
        self.oracle, self.prepared, self.k, self.max_steps = oracle, prepared, k, max_steps
        self._owned = list(owned)  # closed with the worker: what it opened itself

    def _start(self, session: Session):
        return self.prepared.start(session.workspace)

    def run(self, job: PreflightJob | EpisodeJob) -> dict[str, Any]:
        from harness.verify import Gold

        s = self.sessions[job.session_id]
        if isinstance(job, PreflightJob):
            return preflight(s, self.oracle, start_sandbox=self._start)
        return run_episode(
            s,
            self.agents[job.agent],
            job.sample,
            start_sandbox=self._start,
            k=self.k,
            max_steps=self.max_steps,
            passing=job.passing,
            gold=Gold.from_json(job.gold),
            held_out_gold=Gold.from_json(job.held_out_gold),
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
    options: dict[str, Any]
    sandbox: str
    image: str | None
    k: int
    max_steps: int

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
            ctx = AgentContext(st, dict(self.options))
            agents = []
            for spec, fingerprint in self.agents:
                agents.append(from_spec(spec, ctx))
                owned.append(agents[-1].close)
                if agents[-1].fingerprint != fingerprint:
                    raise InputError(f"agent {spec} is not the driver's here (other weights)")
            prepared = _prepare(st, self.sandbox, slots)
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
        kw = dict(k=self.k, max_steps=self.max_steps, owned=owned)
        return SessionWorker(sessions, agents, oracle, prepared, **kw)


def _prepare(st: Suite, sandbox: str, slots: int):
    from harness.sandbox import provider

    return provider(sandbox).prepare(_limits(st), workers=slots)


def _run(
    st: Suite,
    sessions: list[Session],
    agent_objs: list,
    ctx: AgentContext,
    out: Path,
    *,
    k: int,
    samples: int,
    max_steps: int,
    workers: int,
    sandbox: str,
    progress: bool,
    executor: str,
) -> dict[str, Any]:
    from harness import grading_digest, version

    oracle = from_spec("oracle", ctx)
    store = ResultStore(out)
    keys: list[str] = []
    with executors.opened(executor, workers=workers, progress=progress) as ex:
        prepared = _prepare(st, sandbox, workers)  # the image names the rows; a pool only if used
        image = prepared.image
        local = SessionWorker(sessions, agent_objs, oracle, prepared, k=k, max_steps=max_steps)
        recipe = SessionRecipe(
            ShippedFolder(st.path),
            {s.session_id: s.content_hash for s in sessions},
            tuple((a.spec, a.fingerprint) for a in agent_objs),
            dict(ctx.options),
            sandbox,
            image,
            k,
            max_steps,
        )
        try:
            flights = _preflights(sessions, image, ex, recipe, local)
            broken = {sid: r["reason"] for sid, r in flights.items() if not r["ok"]}
            jobs, bases = [], {}
            for agent in agent_objs:
                for s in sessions:
                    for sample in range(samples):
                        key = cache_key(
                            agent.spec,
                            agent.fingerprint,
                            s.content_hash,
                            image,
                            version(),
                            grading_digest(),
                            k,
                            max_steps,
                            sample,
                        )
                        keys.append(key)
                        if store.has(key):
                            continue
                        base = {
                            "cache_key": key,
                            "suite": st.name,
                            "session_hash": s.content_hash,
                            "harness_version": version(),
                            "image": image,
                        }
                        if s.session_id in broken:
                            store.append(
                                {
                                    **base,
                                    "session_id": s.session_id,
                                    "agent": agent.spec,
                                    "sample": sample,
                                    "status": "reference_broken",
                                    "reason": broken[s.session_id],
                                    "intent": s.intent,
                                }
                            )
                            continue
                        flight = flights[s.session_id]
                        bases[key] = base
                        jobs.append(
                            EpisodeJob(
                                key,
                                s.session_id,
                                agent.spec,
                                sample,
                                tuple(flight["passing"]),
                                flight["gold"],
                                flight.get("held_out_gold"),
                            )
                        )

            def done(job: EpisodeJob, row: dict[str, Any]) -> None:
                store.append({**bases[job.key], **row})

            ex.map(Batch("episodes", jobs, recipe, local), done)
        finally:
            prepared.cleanup()

    rows = store.rows(keys)
    summary = {
        "schema_version": SCHEMA_VERSION,
        "kind": KIND.name,
        "suite": st.name,
        "k": k,
        "max_steps": max_steps,
        "samples": samples,
        "image": image,
        "harness_version": version(),
        "n_sessions": len(sessions),
        # what reports/_complete.py holds the rows to: the sessions this command ran, and every
        # session of the suite by content (a row of none of them is not this suite's)
        "sessions": [x.session_id for x in sessions],
        "suite_sessions": {x.session_id: x.content_hash for x in st.sessions},
        "out": str(store.dir),
        "agents": {
            spec: _agent_summary([r for r in rows if r["agent"] == spec], k=k, ks=pass_ks(samples))
            for spec in [a.spec for a in agent_objs]
        },
        "complete": all(r.get("status") not in NON_TERMINAL for r in rows)
        and len(rows) == len(keys),
    }
    write_json_atomic(store.dir / "summary.json", summary)
    return summary


def _agent_summary(rows: list[dict[str, Any]], *, k: int, ks: list[int]) -> dict[str, Any]:
    summary = metrics.summarize(rows, k=k, ks=ks)
    extra = extra_metrics([r for r in rows if r.get("status") != "reference_broken"], k=k)
    return {**summary, "metrics": extra} if extra else summary


def _limits(suite: Suite | None = None):
    """The sandbox profile of a run: with what the suite declares (env, read-only node_modules)."""
    from harness.sandbox import Limits
    from harness.suite_build.deps import sandbox_limits

    limits = Limits(memory_mb=1024, timeout_s=30)
    return limits if suite is None else sandbox_limits(suite, limits)


def local_preflights(
    st: Suite, *, sandbox: str = "docker", workers: int = 1, progress: bool = True
) -> dict[str, dict[str, Any]]:
    """Every session's preflight row, replayed in this process (``etai suite validate --jest``):
    the same cached replays a run makes before its episodes."""
    sessions = list(st.sessions)
    prepared = _prepare(st, sandbox, workers)
    try:
        oracle = from_spec("oracle", AgentContext(st, {}))
        local = SessionWorker(sessions, [], oracle, prepared, k=0, max_steps=0)
        with executors.opened("local", workers=workers, progress=progress) as ex:
            return _preflights(sessions, prepared.image, ex, None, local)
    finally:
        prepared.cleanup()


def _preflights(sessions, image, ex, recipe, local) -> dict[str, dict[str, Any]]:
    """Replay every reference first (cached per session content, image and grading code); return
    each session's preflight row (``ok``/``reason``, and for sound ones ``passing`` and ``gold``)."""
    from harness import grading_digest, version
    from harness import image as _image

    store = ResultStore(_image.cache_dir() / "preflight")  # shared by every run on this machine
    keys = {
        s.session_id: cache_key("preflight", s.content_hash, image, version(), grading_digest())
        for s in sessions
    }
    results = {sid: store.rows([key])[0] for sid, key in keys.items() if store.has(key)}
    lock = threading.Lock()

    def done(job: PreflightJob, flight: dict[str, Any]) -> None:
        row = {"cache_key": keys[job.session_id], "session_id": job.session_id, **flight}
        store.append(row)
        with lock:
            results[job.session_id] = row

    jobs = [PreflightJob(sid) for sid in keys if sid not in results]
    ex.map(Batch("preflight", jobs, recipe, local), done)
    return results


KIND = SUITE_KINDS.register("sessions", SessionKind(), description=SessionKind.__doc__)
