"""The replay loop: one agent, one session, one sandbox; then verification. Returns one result row.

The agent acts for at most ``max_steps`` tool calls; malformed or unknown actions are recorded
as ``invalid_action`` steps and count toward the budget. Green is checked after every step that
changes files (file_edit, file_write), so one rollout yields both the first step at which the
workspace was green (Path Accuracy@k for every k) and whether it is green at the end (pass@1).
Nothing the agent or its code does escapes as an exception: failures become the row's status.
"""

from __future__ import annotations

import atexit
import hashlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from harness import tools
from harness.agents import Agent, TaskView, check_available, cursor_of
from harness.agents.etai_format import (
    Action,
    FinalAnswer,
    InvalidAction,
    render_action,
    render_context,
    result_json,
)
from harness.base import speed
from harness.base.errors import BudgetSkipped, EtaiError, InfraError
from harness.grading.verify import (
    CUT_SHORT,
    Baseline,
    Gold,
    Verdict,
    take_baseline,
    verify,
    workspace_digest,
)
from harness.runs import base_runs, held_out
from harness.sandbox import Sandbox, Status, ToolFailure, close_quietly, transforms
from harness.session.model import Cursor, Session, first_difference, line_and_column

MUTATING = ("file_edit", "file_write")
# The verdict of an episode in which no tool that writes files was called, when the preflight ran
# (``gold``): no code of the agent's exists, only the session's own code and tests ran (and the
# workspace is read-only to them in the Docker sandbox), so the workspace is the pristine one that
# the preflight found not green. A noop episode then costs no Jest run.
UNCHANGED = Verdict(
    green=False,
    reason="no file was changed: the workspace is the one the preflight found not green",
    status=Status.FAILED,
    checks=["verification"],
)
SandboxFactory = Callable[[Session], Sandbox]


def _target_file(args: dict[str, Any]) -> str | None:
    for key in ("file", "test_file", "path"):
        if isinstance(args.get(key), str):
            return args[key]
    return None


def edit_cursor(sb: Sandbox, action: Action) -> Cursor | None:
    """Where an edit starts: the first character the edit changes (the suites' cursor_target rule)."""
    args = action.args
    path = args.get("file")
    if not isinstance(path, str):
        return None
    try:
        old_text = sb.read_file(path).decode("utf-8", "replace")
    except ToolFailure:
        old_text = ""
    if action.tool == "file_edit":
        old, new = args.get("old"), args.get("new")
        if not isinstance(old, str) or not isinstance(new, str) or old not in old_text:
            return None
        index = old_text.index(old) + first_difference(old, new)
    else:
        new = args.get("content")
        if not isinstance(new, str):
            return None
        index = first_difference(old_text, new)
    line, col = line_and_column(old_text if index <= len(old_text) else new, index)
    return Cursor(path, line, col, "before")


def _graded(row: dict[str, Any], verdict: Verdict) -> Verdict:
    """``verdict``, its Jest seconds added to the row's graded runs (``jest_s``)."""
    row["jest_s"]["graded"] = round(row["jest_s"]["graded"] + verdict.jest_s, 4)
    return verdict


@contextmanager
def _timed(row: dict[str, Any], phase: str) -> Iterator[None]:
    """Add the time spent in the block to ``row["phases"][phase]`` (seconds), also when it raises."""
    t = time.monotonic()
    try:
        yield
    finally:
        phases = row["phases"]
        phases[phase] = round(phases.get(phase, 0.0) + time.monotonic() - t, 4)


