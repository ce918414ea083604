"""A real fix written as a session: its hunks as ``file_edit`` steps, the cursor target, the intent
and an instruction that does not give the fix away.

The instruction rule: it is written from the commit's subject and the failing tests' names and
first failure line, and holds no identifier that only the fix introduces, i.e. a word of the fix's
added lines (letters, digits, ``_`` and ``$``, three characters or more) found in no file (name
or text) of the workspace the developer starts from. A subject holding one is left out (the
instruction then says only what fails); ``leaks`` is the check, run on every instruction written.
"""

from __future__ import annotations

import difflib
import random
import re
from dataclasses import dataclass

from harness.authoring.build.compose import Failure
from harness.session.model import first_difference, line_and_column

_WORD = re.compile(r"[A-Za-z_$][\w$]{2,}")


@dataclass(frozen=True)
class Edit:
    file: str
    old: str
    new: str


def edits(file: str, before: str, after: str) -> list[Edit]:
    """The change from ``before`` to ``after`` as edits applied in order, one per hunk (changes
    within a few lines of each other are one hunk), each
    ``old`` grown by whole lines of context until it occurs once in the file as it is then (and is
    never empty: an insertion carries the line above or below it)."""
    a, b = before.split("\n"), after.split("\n")
    out = []
    for i1, i2, j1, j2 in _hunks(a, b):
        current = b[:j1] + a[i1:]  # the hunks above are applied already
        lo, hi = j1, j1 + (i2 - i1)  # the hunk's old lines in ``current``
        pre, post = 0, 0
        while True:
            old = "\n".join(current[lo - pre : hi + post])
            text = "\n".join(current)
            if old and _once(text, old):
                break
            if lo - pre == 0 and hi + post >= len(current):
                break
            if lo - pre > 0 and (pre <= post or hi + post >= len(current)):
                pre += 1
            else:
                post += 1
        new = "\n".join(current[lo - pre : lo] + b[j1:j2] + current[hi : hi + post])
        out.append(Edit(file, old, new))
    return out


# Changes this few unchanged lines apart are one edit, as one hunk of `git diff` holds them.
_GAP = 4


