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
from harness.errors import InputError
from harness.etai_format import Action, FinalAnswer, InvalidAction
from harness.sessions import Cursor, text_lines


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
    as an invalid action, exactly as a model's malformed output would be.
    """

    def __init__(self, path: str, ctx: AgentContext):
        p = Path(path)
        if not p.is_file():
            raise InputError("replay file does not exist", where=path)
        self.spec = f"replay:{path}"
        self.fingerprint = hashlib.sha256(p.read_bytes()).hexdigest()[:16]
        self._rows: dict[tuple[str, int], dict[str, Any]] = {}
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
            self._rows[(row["session_id"], sample)] = row

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
        cursor = None
        c = row.get("cursor")
        if isinstance(c, dict):
            try:
                cursor = Cursor(
                    str(c["file"]),
                    int(c["line"]),
                    int(c["column"]),
                    str(c.get("placement", "before")),
                )
            except (KeyError, TypeError, ValueError):
                cursor = None
        return ScriptedEpisode(decisions, str(row.get("final_output", "")), cursor)

    def close(self) -> None:
        pass


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
