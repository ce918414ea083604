"""Candidate mutants of a project's source: found by mutate.js on @babel/parser's syntax tree (run
with the host's node on the project's text only), mapped to intent labels, deduplicated, and put
in a seeded order that cycles through the operators so that a small suite still mixes them."""

from __future__ import annotations

import hashlib
import json
import random
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from harness.grading.cases import parse_with
from harness.grading.verify import is_protected

MUTATE_JS = Path(__file__).with_name("mutate.js")
SOURCE_EXT = (".js", ".cjs", ".mjs", ".ts")
MAX_SOURCE_BYTES = 200_000

# Each operator and the intent label a session made from it carries (harness/session/intents.py).
OPERATORS: dict[str, str] = {
    "negate_condition": "fix_test_failure",
    "flip_logical": "fix_test_failure",
    "negate_equality": "fix_test_failure",
    "strict_equality": "fix_test_failure",
    "wrong_default": "fix_test_failure",
    "boundary": "fix_off_by_one",
    "off_by_one": "fix_off_by_one",
    "loop_bound": "fix_off_by_one",
    "month_index": "fix_date_handling",
    "date_utc": "fix_date_handling",
    "remove_await": "fix_async_bug",
    "swap_arguments": "refactor_function_signature",
    "drop_return": "debug_runtime_error",
    "drop_null_guard": "debug_runtime_error",
    "swallow_error": "fix_error_handling",
    "regex_anchor": "fix_regex",
    "regex_escape": "fix_regex",
    "mutate_in_place": "fix_data_mutation",
    "wrong_export": "fix_module_export",
}
# What the reference fix restores, in a developer's words (final_output).
WHAT = {
    "negate_condition": "condition",
    "flip_logical": "logical operator",
    "negate_equality": "comparison",
    "strict_equality": "strict comparison",
    "wrong_default": "default value",
    "boundary": "boundary comparison",
    "off_by_one": "offset",
    "loop_bound": "loop bound",
    "month_index": "month offset",
    "date_utc": "UTC date accessor",
    "remove_await": "await",
    "swap_arguments": "argument order",
    "drop_return": "return",
    "drop_null_guard": "null guard",
    "swallow_error": "throw",
    "regex_anchor": "regex anchor",
    "regex_escape": "regex escape",
    "mutate_in_place": "copy (it mutated its input in place)",
    "wrong_export": "export",
}


@dataclass(frozen=True)
class Mutant:
    file: str
    start: int  # offsets into the file's text
    end: int
    new: str
    operator: str
    line: int  # 1-based, of the mutated span's start
    column: int
    fn: str | None  # enclosing function, for the per-function cap

    @property
    def id(self) -> str:
        key = json.dumps([self.file, self.start, self.end, self.new])
        return hashlib.sha256(key.encode()).hexdigest()[:10]

    @property
    def intent(self) -> str:
        return OPERATORS[self.operator]

    def apply(self, text: str) -> str:
        return text[: self.start] + self.new + text[self.end :]


def source_files(base: Path, src: list[str]) -> dict[str, str]:
    """The project's source files under ``src`` (folders or files), as {path: text}; tests excluded."""

    out: dict[str, str] = {}
    for s in src:
        p = base / s
        paths = [p] if p.is_file() else sorted(p.rglob("*")) if p.is_dir() else []
        for f in paths:
            rel = f.relative_to(base).as_posix()
            if (
                f.is_file()
                and f.suffix in SOURCE_EXT
                and not f.name.endswith(".d.ts")
                and "node_modules" not in f.parts
                and not is_protected(rel)
                and f.stat().st_size <= MAX_SOURCE_BYTES
            ):
                out[rel] = f.read_text(encoding="utf-8")
    return out


def find(files: dict[str, str]) -> tuple[list[Mutant], int]:
    """Every candidate that parses, deduplicated by mutated text; and how many did not parse."""
    found: dict[str, Mutant] = {}
    unparsed = 0
    for c in parse_with(MUTATE_JS, files):
        if not c.pop("parses"):
            unparsed += 1
            continue
        m = Mutant(**c)
        text = m.apply(files[m.file])
        found.setdefault(hashlib.sha256((m.file + "\0" + text).encode()).hexdigest(), m)
    return list(found.values()), unparsed


def ordered(mutants: list[Mutant], seed: int) -> list[Mutant]:
    """A seeded shuffle, then one of each operator in turn (operators with many sites, such as
    negated conditions, would otherwise fill a small suite on their own)."""
    rng = random.Random(seed)
    by_op: dict[str, list[Mutant]] = defaultdict(list)
    for m in sorted(mutants, key=lambda m: m.id):
        by_op[m.operator].append(m)
    for ms in by_op.values():
        rng.shuffle(ms)
    ops = sorted(by_op)
    rng.shuffle(ops)
    out: list[Mutant] = []
    while any(by_op.values()):
        for op in ops:
            if by_op[op]:
                out.append(by_op[op].pop())
    return out