def run_episode(
    session: Session,
    agent: Agent,
    sample: int,
    *,
    start_sandbox: SandboxFactory,
    k: int,
    max_steps: int,
    passing: Iterable[str] | None = None,
    gold: Gold | None = None,
    held_out_gold: Gold | None = None,
    regression: str = "related",
) -> dict[str, Any]:
    """Play one rollout and return its result row (without run bookkeeping such as the cache key).

    ``passing`` and ``gold`` are what the preflight measured on this session (tests passing on the
    pristine workspace; the reference's verification run): with them the episode needs no Jest run
    of its own before the agent acts, and verification holds the agent to the reference.
    ``regression``: which test files a graded run runs (harness.grading.verify).
    """
    t0 = time.monotonic()
    row = _new_row(session, agent, sample, k, max_steps)
    sb = None
    try:
        check_available(
            agent
        )  # a server this run already found unreachable: no sandbox, no retries
        deadline = getattr(agent, "deadline", None)
        with _timed(row, "acquire"):
            sb = (
                start_sandbox(session)
                if deadline is None
                else _start_before(deadline, start_sandbox, session, agent.spec)
            )
        _play(
            sb, session, agent, sample, row, k=k, max_steps=max_steps, passing=passing,
            gold=gold, held_out_gold=held_out_gold, regression=regression,
        )  # fmt: skip
    except BudgetSkipped as e:  # not run at all: its own status, not a failure of the machinery
        row.update(status=Status.SKIPPED_BUDGET.value, reason=str(e))
    except InfraError as e:
        row.update(status="infra_error", reason=str(e))
    except EtaiError as e:
        row.update(status="infra_error", reason=f"{type(e).__name__}: {e}")
    except Exception as e:  # an agent bug must not end the run; the row says what happened
        row.update(status="infra_error", reason=f"agent or harness error: {type(e).__name__}: {e}")
    finally:
        if sb is not None:
            with _timed(row, "close"):
                close_quietly(sb)  # the engine gone after the verdict does not change the row
        row.setdefault("steps_used", len(row["steps"]))
        row["duration_s"] = round(time.monotonic() - t0, 3)
    return row


_abandoned: list[threading.Thread] = []


@atexit.register
def _await_abandoned() -> None:
    # Their sandboxes are closed when each start ends: a process exiting first would leave them.
    for t in list(_abandoned):
        t.join(timeout=60)


def _start_before(deadline: float, start: SandboxFactory, session: Session, spec: str) -> Sandbox:
    """``start(session)``, given up at ``deadline`` (an agent's time budget, the in-training
    evaluation's): a container start on a busy machine can take seconds, and an episode whose
    sandbox is not ready by then would only be stopped at its first step. Given up, the episode is
    not run (BudgetSkipped); the start goes on in its thread, which closes what it made."""
    lock, box, done = threading.Lock(), {}, threading.Event()

    def go() -> None:
        try:
            box["sb"] = start(session)
        except BaseException as e:  # handed to the caller, or dropped if it gave up
            box["error"] = e
        with lock:
            done.set()
            late = box.get("late", False)
        if late and "sb" in box:
            close_quietly(box["sb"])
        if late:
            _abandoned.remove(threading.current_thread())

    t = threading.Thread(target=go, name=f"etai-start-{session.session_id}", daemon=True)
    t.start()
    if not done.wait(max(0.0, deadline - time.monotonic())):
        with lock:
            if not done.is_set():
                box["late"] = True
                _abandoned.append(t)
                raise BudgetSkipped(
                    f"{spec}: the evaluation's time budget ran out while its sandbox started; "
                    "episode not started"
                )
    if "error" in box:
        raise box["error"]
    return box["sb"]


