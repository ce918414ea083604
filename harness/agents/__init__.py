"""The Agent protocol and its registry, selected by spec strings (``oracle``, ``noop``, ``replay:FILE``,
and model backends registered the same way).

An agent sees a TaskView (the instruction, the IDE context, the tool schemas, its budget) and its
own observations — never the human's trace; only the oracle, built with the suite, reads it.
Decisions are the types of the shared ETAI text format (``harness.agents.etai_format``): an Action, a
FinalAnswer, or an InvalidAction (which the loop records and counts as a step).

Episodes are driven from the runner's worker threads, one per session in flight; a model backend
that wants batched generation collects concurrent ``act`` calls itself, so the loop never changes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from harness import tools
from harness.agents._model_chat import ETAI_CHAT_TEMPLATE as ETAI_CHAT_TEMPLATE
from harness.agents._model_common import Generation as Generation
from harness.agents.etai_format import Action, FinalAnswer, InvalidAction
from harness.base.registry import Registry
from harness.session.model import Cursor, Session, Suite

Decision = Action | FinalAnswer | InvalidAction
Observation = dict[str, Any]  # {"step", "tool_called", "tool_args", "execution_result"}


@dataclass(frozen=True)
class TaskView:
    """What an agent may know about a session."""

    session_id: str
    user_instruction: str
    ide_context: dict[str, Any]
    tools: list[dict[str, Any]]  # function schemas of the tool registry
    max_steps: int
    k: int

    def record(self) -> dict[str, Any]:
        """The session fields the ETAI text format renders (no trace, no answer)."""
        return {
            "session_id": self.session_id,
            "user_instruction": self.user_instruction,
            "ide_context": self.ide_context,
        }

    @classmethod
    def of(cls, session: Session, *, max_steps: int, k: int) -> TaskView:
        return cls(
            session.session_id,
            session.user_instruction,
            session.raw.get("ide_context", {}),
            tools.schemas(),
            max_steps,
            k,
        )


class Episode(Protocol):
    """One rollout of an agent on one session. ``cursor`` (optional) is its edit-location prediction."""

    def act(self, observations: Sequence[Observation]) -> Decision: ...


class Agent(Protocol):
    """``check_available()`` (optional) raises the agent's InfraError when it already knows it cannot
    act (its server was found unreachable earlier in the run), so that no sandbox is started for it."""

    spec: str
    fingerprint: (
        str  # what identifies the model's weights ("" for rule-based agents); in every cache key
    )

    def start(self, task: TaskView, sample: int) -> Episode: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class AgentContext:
    suite: Suite
    options: dict[str, Any] = field(default_factory=dict)  # generation options from the CLI


Factory = Callable[[str | None, AgentContext], Agent]
# prefix -> factory(arg, ctx). hf and openai need extras; without them they are simply absent.
# Plug-ins: entry-point group etai.agents (the name is the spec's prefix).
AGENTS: Registry[Factory] = Registry(
    "agent",
    group="etai.agents",
    builtins=("harness.agents._builtin",),
    optional=("harness.agents.hf", "harness.agents.openai"),
    where="--agent",
)


def register(prefix: str, factory: Factory, description: str) -> None:
    AGENTS.register(prefix, factory, description=description)


def known() -> dict[str, str]:
    return {k: AGENTS.about(k).get("description", "") for k in sorted(AGENTS.names())}


def from_spec(spec: str, ctx: AgentContext) -> Agent:
    """Build the agent a spec names: ``NAME`` or ``NAME:ARG`` (e.g. ``replay:runs/x.jsonl``)."""
    name, sep, arg = spec.partition(":")
    if name not in AGENTS:
        AGENTS.get(spec)  # the registry's own error: unknown agent 'SPEC'; known: ...
    return AGENTS.get(name)(arg if sep else None, ctx)


def check_available(agent: Agent) -> None:
    check = getattr(agent, "check_available", None)
    if check is not None:
        check()


def check_plan(
    agent: Agent, session_ids: Sequence[str], samples: int, *, allow_missing: bool = False
) -> None:
    """An agent whose actions are fixed in advance (``replay:``) checks, before anything runs,
    that it has them for every episode of the run (optional method ``check_plan``)."""
    check = getattr(agent, "check_plan", None)
    if check is not None:
        check(session_ids, samples, allow_missing=allow_missing)


def cursor_of(episode: Episode) -> Cursor | None:
    c = getattr(episode, "cursor", None)
    return c if isinstance(c, Cursor) else None
