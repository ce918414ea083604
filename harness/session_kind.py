"""The session-replay suite kind: each (session, agent, sample) is an episode of the replay loop in
a fresh sandbox, scored by Path Accuracy@1..k, pass@k, path match and cursor error.

Every reference is replayed first (the preflight, cached per session content, image and grading
code): a session whose reference does not reach green is ``reference_broken`` and left out of the
denominators. One row per episode is appended to ``<out>/results.jsonl`` as soon as it is done.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import metrics
from harness.agents import AgentContext, from_spec
from harness.errors import InputError
from harness.loop import preflight, run_episode
from harness.records import SCHEMA_VERSION
from harness.results import ResultStore, cache_key, write_json_atomic
from harness.runner import at_least_one, execute
from harness.sessions import Session, Suite, load_suite
from harness.suite_kinds import SUITE_KINDS, RunSettings, extra_metrics, pass_ks


class SessionKind:
    """Replayed IDE sessions (a suite folder with sessions.jsonl, or a bundled suite's name)."""

    name = "sessions"
    metrics = (
        "path_accuracy",
        "pass_at_k",
        "path_match",
        "steps_to_green",
        "cursor",
        "invalid_actions",
        "tamper_rate",
        "n_infra_error",
        "reference_broken",
    )

    def claims(self, suite: object) -> bool:
        return isinstance(
            suite, (str, Path, Suite)
        )  # the last resort: load_suite names what is wrong

    def open(self, suite: object, agents: Sequence[str], settings: RunSettings) -> OpenSessions:
        from harness.sandbox import require_kind

        st = suite if isinstance(suite, Suite) else load_suite(suite)
        k = at_least_one("k", st.defaults.get("k", 3) if settings.k is None else settings.k)
        max_steps = at_least_one(
            "max_steps",
            st.defaults.get("max_steps", 10) if settings.max_steps is None else settings.max_steps,
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
        )

    def close(self) -> None:
        for a in self.agents:
            a.close()


def _preflight_cached(
    session: Session, image: str | None, start, oracle, store: ResultStore
) -> dict[str, Any]:
    from harness import grading_digest, version

    key = cache_key("preflight", session.content_hash, image, version(), grading_digest())
    if store.has(key):
        return store.rows([key])[0]
    row = {
        "cache_key": key,
        "session_id": session.session_id,
        **preflight(session, oracle, start_sandbox=start),
    }
    store.append(row)
    return row


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
) -> dict[str, Any]:
    from harness import grading_digest, version
    from harness.sandbox import provider
    from harness.verify import Gold

    oracle = from_spec("oracle", ctx)
    store = ResultStore(out)
    prepared = provider(sandbox).prepare(_limits(), workers=workers)
    image = prepared.image

    def start(session: Session):
        return prepared.start(session.workspace)

    stop = threading.Event()
    keys: list[str] = []
    try:
        flights = _preflights(sessions, image, start, oracle, workers, progress)
        broken = {sid: r["reason"] for sid, r in flights.items() if not r["ok"]}
        jobs = []
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
                    jobs.append((agent, s, sample, base))

        def work(agent, s, sample, base):
            if stop.is_set():
                return
            flight = flights[s.session_id]
            row = run_episode(
                s,
                agent,
                sample,
                start_sandbox=start,
                k=k,
                max_steps=max_steps,
                passing=flight["passing"],
                gold=Gold.from_json(flight["gold"]),
            )
            if not stop.is_set():  # after Ctrl-C a killed sandbox is not the agent's result
                store.append({**base, **row})

        execute(jobs, work, workers, stop, progress, "episodes")
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
        "out": str(store.dir),
        "agents": {
            spec: _agent_summary([r for r in rows if r["agent"] == spec], k=k, ks=pass_ks(samples))
            for spec in [a.spec for a in agent_objs]
        },
        "complete": all(r.get("status") != "infra_error" for r in rows) and len(rows) == len(keys),
    }
    write_json_atomic(store.dir / "summary.json", summary)
    return summary


def _agent_summary(rows: list[dict[str, Any]], *, k: int, ks: list[int]) -> dict[str, Any]:
    summary = metrics.summarize(rows, k=k, ks=ks)
    extra = extra_metrics([r for r in rows if r.get("status") != "reference_broken"], k=k)
    return {**summary, "metrics": extra} if extra else summary


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

    execute([(s,) for s in sessions], work, workers, threading.Event(), progress, "preflight")
    return results


KIND = SUITE_KINDS.register("sessions", SessionKind(), description=SessionKind.__doc__)