def _new_row(session: Session, agent: Agent, sample: int, k: int, max_steps: int) -> dict[str, Any]:
    return {
        "session_id": session.session_id,
        "agent": agent.spec,
        "agent_fingerprint": getattr(agent, "fingerprint", ""),
        "sample": sample,
        "intent": session.intent,
        "k": k,
        "max_steps": max_steps,
        "steps": [],
        "actions": [],
        "agent_path": [],
        "human_path": [[s.tool_called, _target_file(s.tool_args)] for s in session.execution_trace],
        "cursor_target": vars(session.cursor_target),
        "viewport": vars(session.ide_context.viewport),
        "steps_to_green": None,
        "green": False,
        "n_invalid": 0,
        "final_output": None,
        "cursor": None,
        "cursor_source": None,
        "reason": None,
        "tamper": [],
        # Green on the visible tests, red on the held-out ones (harness/grading/verify.py
        # ``held_out``): ``held_out_failed`` says which of the two readings of harness/runs/held_out.py
        # it is, ``special_cased`` (a failing held-out case is a near twin of a passing visible one)
        # or ``incomplete`` (none is), and each reading has its flag.
        "held_out_failed": None,
        "special_cased": False,
        "incomplete": False,
        "checks": [],
        "phases": {},
        # Jest's own seconds (jest.JestResult.jest_s): ``agent``, in the agent's jest_run steps;
        # ``graded``, in every graded run of the episode (baseline, verifications, held-out);
        # ``final``, in the run of the final visible verdict. agent + final is the episode's floor:
        # the tests it asked for and one run of those its final change must answer to
        # (bench/real_suite_throughput.py).
        "jest_s": {"agent": 0.0, "graded": 0.0, "final": 0.0},
        # Rollouts as data (finetune.rollouts): with these a row re-renders every prompt the agent
        # was given, so a run folder is a training set.
        "task": {
            "user_instruction": session.user_instruction,
            "ide_context": session.raw.get("ide_context", {}),
            "context_text": render_context(TaskView.of(session, max_steps=0, k=0).record()),
        },
        "observations": [],
        # Rows are stored with sorted keys, which reorders args and results: the texts keep the
        # agent's order ([action as rendered, result_json]), so prompts re-render byte for byte.
        "observation_texts": [],
    }


def _note_texts(row: dict[str, Any], observation: dict[str, Any]) -> None:
    row["observation_texts"].append(
        [
            render_action(observation["tool_called"], observation["tool_args"]),
            result_json(observation["execution_result"]),
        ]
    )


def _note_tamper(row: dict[str, Any], found: Iterable[str]) -> None:
    for t in found:
        if t not in row["tamper"] and len(row["tamper"]) < 20:
            row["tamper"].append(t)