def _hunks(a: list[str], b: list[str]) -> list[tuple[int, int, int, int]]:
    """The changed line ranges (a[i1:i2] -> b[j1:j2]), those close together merged."""
    out: list[list[int]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        if out and i1 - out[-1][1] <= _GAP:
            out[-1][1], out[-1][3] = i2, j2
        else:
            out.append([i1, i2, j1, j2])
    return [(i1, i2, j1, j2) for i1, i2, j1, j2 in out]


def _once(text: str, old: str) -> bool:
    # Overlapping occurrences count too: "x\nx" is in "x\nx\nx" twice, str.count says once.
    at = text.find(old)
    return at >= 0 and text.find(old, at + 1) == -1


def apply(text: str, e: Edit) -> str:
    return text.replace(e.old, e.new, 1)


def changed_lines(before: str, after: str) -> int:
    """Lines removed plus lines added."""
    a, b = before.split("\n"), after.split("\n")
    ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    return sum(i2 - i1 + j2 - j1 for tag, i1, i2, j1, j2 in ops if tag != "equal")


def cursor_target(first: Edit, before: str) -> dict:
    """Where the fix's first edit starts in its file as the developer has it (``before``): the
    first character it changes, by the rule harness.runs.loop.edit_cursor places an agent's edit
    with, so the reference scores 0 px. An insertion whose ``old`` is the line above it starts
    at that line's end."""
    index = before.index(first.old) + first_difference(first.old, first.new)
    line, column = line_and_column(before, index)
    return {"file": first.file, "line": line, "column": column, "placement": "before"}


def new_identifiers(added: str, workspace_text: str) -> set[str]:
    """Words of the fix's added text that the starting workspace holds nowhere."""
    known = set(_WORD.findall(workspace_text))
    return {w for w in _WORD.findall(added) if w not in known}


def leaks(instruction: str, introduced: set[str]) -> list[str]:
    """The identifiers only the fix introduces that ``instruction`` names (empty: it is sound)."""
    return sorted(set(_WORD.findall(instruction)) & introduced)


_PR = re.compile(r"^Merge (pull request|branch)\b", re.I)
_NOISE = re.compile(r"\(#\d+\)|\b(fix(es|ed)?|close[sd]?|resolve[sd]?)\s+#\d+\b|#\d+", re.I)
_PREFIX = re.compile(r"^(fix|feat|bug|bugfix|chore|refactor)(\([^)]*\))?!?:\s*", re.I)
_EMPTIED = re.compile(r"\s*(\(\s*\)|\[\s*\])")  # brackets that held only a reference


def summary_line(subject: str, body: str) -> str:
    """What the commit says it does, in one line: a merge's pull-request title (its body's first
    line), issue references and conventional prefixes left out."""
    line = subject
    if _PR.match(subject):
        line = next((x for x in body.splitlines() if x.strip()), "")
    line = _PREFIX.sub("", _EMPTIED.sub("", _NOISE.sub("", line))).strip(" .:-")
    line = " ".join(line.split())
    return line[:1].upper() + line[1:] if line else ""


_INTENT_WORDS = (
    ("fix_regex", r"\bregexp?\b|regular expression|\bpattern\b"),
    ("fix_date_handling", r"\bdates?\b|\btime ?zones?\b|\bmonths?\b|\butc\b|\bdst\b|\bweeks?\b"),
    ("fix_async_bug", r"\basync\b|\bawait\b|\bpromises?\b"),
    ("fix_module_export", r"\bexports?\b|\bimports?\b"),
    ("fix_off_by_one", r"off[ -]by[ -]one|\bboundary\b|\binclusive\b|\bexclusive\b"),
    ("fix_data_mutation", r"\bmutat\w*|\bin place\b|\bclone\b|\bcopy\b"),
    ("fix_error_handling", r"\berrors?\b|\bthrows?\b|\bexceptions?\b|\breject\w*"),
    ("debug_runtime_error", r"\bcrash\w*|\btypeerror\b|\bundefined\b|\bnull\b"),
    ("refactor_function_signature", r"\bsignature\b|\barguments?\b|\bparameters?\b"),
)


def intent(summary: str, failure_message: str) -> str:
    """One of harness/session/intents.py's labels, from what the commit says (Jest's failure lines
    all begin "Error:", so of the failure only a runtime error's type counts); ``fix_test_failure``
    (a named test fails, make it pass) when nothing more specific does."""
    if re.search(r"\b(TypeError|ReferenceError|RangeError|SyntaxError)\b", failure_message):
        return "debug_runtime_error"
    said = summary.lower()
    for label, words in _INTENT_WORDS:
        if re.search(words, said):
            return label
    return "fix_test_failure"


_TEMPLATES = (
    "{summary}: '{test}' in {test_file} fails with {message}. Can you change {sources} so it passes?",
    "I'm working on this: {summary}. The test '{test}' ({test_file}) says {message}. Please fix "
    "{sources}; the tests are right.",
)
_BARE = (
    "'{test}' in {test_file} fails with {message}. The test is right; can you fix {sources}?",
    "{test_file} has a failing test, '{test}': {message}. Please make it pass by changing {sources}.",
)


def instruction(
    summary: str, f: Failure, sources: list[str], introduced: set[str], rng: random.Random
) -> str:
    """The session's instruction: the commit's summary when it gives nothing away, else none."""
    message = f'"{f.message}"' if f.message else "an error"
    fields = {"test": f.test, "test_file": f.test_file, "message": message}
    fields["sources"] = " and ".join(sources)
    if summary and not leaks(summary, introduced):
        text = rng.choice(_TEMPLATES).format(summary=summary, **fields)
    else:
        text = rng.choice(_BARE).format(**fields)
    return text
