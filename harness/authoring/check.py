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

from collections import Counter
from dataclasses import dataclass

from harness.authoring import eligibility
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


_CODE_EXTS = (".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx")


@dataclass(frozen=True)
class HeldOutAudit:
    """A session's held-out cases read against the cases that stay visible (no Jest)."""

    session_id: str
    held_out: tuple[str, ...]  # case ids
    twins: tuple[tuple[str, str], ...]  # (held-out case, a visible twin of it)


def held_out_audit(s: Session) -> HeldOutAudit:
    """Which held-out cases of ``s`` have a twin (eligibility.is_twin: the same shape, or the same
    literal values) among the cases that stay visible, read with the parser the split uses.

    Held out are the cases of each held-out file that its workspace copy (a file the session ships
    stripped of them) lacks; the same case in both is matched by name, shape and literals. Visible
    are the cases of every workspace test file (``is_protected``, code extensions). The audit
    re-reads a finished suite, whoever wrote it (built, mined, fetched or by hand), rather than
    trusting the counts its builder wrote."""
    from harness.grading.cases import all_cases

    def texts(pairs) -> dict[str, str]:
        return {
            rel: data.decode("utf-8", "replace") if isinstance(data, bytes) else data
            for rel, data in pairs
            if rel.endswith(_CODE_EXTS)
        }

    held_files = texts(s.held_out.items())
    if not held_files:
        return HeldOutAudit(s.session_id, (), ())
    ws = s.workspace
    visible_files = texts(
        (p.relative_to(ws).as_posix(), p.read_text(encoding="utf-8", errors="replace"))
        for p in sorted(ws.rglob("*"))
        if p.is_file()
        and "node_modules" not in p.relative_to(ws).parts
        and is_protected(p.relative_to(ws).as_posix())
    )
    visible = eligibility.cases_of(all_cases(visible_files), visible_files)
    held_all = eligibility.cases_of(all_cases(held_files), held_files)

    def key(c: eligibility.Case) -> tuple:
        name = c.id.split("::", 1)[1]
        return (c.id.split("::", 1)[0], None if name.startswith("@") else name, c.shape, c.literals)

    stays = Counter(key(c) for c in visible if c.id.split("::", 1)[0] in held_files)
    held = []
    for c in held_all:
        if stays[key(c)] > 0:
            stays[key(c)] -= 1  # the same case, in the file's visible copy too
        else:
            held.append(c)
    twins = tuple(
        (c.id, next(v.id for v in visible if eligibility.is_twin(c, v)))
        for c in held
        if any(eligibility.is_twin(c, v) for v in visible)
    )
    return HeldOutAudit(s.session_id, tuple(c.id for c in held), twins)


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