def _play(
    sb: Sandbox,
    session: Session,
    agent: Agent,
    sample: int,
    row: dict[str, Any],
    *,
    k: int,
    max_steps: int,
    passing: Iterable[str] | None,
    gold: Gold | None,
    held_out_gold: Gold | None = None,
    regression: str = "related",
) -> tuple[Verdict, Verdict | None]:
    """The agent's steps in a started sandbox, then the final verdict; fills ``row``, returns the
    verdict on the visible tests and, for a session with held-out tests whose workspace ended green
    on them, the verdict of the final run with the held-out tests too (else None)."""
    row["image"] = sb.image
    with _timed(row, "baseline"):
        base = take_baseline(
            sb, sb.test_files, passing=passing, gold=gold, held_out=session.held_out,
            held_out_gold=held_out_gold, regression=regression,
        )  # fmt: skip
    if base.run is not None:
        row["jest_s"]["graded"] = round(base.run.jest_s, 4)
    greens: list[tuple[int, str]] = []  # (step, workspace state) of visible greens: held-out only
    with _timed(row, "agent"):
        episode = agent.start(TaskView.of(session, max_steps=max_steps, k=k), sample)
    observations: list[dict[str, Any]] = row["observations"]  # what the agent saw, step by step
    first_edit: Cursor | None = None
    verdict: Verdict | None = None
    ungraded: int | None = None  # the step whose changed workspace is not graded yet
    graded_state: str | None = None  # the workspace the last whole verdict judged (_kept_state)
    for i in range(1, max_steps + 1):
        with _timed(row, "agent"):
            decision = episode.act(observations)
        if isinstance(decision, Action):
            problem = tools.validate(decision.tool, decision.args)
            decision = InvalidAction(problem, "") if problem else decision
        if ungraded is not None:  # graded before anything else reaches the sandbox
            changes = isinstance(decision, Action) and decision.tool in MUTATING
            # Steps that do not edit follow (none after a FinalAnswer): the files the verdict judged.
            reuse = not changes and not isinstance(decision, FinalAnswer)
            graded_state = _kept_state(sb) if reuse else None
            verdict = _grade_step(sb, session, base, row, ungraded, greens, changes_next=changes)
            ungraded = None
        if isinstance(decision, FinalAnswer):
            row["final_output"] = decision.text
            break
        if isinstance(decision, InvalidAction):
            row["n_invalid"] += 1
            result = {"status": "invalid_action", "error": decision.reason}
            row["steps"].append(
                {
                    "step": i,
                    "tool": None,
                    "status": "invalid_action",
                    "latency_s": 0.0,
                    "error": decision.reason,
                }
            )
            row["actions"].append({"invalid": decision.reason, "raw": decision.raw})
            observations.append(
                {
                    "step": i,
                    "tool_called": "invalid_action",
                    "tool_args": {},
                    "execution_result": result,
                }
            )
            _note_texts(row, observations[-1])
            continue
        with _timed(row, "tools"):
            if decision.tool in MUTATING and first_edit is None:
                first_edit = edit_cursor(sb, decision)
            r = tools.call(sb, decision.tool, decision.args)
        if r.status == "infra_error":
            raise InfraError(r.error or "sandbox unavailable")
        _note_tamper(row, r.data.get("tamper") or [])  # the agent's own test runs count too
        row["steps"].append(
            {
                "step": i,
                "tool": decision.tool,
                "status": r.status,
                "latency_s": round(r.duration_s, 4),
                "error": r.error,
            }
        )
        if "jest_s" in r.harness:
            row["steps"][-1]["jest_s"] = round(r.harness["jest_s"], 4)
            row["jest_s"]["agent"] = round(row["jest_s"]["agent"] + r.harness["jest_s"], 4)
        row["actions"].append({"tool": decision.tool, "args": decision.args})
        row["agent_path"].append([decision.tool, _target_file(decision.args)])
        observations.append(
            {
                "step": i,
                "tool_called": decision.tool,
                "tool_args": decision.args,
                "execution_result": r.to_dict(),
            }
        )
        _note_texts(row, observations[-1])
        if decision.tool in MUTATING and r.ok:
            ungraded = i
    if ungraded is not None:  # the last step was this edit: its verdict is the final one
        verdict = _grade_step(sb, session, base, row, ungraded, greens, changes_next=False)
    row["steps_used"] = len(row["steps"])
    # Green at the end: reuse the last verdict if it was a whole graded run (not one of the
    # verification files alone: ``_grade_step``) and nothing changed since: no step after it, or
    # (speed path ``unchanged_final``) every workspace file as it was when that run began; else
    # verify now.
    last_mutation = max((s["step"] for s in row["steps"] if s["tool"] in MUTATING), default=0)
    last_step = row["steps"][-1]["step"] if row["steps"] else 0
    if verdict is None and gold is not None and last_mutation == 0:
        verdict = UNCHANGED  # no Jest run: the preflight found this very workspace not green
    elif (
        verdict is None
        or verdict.only_verification
        or (last_mutation != last_step and not _unchanged(sb, graded_state))
    ):
        with _timed(row, "verify"):
            verdict = _graded(row, verify(sb, base, list(session.verify_files)))
        _note_tamper(row, verdict.tamper)
    visible, full = verdict, None
    row["jest_s"]["final"] = round(visible.jest_s, 4)
    if session.held_out and verdict.green and not row["tamper"]:
        # Held-out tests run once, after the agent's last step: nothing of the agent's acts after
        # they were on disk. The episode's green step is the first at which the workspace was
        # already the one that passes them; a green reached by special-casing and fixed later
        # counts from the fix.
        final_state = _state(sb)
        with _timed(row, "verify"):
            full = _graded(row, verify(sb, base, list(session.verify_files), held_out=True))
        _note_tamper(row, full.tamper)
        row["held_out"] = {"green": full.green, "reason": full.reason, "files": len(base.held_out)}
        verdict = full
        if full.green:
            row["steps_to_green"] = next((i for i, st in greens if st == final_state), None)
        elif not row["tamper"]:
            with _timed(row, "verify"):
                _held_out_failed(row, session, base, visible, full)
    row["verification"] = verdict.to_dict()
    row["checks"] = list(verdict.checks)
    transcript = getattr(episode, "transcript", None)  # a text agent's prompts and raw outputs
    if callable(transcript):
        row["transcript"] = transcript()
    predicted = cursor_of(episode)
    if predicted is not None:
        row["cursor"], row["cursor_source"] = vars(predicted), "agent"
    elif first_edit is not None:
        row["cursor"], row["cursor_source"] = vars(first_edit), "first_edit"
    if row["tamper"]:  # interference anywhere in the episode: never a pass, at any step
        row["steps_to_green"] = None
        if "tamper" not in row["checks"]:
            row["checks"].insert(0, "tamper")
    if row["held_out_failed"]:
        row["steps_to_green"] = None
    row["green"] = verdict.green and not row["tamper"]
    row["status"] = _status(row, verdict)
    if not row["green"]:
        row["reason"] = f"tampered: {row['tamper'][0]}" if row["tamper"] else verdict.reason
        if row["held_out_failed"]:
            row["reason"] = f"{row['held_out_failed']}: {verdict.reason}"
    return visible, full


