"""The tool registry: what an agent (and the human trace) can call inside a sandbox.

Each tool has a JSON schema for its arguments and returns a ToolResult whose ``data`` is plain
JSON. ``call`` is total: bad arguments, paths that leave the workspace, missing files and a dead
sandbox all come back as an error result with a clear message, never as an exception.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.base.errors import SandboxDead, SandboxTimeout
from harness.base.registry import Registry
from harness.sandbox import Sandbox, ToolFailure


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments object
    run: Callable[[Sandbox, dict[str, Any]], dict[str, Any]]
    status_of: Callable[[dict[str, Any]], str] = lambda data: "ok"

    def schema(self) -> dict[str, Any]:
        """OpenAI-style function definition (what model servers are sent)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


# The key under which a tool's run returns what only the harness reads (``ToolResult.harness``):
# taken out of ``data`` by ``call``, so no agent sees it.
HARNESS_ONLY = "_harness"


@dataclass(frozen=True)
class ToolResult:
    tool: str
    status: str  # "ok" | "error" | a sandbox Status value for jest_run ("passed", "timeout", ...)
    data: dict[str, Any]
    error: str | None
    duration_s: float
    # What the harness measures of the call and the agent is not shown (jest_run: ``jest_s``,
    # Jest's own seconds, for the floor of harness/runs/loop.py's ``jest_s`` record).
    harness: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = dict(self.data)
        d["status"] = self.status
        if self.error is not None:
            d["error"] = self.error
        return d


# Built-ins first, in their order, then plug-ins (entry-point group etai.tools, Tool objects) by name.
TOOLS: Registry[Tool] = Registry("tool", group="etai.tools", builtins=("harness.tools._builtin",))


def register(tool: Tool) -> Tool:
    return TOOLS.register(tool.name, tool)


def get(name: str) -> Tool:
    return TOOLS.get(name)


def tool_names() -> tuple[str, ...]:
    """Names of the registered tools, in registry order (stable: model heads index into it)."""
    return TOOLS.names()


def schemas() -> list[dict[str, Any]]:
    return [t.schema() for _, t in TOOLS.items()]


def validate(name: str, args: Any) -> str | None:
    """None if ``args`` fit tool ``name``'s schema, else a message naming the problem."""
    if name not in TOOLS:
        return f"unknown tool {name!r}; known: {', '.join(TOOLS.names())}"
    if not isinstance(args, dict):
        return f"arguments of {name} must be a JSON object, got {type(args).__name__}"
    import jsonschema  # the field's validator; schemas stay standard for model servers too

    try:
        jsonschema.validate(args, TOOLS.get(name).parameters)
    except jsonschema.ValidationError as e:
        where = "/".join(str(p) for p in e.absolute_path) or "arguments"
        return f"bad arguments for {name} ({where}): {e.message}"
    return _not_unicode(name, args, "")


def _not_unicode(name: str, value: Any, where: str) -> str | None:
    # A lone surrogate ("\ud800", which JSON can spell) is a str no file or pipe can carry as UTF-8:
    # it would fail on its way to the sandbox and read as the machinery's fault (infra_error).
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            return (
                f"bad arguments for {name} ({where or 'arguments'}): not Unicode text "
                f"(a lone surrogate {value[e.start]!a} at index {e.start})"
            )
    elif isinstance(value, dict):
        for k, v in value.items():
            found = _not_unicode(name, k, where) or _not_unicode(
                name, v, f"{where}/{k}".lstrip("/")
            )
            if found:
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found = _not_unicode(name, v, f"{where}/{i}".lstrip("/"))
            if found:
                return found
    return None


def call(sandbox: Sandbox, name: str, args: Any) -> ToolResult:
    t0 = time.monotonic()
    problem = validate(name, args)
    if problem:
        return ToolResult(name, "error", {}, problem, 0.0)
    tool = TOOLS.get(name)
    try:
        data = tool.run(sandbox, args)
    except ToolFailure as e:
        return ToolResult(name, "error", {}, str(e), time.monotonic() - t0)
    except SandboxDead as e:
        status = "timeout" if isinstance(e, SandboxTimeout) else "infra_error"
        return ToolResult(name, status, {}, f"sandbox unavailable: {e}", time.monotonic() - t0)
    own = data.pop(HARNESS_ONLY, None) or {}
    return ToolResult(name, tool.status_of(data), data, None, time.monotonic() - t0, own)


# Kept for callers that want the names without loading the registry module.
TOOL_NAMES: tuple[str, ...] = (
    "jest_run",
    "file_read",
    "file_write",
    "file_edit",
    "git_diff",
    "git_status",
    "list_files",
    "search",
)
