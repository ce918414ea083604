"""Rule-based agents: ``oracle`` (the human's reference actions), ``noop`` (finishes at once) and
``replay:FILE`` (actions recorded elsewhere, so trajectories can be scored offline)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.agents import AgentContext, Decision, TaskView, register
from harness.agents.etai_format import Action, FinalAnswer, InvalidAction
from harness.base.errors import InputError
from harness.session.model import Cursor
from harness.session.workspace import MAX_WORKSPACE_BYTES, text_lines


@dataclass
class ScriptedEpisode:
    """Plays a fixed list of decisions, then finishes."""

    decisions: list[Decision]
    final: str = ""
    cursor: Cursor | None = None
    _i: int = field(default=0)

    def act(self, observations: Sequence[dict[str, Any]]) -> Decision:
        if self._i < len(self.decisions):
            self._i += 1
            return self.decisions[self._i - 1]
        return FinalAnswer(self.final)


class OracleAgent:
    """Replays each session's reference trace: the upper bound every suite must reach (preflight)."""

    fingerprint = ""

    def __init__(self, ctx: AgentContext):
        self.spec = "oracle"
        self._suite = ctx.suite

    def start(self, task: TaskView, sample: int) -> ScriptedEpisode:
        s = self._suite.get(task.session_id)
        return ScriptedEpisode(
            [Action(st.tool_called, dict(st.tool_args)) for st in s.execution_trace], s.final_output
        )

    def close(self) -> None:
        pass


class NoopAgent:
    """Finishes at once without a tool call: the floor every metric must separate from."""

    spec = "noop"
    fingerprint = ""

    def start(self, task: TaskView, sample: int) -> ScriptedEpisode:
        return ScriptedEpisode([], "")

    def close(self) -> None:
        pass


class ReplayAgent:
    """Actions from a JSONL file, one line per (session_id, sample)::

        {"session_id": "...", "sample": 0, "actions": [{"tool": "file_read", "args": {...}}, ...],
         "final_output": "...", "cursor": {"file": ..., "line": ..., "column": ..., "placement": ...}}

    ``sample`` defaults to 0; an action that is not a well-formed {"tool", "args"} object is replayed
    as an invalid action, exactly as a model's malformed output would be, and so is a cursor that is
    not a position (after the actions, where it is given). A line for a session the
    suite does not hold, or for a (session, sample) already given, is an InputError naming them
    (scored, it would be an empty rollout or the last line winning), and so is a run's episode the
    file has no line for unless the run allows it (``check_plan``).
    """

    def __init__(self, path: str, ctx: AgentContext):
        p = Path(path)
        if not p.is_file():
            raise InputError("replay file does not exist", where=path)
        self.spec = f"replay:{path}"
        self.fingerprint = hashlib.sha256(p.read_bytes()).hexdigest()[:16]
        self._path = path
        self._rows: dict[tuple[str, int], dict[str, Any]] = {}
        lines: dict[tuple[str, int], int] = {}
        known = {s.session_id for s in ctx.suite.sessions}
        unknown, twice = [], []
        for n, line in text_lines(p):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(f"not valid JSON ({e.msg})", where=f"{path}:{n}") from None
            if (
                not isinstance(row, dict)
                or not isinstance(row.get("session_id"), str)
                or not isinstance(row.get("actions"), list)
            ):
                raise InputError(
                    "each line needs a session_id string and an actions list", where=f"{path}:{n}"
                )
            sample = row.get("sample", 0)
            if not isinstance(sample, int) or isinstance(sample, bool) or sample < 0:
                raise InputError("sample must be a non-negative integer", where=f"{path}:{n}")
            key = (row["session_id"], sample)
            if key[0] not in known:
                unknown.append(f"{key[0]} (line {n})")
            elif key in lines:
                twice.append(f"{key[0]} sample {sample} (lines {lines[key]} and {n})")
            lines[key] = n
            self._rows[key] = row
        problems = []
        if unknown:
            problems.append(f"sessions not in suite {ctx.suite.name}: {_some(unknown)}")
        if twice:
            problems.append(f"the same session and sample more than once: {_some(twice)}")
        if problems:
            raise InputError("; ".join(problems), where=path)

    def check_plan(self, session_ids: Sequence[str], samples: int, *, allow_missing: bool) -> None:
        """InputError naming the run's (session, sample) episodes this file has no line for: each
        would be scored as a rollout of no actions. ``allow_missing``: so be it."""
        if allow_missing:
            return
        missing, n_missing = [], 0
        for sid in session_ids:
            have = {n for s, n in self._rows if s == sid and n < samples}
            if len(have) == samples:
                continue
            n_missing += samples - len(have)
            first = [n for n in range(min(samples, len(have) + 3)) if n not in have]
            more = ", ..." if samples - len(have) > len(first) else ""
            label = "sample" if samples - len(have) == 1 else "samples"
            missing.append(f"{sid} ({label} {', '.join(map(str, first))}{more})")
        if missing:
            raise InputError(
                f"no line for {n_missing} of the run's {len(session_ids) * samples} episodes: "
                f"{_some(missing)}; --allow-missing scores each as a rollout of no actions",
                where=self._path,
            )

    def start(self, task: TaskView, sample: int) -> ScriptedEpisode:
        row = self._rows.get((task.session_id, sample), {"actions": []})
        decisions: list[Decision] = []
        for a in row["actions"]:
            if (
                isinstance(a, dict)
                and isinstance(a.get("tool"), str)
                and isinstance(a.get("args", {}), dict)
            ):
                decisions.append(Action(a["tool"], dict(a.get("args", {}))))
            else:
                decisions.append(
                    InvalidAction(
                        "replayed action is not a {tool, args} object", json.dumps(a)[:200]
                    )
                )
        cursor, problem = _cursor(row.get("cursor"))
        if problem:  # given with the final answer, after the actions: the last step
            decisions.append(InvalidAction(problem, json.dumps(row["cursor"])[:200]))
        return ScriptedEpisode(decisions, str(row.get("final_output", "")), cursor)

    def close(self) -> None:
        pass