def _grade_step(
    sb: Sandbox,
    session: Session,
    base: Baseline,
    row: dict[str, Any],
    step: int,
    greens: list[tuple[int, str]],
    *,
    changes_next: bool,
) -> Verdict:
    """The verdict on the workspace as step ``step`` left it, noted in ``row``. ``changes_next``:
    the agent's next action writes files, so this workspace is not the final one. Then, with the
    speed path ``verification_first`` on, its verification files run first, alone: a workspace
    whose verification tests fail is not green whatever the rest would show, and that run is its
    verdict when it is clean and not green; one green or tampered there gets the whole graded run
    as every other workspace does (docs/grading.md, "Verification first")."""
    only = None
    with _timed(row, "verify"):
        if changes_next and session.verify_files and speed.on("verification_first"):
            only = _graded(
                row, verify(sb, base, list(session.verify_files), only_verification=True)
            )
        verdict = only
        if only is None or only.green or only.tamper:
            verdict = _graded(row, verify(sb, base, list(session.verify_files)))
    _note_tamper(row, verdict.tamper)
    if only is not None:  # the whole run's findings first, as without this path; then any more
        _note_tamper(row, only.tamper)
    if verdict.green and not row["tamper"] and row["steps_to_green"] is None:
        row["steps_to_green"] = step
    if verdict.green and session.held_out:
        greens.append((step, _state(sb)))
    return verdict


def _kept_state(sb: Sandbox) -> str | None:
    """The workspace's files as a whole graded run is about to judge them, when the speed path
    ``unchanged_final`` may reuse its verdict at the end (docs/grading.md, "The final verdict")."""
    return workspace_digest(sb) if speed.on("unchanged_final") else None


def _unchanged(sb: Sandbox, state: str | None) -> bool:
    """Every workspace file is as it was when the verdict of ``state`` was taken."""
    return state is not None and workspace_digest(sb) == state


def _held_out_failed(
    row: dict[str, Any], session: Session, base: Baseline, visible: Verdict, full: Verdict
) -> None:
    """The ``held_out_failed`` verdict: the failing held-out cases, whether each is a near twin of
    a visible verification case the final workspace passed, and the episode's reading."""
    wanted = set(session.verify_files or base.test_files)
    passed = [t.id for t in visible.tests if t.status == "passed" and t.file in wanted]
    cases = held_out.classify(session, full.tests, base.held_out_gold, passed)
    kind = "special_cased" if held_out.special_cased(cases) else "incomplete"
    row["held_out"]["failed_cases"] = cases
    row["held_out_failed"] = kind
    row["special_cased"] = kind == "special_cased"
    row["incomplete"] = kind == "incomplete"


def _state(sb: Sandbox) -> str:
    """The workspace's changes as git sees them (new files included), hashed: equal states, equal
    verdicts."""
    text = sb.request("git", {"cmd": "diff"})["text"]
    return hashlib.sha256(text.encode()).hexdigest()


def _status(row: dict[str, Any], verdict: Verdict) -> str:
    if row["tamper"]:
        return "tampered"
    if row["green"]:
        return "passed"
    if verdict.status in CUT_SHORT:
        return verdict.status.value
    if row["steps"] and row["n_invalid"] == len(row["steps"]):
        return "invalid_action"
    return "failed"


