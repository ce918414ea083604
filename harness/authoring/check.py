"""`etai suite validate --jest`: every session of a suite against real Jest in the sandbox.

Beyond what the loader checks (every field, path and reference), each session's reference is
replayed in a fresh sandbox (the preflight every run does, cached the same way): the pristine
workspace must not be green, the reference must reach green, untampered, repeatably, within the
suite's k steps. Alongside, the reference trace is read as text: it may edit only source files
(never tests, snapshots or package.json), each ``file_edit``'s ``old`` occurs exactly once in the
file as it is at that step, and the cursor target lies inside the text the first edit of its file
replaces (a session's cursor error is measured against where the fix goes).
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.grading.verify import is_protected
from harness.runs.session_jobs import local_preflights
from harness.session.model import Session, Suite


@dataclass(frozen=True)
class SessionCheck:
    session_id: str
    problems: tuple[str, ...]
    steps_to_green: int | None

    @property
    def ok(self) -> bool:
        return not self.problems


def trace_problems(s: Session) -> list[str]:
    """What is wrong with the reference trace read as text (no Jest): see the module docstring."""
    problems: list[str] = []
    texts: dict[str, str] = {}
    first_span: dict[str, tuple[int, int]] = {}
    for st in s.execution_trace:
        if st.tool_called not in ("file_edit", "file_write"):
            continue
        rel = str(st.tool_args.get("file", ""))
        if is_protected(rel) or rel == "package.json":
            problems.append(f"step {st.step} edits {rel}: a reference changes source files only")
            continue
        if rel not in texts:
            path = s.workspace / rel
            texts[rel] = path.read_text(encoding="utf-8") if path.is_file() else ""
        text = texts[rel]
        if st.tool_called == "file_write":
            span, text = (0, len(text)), str(st.tool_args.get("content", ""))
        else:
            old, new = str(st.tool_args.get("old", "")), str(st.tool_args.get("new", ""))
            n = text.count(old) if old else 0
            if n != 1:
                problems.append(f"step {st.step}: `old` occurs {n} times in {rel}")
                continue
            start = text.index(old)
            span, text = (start, start + len(old)), text[:start] + new + text[start + len(old) :]
        first_span.setdefault(rel, span)
        texts[rel] = text
    t = s.cursor_target
    if t.file not in first_span:
        problems.append(f"cursor_target file {t.file} is not edited by the reference")
    else:
        lines = (s.workspace / t.file).read_text(encoding="utf-8").split("\n")
        offset = sum(len(x) + 1 for x in lines[: t.line - 1]) + t.column - 1
        a, b = first_span[t.file]
        if not a <= offset <= b:
            problems.append(f"cursor_target {t.line}:{t.column} is outside the text the fix edits")
    return problems


def check_suite(
    suite: Suite, *, sandbox: str = "docker", workers: int = 1, progress: bool = True
) -> list[SessionCheck]:
    """Every session: the trace read as text, then its reference replayed in the sandbox."""

    k = int(suite.defaults.get("k", 3))
    flights = local_preflights(suite, sandbox=sandbox, workers=workers, progress=progress)
    out = []
    for s in suite.sessions:
        problems = trace_problems(s)
        f = flights[s.session_id]
        if not f["ok"]:
            problems.append(f["reason"])
        elif f.get("steps_to_green") is not None and f["steps_to_green"] > k:
            problems.append(
                f"the reference reaches green at step {f['steps_to_green']}, after k={k}"
            )
        out.append(SessionCheck(s.session_id, tuple(problems), f.get("steps_to_green")))
    return out
