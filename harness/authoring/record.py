"""`etai suite record`: run each session's reference actions in the sandbox and write the real
``execution_result``s back into ``sessions.jsonl``, so recorded results are what the harness returns.

The file is rewritten atomically (temp file + rename); every other field and the line order stay.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from harness import tools
from harness.base.errors import InfraError
from harness.runs.results import write_text_atomic
from harness.sandbox import Limits, provider
from harness.sandbox.deps import sandbox_limits
from harness.session.model import Session
from harness.suites.load import load_suite


def record_session(session: Session, start_sandbox: Callable[[Session], object]) -> list[dict]:
    """The reference trace with each step's execution_result replaced by what the tool returns now."""
    sb = start_sandbox(session)
    try:
        raw = [dataclasses.asdict(st) for st in session.execution_trace]
        return replay_steps(sb, raw, where=session.session_id)
    finally:
        sb.close()


def replay_steps(sb, steps: list[dict], *, where: str = "") -> list[dict]:
    """``steps`` (trace steps as dicts) run in ``sb``, each with its real execution_result."""
    out = []
    for st in steps:
        r = tools.call(sb, st["tool_called"], dict(st["tool_args"]))
        if r.status == "infra_error":
            raise InfraError(f"{where} step {st['step']}: {r.error}")
        result = r.to_dict()
        # Timing noise would change the session's hash on every record.
        result.pop("duration_s", None)
        out.append({**st, "execution_result": result})
    return out


def record_suite(path: str | Path, *, sandbox: str = "docker", workers: int = 1, log=print) -> int:
    """Record every session, ``workers`` at a time (each in its own sandbox); nothing is written
    unless every session was recorded."""

    suite = load_suite(path)
    prepared = provider(sandbox).prepare(sandbox_limits(suite, Limits()), workers=workers)
    traces = {}
    try:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="etai-record") as ex:
            jobs = {
                ex.submit(record_session, s, lambda sess: prepared.start(sess.workspace)): s
                for s in suite.sessions
            }
            try:
                for job in as_completed(jobs):
                    sid = jobs[job].session_id
                    traces[sid] = job.result()
                    log(f"recorded {sid}: {len(traces[sid])} steps ({len(traces)}/{len(jobs)})")
            except BaseException:
                ex.shutdown(cancel_futures=True)  # the sessions not started yet are not started
                raise
    finally:
        prepared.cleanup()
    jl = suite.path / "sessions.jsonl"
    lines = []
    for line in jl.read_text(encoding="utf-8").splitlines():
        if line.strip():
            obj = json.loads(line)
            obj["execution_trace"] = traces[obj["session_id"]]
            line = json.dumps(obj, ensure_ascii=False)
        lines.append(line)
    write_text_atomic(jl, "\n".join(lines) + "\n")
    return len(traces)
