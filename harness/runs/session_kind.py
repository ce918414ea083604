"""The session-replay suite kind: each (session, agent, sample) is an episode of the replay loop in
a fresh sandbox, scored by Path Accuracy@1..k, pass@k, path match and cursor error.

Every reference is replayed first (the preflight, cached per session content, image and grading
code): a session whose reference does not reach green is ``reference_broken`` and left out of the
denominators. One row per episode is appended to ``<out>/results.jsonl`` as soon as it is done,
by this process, whichever executor ran the episode (the jobs, the worker and the recipe another
machine opens them from are in harness/runs/session_jobs.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.agents import AgentContext, check_plan, from_spec
from harness.base.errors import InputError
from harness.base.provenance import grading_digest, version
from harness.base.tables import session_table
from harness.runs import executors, metrics
from harness.runs.executors import Batch, ShippedFolder
from harness.runs.results import ResultStore, cache_key, write_json_atomic
from harness.runs.runner import at_least_one
from harness.runs.session_jobs import EpisodeJob, SessionRecipe, SessionWorker, preflights, prepare
from harness.sandbox import require_kind
from harness.session.model import Session, Suite
from harness.session.records import NON_TERMINAL, SCHEMA_VERSION
from harness.session.window import Window
from harness.suites.kinds import SUITE_KINDS, RunSettings, extra_metrics, pass_ks
from harness.suites.load import DEFAULTS, load_suite


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
        "incomplete_rate",
        "n_infra_error",
        "n_skipped_budget",
        "reference_broken",
    )

    def claims(self, suite: object) -> bool:
        return isinstance(
            suite, (str, Path, Suite)
        )  # the last resort: load_suite names what is wrong

    def open(self, suite: object, agents: Sequence[str], settings: RunSettings) -> OpenSessions:
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
        window = None
        if settings.fix_window:
            sessions, window = _windowed(st, sessions, settings.fix_window)
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
        resolved = dataclasses.replace(settings, k=k, max_steps=max_steps)
        return OpenSessions(st, sessions, agent_objs, ctx, resolved, window)

    def table(self, summary: dict[str, Any]) -> str:
        return session_table(summary)


@dataclass
class OpenSessions:
    suite: Suite
    sessions: list[Session]
    agents: list
    ctx: AgentContext
    settings: RunSettings  # k and max_steps resolved against the suite's defaults
    window: dict[str, Any] | None = None  # --since/--until and what they left out (summary.json)

    @property
    def name(self) -> str:
        return self.suite.name

    def run(self, out: Path) -> dict[str, Any]:
        return _run(self, out)

    def close(self) -> None:
        for a in self.agents:
            a.close()


def _windowed(st: Suite, sessions: list[Session], w: Window) -> tuple[list[Session], dict]:
    """The sessions fixed inside ``w``, and what the summary says of the window; InputError when
    none is (a run of nothing is never a pass)."""
    got = w.pick(sessions, lambda s: s.fix_date, lambda s: f"session {s.session_id}")
    undated = [s.session_id for s in got.undated]
    if not got.kept:
        raise InputError(
            f"no session of {st.name} was {w.describe()} ({len(got.outside)} outside the window, "
            f"{len(undated)} without a fix date)",
            where="--since/--until",
        )
    return got.kept, {
        "since": str(w.since) if w.since else None,
        "until": str(w.until) if w.until else None,
        "kept": len(got.kept),
        "outside": len(got.outside),
        "undated": undated,
    }


def _run(op: OpenSessions, out: Path) -> dict[str, Any]:
    s, st = op.settings, op.suite
    oracle = from_spec("oracle", op.ctx)
    store = ResultStore(out)
    with executors.opened(s.executor, workers=s.workers, progress=s.progress) as ex:
        prepared = prepare(
            st, s.sandbox, s.workers
        )  # the image names the rows; a pool only if used
        image = prepared.image
        local = SessionWorker(op.sessions, op.agents, oracle, prepared, s)
        recipe = SessionRecipe(
            ShippedFolder(st.path),
            {x.session_id: x.content_hash for x in op.sessions},
            tuple((a.spec, a.fingerprint) for a in op.agents),
            s,
            image,
        )
        try:
            flights = preflights(op.sessions, image, ex, recipe, local)
            keys, jobs, bases = _plan(op, store, image, flights)

            def done(job: EpisodeJob, row: dict[str, Any]) -> None:
                store.append({**bases[job.key], **row})

            ex.map(Batch("episodes", jobs, recipe, local), done)
        finally:
            prepared.cleanup()
    summary = _summary(op, store, keys, image)
    write_json_atomic(store.dir / "summary.json", summary)
    return summary


def _plan(op: OpenSessions, store: ResultStore, image: str | None, flights: dict[str, dict]):
    """Every episode's cache key; the jobs of those not stored yet, with their rows' common fields
    (by key); a session whose reference is broken gets its rows now instead of jobs."""
    s = op.settings
    broken = {sid: r["reason"] for sid, r in flights.items() if not r["ok"]}
    keys: list[str] = []
    jobs: list[EpisodeJob] = []
    bases: dict[str, dict[str, Any]] = {}
    for agent in op.agents:
        for session in op.sessions:
            for sample in range(s.samples):
                key = cache_key(
                    agent.spec,
                    agent.fingerprint,
                    session.content_hash,
                    image,
                    version(),
                    grading_digest(),
                    s.k,
                    s.max_steps,
                    sample,
                    s.regression,
                )
                keys.append(key)
                if store.has(key):
                    continue
                base = {
                    "cache_key": key,
                    "suite": op.suite.name,
                    "session_hash": session.content_hash,
                    "harness_version": version(),
                    "image": image,
                    # what reports cluster by and window on (reports/_structure.py)
                    **{f: v for f in ("project", "fix_date") if (v := getattr(session, f))},
                }
                sid = session.session_id
                if sid in broken:
                    store.append(
                        {
                            **base,
                            "session_id": sid,
                            "agent": agent.spec,
                            "sample": sample,
                            "status": "reference_broken",
                            "reason": broken[sid],
                            "intent": session.intent,
                        }
                    )
                    continue
                flight = flights[sid]
                bases[key] = base
                jobs.append(
                    EpisodeJob(
                        key,
                        sid,
                        agent.spec,
                        sample,
                        tuple(flight["passing"]),
                        flight["gold"],
                        flight.get("held_out_gold"),
                    )
                )
    return keys, jobs, bases


def _summary(op: OpenSessions, store: ResultStore, keys: list[str], image: str | None) -> dict:
    s, st = op.settings, op.suite
    rows = store.rows(keys)
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": KIND.name,
        "suite": st.name,
        "k": s.k,
        "max_steps": s.max_steps,
        "samples": s.samples,
        "regression": s.regression,
        "image": image,
        "harness_version": version(),
        "n_sessions": len(op.sessions),
        # what reports/_complete.py holds the rows to: the sessions this command ran, and every
        # session of the suite by content (a row of none of them is not this suite's)
        "sessions": [x.session_id for x in op.sessions],
        **({"fix_window": op.window} if op.window else {}),
        "suite_sessions": {x.session_id: x.content_hash for x in st.sessions},
        "out": str(store.dir),
        "agents": {
            spec: _agent_summary(
                [r for r in rows if r["agent"] == spec], k=s.k, ks=pass_ks(s.samples)
            )
            for spec in [a.spec for a in op.agents]
        },
        "complete": all(r.get("status") not in NON_TERMINAL for r in rows)
        and len(rows) == len(keys),
    }


def _agent_summary(rows: list[dict[str, Any]], *, k: int, ks: list[int]) -> dict[str, Any]:
    summary = metrics.summarize(rows, k=k, ks=ks)
    extra = extra_metrics([r for r in rows if r.get("status") != "reference_broken"], k=k)
    return {**summary, "metrics": extra} if extra else summary


KIND = SUITE_KINDS.register("sessions", SessionKind(), description=SessionKind.__doc__)