# No file of a sandbox's workspace has more lines, or characters in a line, than the workspace has
# bytes: a position past that is no prediction (line 1e23 gave a cursor error of 1.8e24 px).
MAX_POSITION = MAX_WORKSPACE_BYTES + 1


def _cursor(c: Any) -> tuple[Cursor | None, str | None]:
    """A replayed cursor, or the problem that makes it an invalid action (as a model's malformed
    output is one): an object with a file, a line and a column (whole numbers in 1..MAX_POSITION)
    and an optional placement, before or after."""
    if c is None:
        return None, None
    what = "replayed cursor"
    if not isinstance(c, dict) or not isinstance(c.get("file"), str):
        return None, f"{what} is not an object with a file string"
    for key in ("line", "column"):
        v = c.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_POSITION:
            return None, f"{what}: {key} must be a whole number in 1..{MAX_POSITION}, got {v!r}"
    placement = c.get("placement", "before")
    if placement not in ("before", "after"):
        return None, f"{what}: placement must be 'before' or 'after', got {placement!r}"
    return Cursor(c["file"], c["line"], c["column"], placement), None


def _some(items: list[str], most: int = 10) -> str:
    return ", ".join(items[:most]) + (f" and {len(items) - most} more" if len(items) > most else "")


def _replay(arg: str | None, ctx: AgentContext) -> ReplayAgent:
    if not arg:
        raise InputError("replay needs a file: replay:PATH", where="--agent")
    return ReplayAgent(arg, ctx)


def _no_arg(name: str, make):
    def factory(arg: str | None, ctx: AgentContext):
        if arg:
            raise InputError(f"agent {name} takes no argument (got {name}:{arg})", where="--agent")
        return make(ctx)

    return factory


register("oracle", _no_arg("oracle", OracleAgent), "replays each session's reference actions")
register("noop", _no_arg("noop", lambda ctx: NoopAgent()), "finishes at once, no tool call")
register("replay", _replay, "actions from a JSONL file (replay:FILE)")
