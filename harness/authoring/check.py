"""`etai suite validate --jest`: every session of a suite against real Jest in the sandbox.

Beyond what the loader checks (every field, path and reference), each session's reference is
replayed in a fresh sandbox (the preflight every run does, cached the same way): the pristine
workspace must not be green, the reference must reach green, untampered, repeatably, within the
suite's k steps. Alongside, the reference trace is read as text: it may edit only source files
(never tests, snapshots or package.json), each ``file_edit``'s ``old`` occurs exactly once in the
file as it is at that step, and the cursor target lies inside the text the first edit of its file
replaces (a session's cursor error is measured against where the fix goes). Last, a session with
held-out cases has their coverage re-checked at the fix (``coverage_audit``: eligibility.py's
``uncovered``, measured by coverage.py as build and mine measure it).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from harness.authoring import coverage, eligibility
from harness.grading.verify import is_protected
from harness.runs.session_jobs import local_preflights
from harness.session.model import Session, Suite


@dataclass(frozen=True)
class SessionCheck:
    session_id: str
    problems: tuple[str, ...]
    steps_to_green: int | None
    coverage: CoverageAudit | None = None  # a session with held-out tests

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class _Replayed:
    """The reference trace applied as text: what was wrong, and each file it edits as it is at the
    start (``before``), as it leaves it (``after``), and the span its first edit there replaces."""

    problems: list[str]
    before: dict[str, str]
    after: dict[str, str]
    first_span: dict[str, tuple[int, int]]


def _replay(s: Session) -> _Replayed:
    problems: list[str] = []
    before: dict[str, str] = {}
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
            texts[rel] = before[rel] = path.read_text(encoding="utf-8") if path.is_file() else ""
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
    return _Replayed(problems, before, texts, first_span)


def trace_problems(s: Session) -> list[str]:
    """What is wrong with the reference trace read as text (no Jest): see the module docstring."""
    replayed = _replay(s)
    problems, first_span = replayed.problems, replayed.first_span
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


@dataclass(frozen=True)
class CoverageAudit:
    """A session's held-out cases read against the changed lines the visible cases execute at the
    fix (eligibility.py's ``uncovered``, measured by coverage.py)."""

    session_id: str
    held_out: tuple[str, ...]  # case ids
    # (held-out case, the changed lines ``file:line`` it executes that no visible case does)
    uncovered: tuple[tuple[str, tuple[str, ...]], ...] = ()
    not_measured: str | None = None  # why it was not measured; None: measured (or nothing held out)


def coverage_audit(s: Session, box: coverage.Box) -> CoverageAudit:
    """Which held-out cases of ``s`` execute a changed line (a non-test line the reference adds or
    changes) that no visible case executes, measured in ``box``, a sandbox on the session's
    workspace, which it leaves at the fix with the held-out files in.

    Measured as build and mine measure a candidate (coverage.py): the held-out cases against the
    other cases of the verification files and the held-out files, the reference applied as text.
    Coverage that cannot be measured (a held-out case with no name Jest reports, a trace that does
    not apply, a run that fails or names none of the changed files) is ``not_measured``, never a
    pass."""
    held = held_out_audit(s).held_out
    if not held:
        return CoverageAudit(s.session_id, ())

    def unmeasured(why: str) -> CoverageAudit:
        return CoverageAudit(s.session_id, held, not_measured=why)

    unnamed = [t for t in held if t.split("::", 1)[1].startswith("@")]
    if unnamed:  # Jest can name only a case with a plain name (eligibility.Case's ids)
        return unmeasured(f"held-out case {unnamed[0]} has no name Jest reports")
    fix = _replay(s)
    if fix.problems:
        return unmeasured(f"the reference does not apply as text: {fix.problems[0]}")
    held_files = sorted({t.split("::", 1)[0] for t in held})
    for rel, data in s.held_out.items():
        box.sb.write_file(rel, data)
    for rel, text in fix.after.items():
        box.sb.write_file(rel, text.encode())
    files = sorted(set(s.verify_files or box.sb.test_files) | set(held_files))
    changed = coverage.changed_lines(fix.before, fix.after)
    cov, row = coverage.measured(box, changed, files, list(held), box.limits.timeout_s)
    if cov is None:
        return unmeasured(row["why"])
    why = eligibility.screen(list(held), [], None, set(), cov)  # the rule alone: no other applies
    uncovered = tuple(
        (t, tuple(sorted(cov.of[t] - cov.visible))) for t in held if why.get(t) == "uncovered"
    )
    return CoverageAudit(s.session_id, held, uncovered)


def check_suite(
    suite: Suite, *, sandbox: str = "docker", workers: int = 1, progress: bool = True
) -> list[SessionCheck]:
    """Every session: the trace read as text, then its reference replayed in the sandbox, then
    for a session with held-out cases whose reference holds, their coverage at the fix
    (``coverage_audit``)."""
    from harness.authoring.box import Box
    from harness.runs.session_jobs import sandbox_profile

    k = int(suite.defaults.get("k", 3))
    flights = local_preflights(suite, sandbox=sandbox, workers=workers, progress=progress)
    limits = sandbox_profile(suite)
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
        audit = None
        if s.held_out_dir is not None:
            if problems:
                held = held_out_audit(s).held_out
                audit = CoverageAudit(s.session_id, held, not_measured="the reference fails")
            else:
                box = Box(sandbox, s.workspace, limits)
                try:
                    audit = coverage_audit(s, box)
                finally:
                    box.close()
            problems += [
                f"held-out case {case} executes changed lines no visible case executes: "
                + ", ".join(lines[:3])
                + (f" (+{len(lines) - 3} more)" if len(lines) > 3 else "")
                for case, lines in audit.uncovered
            ]
        out.append(SessionCheck(s.session_id, tuple(problems), f.get("steps_to_green"), audit))
    return out


def coverage_line(checks: list[SessionCheck]) -> str:
    """The coverage audit's count as `etai suite validate --jest` prints it: the sessions and cases
    not measured are counted apart, never among those that passed."""
    audits = [c.coverage for c in checks if c.coverage is not None]
    measured = [a for a in audits if a.not_measured is None]
    unknown = [a for a in audits if a.not_measured is not None]
    return (
        f"held-out coverage: {sum(len(a.held_out) for a in measured)} cases measured in "
        f"{len(measured)} sessions, {sum(len(a.uncovered) for a in measured)} executing a changed "
        f"line no visible case executes; not measured: {sum(len(a.held_out) for a in unknown)} "
        f"cases in {len(unknown)} sessions"
    )