def preflight(
    session: Session, oracle: Agent, *, start_sandbox: SandboxFactory, regression: str = "related"
) -> dict[str, Any]:
    """Replay the reference: ok only if it reaches green within its own steps from a non-green start,
    untampered. Returns what episodes reuse: the tests passing at the start and the gold record of
    the reference's verification (two runs, so that a count that varies takes its minimum). A
    session with held-out tests also needs them green on the reference (their own gold record) and
    not all passing on the pristine workspace: tests that do not see the bug hold nothing out."""
    sb = start_sandbox(session)
    try:
        base = take_baseline(
            sb, sb.test_files, held_out=session.held_out, regression=regression,
            from_base=base_runs.from_base(session, start_sandbox, sb.image),
        )  # fmt: skip
        # Only the pristine workspace has run here yet: what its Jest hosts transformed may serve
        # every later sandbox (harness/sandbox/transforms.py). Not later: the store is readable from
        # every sandbox, and the reference's transforms hold its fix.
        transforms.harvest(sb)
        if verify(sb, base, list(session.verify_files), run=base.run).green:
            return {"ok": False, "reason": "workspace is green before any action"}
        row = _new_row(
            session, oracle, 0, len(session.execution_trace), len(session.execution_trace)
        )
        verdict, full = _play(
            sb,
            session,
            oracle,
            0,
            row,
            k=row["k"],
            max_steps=row["max_steps"],
            passing=base.passing,
            gold=None,
            regression=regression,
        )
        if row["status"] == "tampered":
            return {
                "ok": False,
                "reason": f"the reference trips an integrity check: {row['tamper'][0]}",
            }
        if not row["green"]:
            return {"ok": False, "reason": f"reference does not reach green: {row['reason']}"}
        # The second run repeats the verification files alone when that speed path is on: what it
        # adds is the gold record's second count of the verification tests; the regression and
        # protected-file checks of the same workspace were the first run's (docs/grading.md,
        # "The preflight").
        again = verify(
            sb, base, list(session.verify_files), only_verification=speed.on("verification_rerun")
        )
        if not again.green:
            return {"ok": False, "reason": f"the reference's green does not repeat: {again.reason}"}
        gold = Gold.from_outcomes(
            [verdict.tests, again.tests], session.verify_files or base.test_files
        )
        flight = {
            "ok": True,
            "reason": None,
            "steps_to_green": row["steps_to_green"],
            "passing": sorted(base.passing),
            "gold": gold.to_json(),
        }
        if full is not None:
            again = verify(sb, base, list(session.verify_files), held_out=True)
            if not again.green:
                return {
                    "ok": False,
                    "reason": f"the reference's green with held-out tests does not repeat: "
                    f"{again.reason}",
                }
            held = Gold.from_outcomes(
                [full.tests, again.tests],
                [*session.held_out, *(session.verify_files or base.test_files)],
            )
            problem = _held_out_problem(session, start_sandbox, base, gold, held)
            if problem:
                return {"ok": False, "reason": problem}
            flight["held_out_gold"] = held.to_json()
        return flight
    except EtaiError as e:  # InfraError included
        raise InfraError(f"preflight of {session.session_id}: {e}") from e
    finally:
        sb.close()


def _held_out_problem(
    session: Session, start_sandbox: SandboxFactory, base: Baseline, gold: Gold, held: Gold
) -> str | None:
    """Why the held-out tests hold nothing out, or None: on the pristine workspace (a sandbox of
    its own: this one holds the reference's fix) at least one held-out test must not pass, and
    every held-out file must have a test the reference passed."""
    files = sorted(session.held_out)
    own = {t for t in held.tests if t not in gold.tests}  # held-out cases, not visible ones
    for f in files:
        if not any(t.split("::", 1)[0] == f for t in own):
            return f"held-out file {f} has no test of its own that the reference passed"
    sb = start_sandbox(session)
    try:
        pristine = take_baseline(
            sb, sb.test_files, passing=base.passing, held_out=session.held_out, held_out_gold=held
        )
        run = verify(sb, pristine, list(session.verify_files), held_out=True)
        if run.tamper:
            return f"the held-out run on the pristine workspace trips an integrity check: {run.tamper[0]}"
        passed = {t.id for t in run.tests if t.status == "passed"}
        if own <= passed:
            return "every held-out test passes on the pristine workspace: they do not catch the bug"
        return None
    finally:
        sb.close()
