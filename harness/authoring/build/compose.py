"""A kept mutant written as a session a developer could have had: the instruction names the failing
test and its first failure line (templates per intent), the IDE shows the failing test with the
cursor on the failing assertion (from the stack trace) and the mutated source, and the reference
runs the failing test file, reads the source and reverts the mutation with ``file_edit``."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from harness.authoring.build.mutants import WHAT, Mutant
from harness.session.model import first_difference, line_and_column

TEMPLATES: dict[str, tuple[str, ...]] = {
    "fix_test_failure": (
        "'{test}' in {test_file} fails: {message}. The test is right; can you fix {source}?",
        "{test_file} went red after my last change: '{test}' says {message}. Please fix the code, "
        "not the test.",
        "Can you look at '{test}'? It fails with {message}. I think the bug is in {source}.",
    ),
    "fix_off_by_one": (
        "'{test}' ({test_file}) fails with {message}. Smells like an off-by-one in {source}; "
        "can you fix it?",
        "Something is off by one in {source}: '{test}' in {test_file} reports {message}.",
    ),
    "fix_date_handling": (
        "Dates come out wrong: '{test}' in {test_file} fails with {message}. Can you fix the date "
        "handling in {source}?",
        "'{test}' fails ({message}); I suspect a month or time-zone slip in {source}.",
    ),
    "fix_async_bug": (
        "'{test}' in {test_file} fails with {message}; looks like something async is not awaited "
        "in {source}. Can you fix it?",
    ),
    "refactor_function_signature": (
        "'{test}' ({test_file}) fails with {message}. I think a call in {source} passes its "
        "arguments in the wrong order; please fix it.",
        "After the signature shuffle, '{test}' in {test_file} reports {message}. Fix the call in "
        "{source}?",
    ),
    "debug_runtime_error": (
        "'{test}' in {test_file} blows up: {message}. Can you find the cause in {source} and fix "
        "it?",
        "Getting {message} from '{test}' ({test_file}). Please debug {source}.",
    ),
    "fix_error_handling": (
        "An error gets swallowed somewhere: '{test}' in {test_file} fails with {message}. Can you "
        "fix the error handling in {source}?",
        "'{test}' expects an error that never comes ({message}). Please fix {source}.",
    ),
    "fix_regex": (
        "'{test}' in {test_file} fails with {message}; I think a regular expression in {source} "
        "matches the wrong thing. Can you fix it?",
    ),
    "fix_data_mutation": (
        "'{test}' ({test_file}) fails with {message}. Something in {source} seems to change its "
        "input in place instead of copying it; can you fix that?",
    ),
    "fix_module_export": (
        "'{test}' in {test_file} fails with {message}. Did something drop out of the exports in "
        "{source}? Please fix it.",
    ),
}


@dataclass(frozen=True)
class Failure:
    """The failing test a session is about: its file, name, first failure line, assertion site."""

    test_file: str
    test: str
    message: str
    line: int
    column: int


def assertion_site(messages: list[str], test_file: str, workspace: str) -> tuple[int, int]:
    """The first stack frame in ``test_file`` (the failing assertion, or the call that threw), or 1:1."""
    m = re.search(
        re.escape(f"{workspace.rstrip('/')}/{test_file}") + r":(\d+):(\d+)", "\n".join(messages)
    )
    return (int(m.group(1)), int(m.group(2))) if m else (1, 1)


def snippets(text: str, m: Mutant) -> tuple[str, str]:
    """(old, new): whole lines around the mutation, grown until ``old`` occurs once in the original
    and ``new`` once in the mutated text, so both the session's patch and the fix are unambiguous."""
    mutated = m.apply(text)
    lines = text.split("\n")
    first = text.count("\n", 0, m.start)
    last = text.count("\n", 0, max(m.start, m.end - 1))
    delta = len(mutated) - len(text)
    while True:
        a = sum(len(x) + 1 for x in lines[:first])
        b = sum(len(x) + 1 for x in lines[: last + 1]) - 1
        old, new = text[a:b], mutated[a : b + delta]
        if (text.count(old) == 1 and mutated.count(new) == 1) or (
            first == 0 and last >= len(lines) - 1
        ):
            return old, new
        first, last = max(0, first - 1), min(len(lines) - 1, last + 1)


def fix_site(text: str, m: Mutant) -> dict[str, int]:
    """Line and column (1-based) in the mutated file of the first character the fix changes, by the
    rule harness.runs.loop.edit_cursor scores an agent's edit with. The mutated node may start earlier
    (a flipped `a && b` starts at `a`, the fix at `&&`), which cost the reference 9 columns."""
    mutated = m.apply(text)
    line, column = line_and_column(mutated, first_difference(mutated, text))
    return {"line": line, "column": column}


def session(
    project: str, m: Mutant, text: str, failures: list[Failure], rng: random.Random
) -> dict:
    """The session record (its execution_results are filled in by the build's recording)."""
    f = failures[0]
    src = m.file
    template = rng.choice(TEMPLATES[m.intent])
    message = f'"{f.message}"' if f.message else "an error"
    instruction = template.format(test=f.test, test_file=f.test_file, message=message, source=src)
    old, new = snippets(text, m)
    test_files = sorted({x.test_file for x in failures})
    what = WHAT[m.operator]
    slug = re.sub(r"[^a-z0-9]+", "-", src.rsplit("/", 1)[-1].rsplit(".", 1)[0].lower()).strip("-")
    return {
        "session_id": f"{project}-{slug}-{m.operator.replace('_', '-')}-{m.line}-{m.id[:6]}",
        "intent": m.intent,
        "user_instruction": instruction,
        "workspace": {"base": "base", "patch": [{"file": src, "old": old, "new": new}]},
        "ide_context": {
            "open_files": [f.test_file, src],
            "cursor_position": {"file": f.test_file, "line": f.line, "column": f.column},
            "git_status": "clean",
            "viewport": {"scroll_top_line": max(0, f.line - 12)},
        },
        "execution_trace": [
            {
                "step": 1,
                "tool_called": "jest_run",
                "tool_args": {"test_file": f.test_file},
                "execution_result": {},
            },
            {
                "step": 2,
                "tool_called": "file_read",
                "tool_args": {"file": src},
                "execution_result": {},
            },
            {
                "step": 3,
                "tool_called": "file_edit",
                "tool_args": {"file": src, "old": new, "new": old},
                "execution_result": {},
            },
        ],  # fmt: skip
        "final_output": f"Restored the {what} in {src} (line {m.line}); {f.test_file} passes again.",
        "verify": {"test_files": test_files},
        "cursor_target": {"file": src, **fix_site(text, m), "placement": "before"},
        "mutation": {"operator": m.operator, "id": m.id, "function": m.fn},
    }
