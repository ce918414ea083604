"""ETAI sessions and suites: typed records, and a loader that checks everything before anything runs.

A suite is a folder: ``suite.yaml`` (name, description, defaults), ``sessions.jsonl`` (one session
per line) and ``workspaces/<id>/``. ``load_suite`` collects every problem of every session (the
session id, the field and the reason) and raises one InputError listing them all; nothing partial
is ever returned.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import posixpath
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml

from harness import tools
from harness.base.errors import InputError
from harness.grading.verify import is_protected
from harness.sandbox import SUITE_ENV_REFUSED
from harness.sandbox.image import cache_dir
from harness.session.intents import INTENTS
from harness.session.model import (
    Cursor,
    IdeContext,
    Session,
    Step,
    Suite,
    SuiteSandbox,
    Viewport,
)
from harness.session.workspace import MAX_WORKSPACE_BYTES, SKIP_DIRS, decode_utf8, workspace_paths

BUNDLED = Path(__file__).resolve().parent.parent.parent / "suites"


# ---------------------------------------------------------------------------- validation
class _Problems:
    def __init__(self, file: Path):
        self.file = file
        self.items: list[str] = []

    def add(self, where: str, field_: str, reason: str) -> None:
        self.items.append(f"{where}: {field_}: {reason}")


_TYPES = {
    str: "a string",
    int: "an integer",
    dict: "an object",
    list: "a list",
    (int, float): "a number",
}


def _get(
    obj: dict, key: str, typ, where: str, probs: _Problems, path: str, *, required: bool = True
):
    if key not in obj:
        if required:
            probs.add(where, path, "missing")
        return None
    val = obj[key]
    bad_bool = isinstance(val, bool) and typ is not bool
    if bad_bool or not isinstance(val, typ):
        probs.add(where, path, f"must be {_TYPES.get(typ, typ)}, got {type(val).__name__}")
        return None
    return val


def _sandbox_file_problem(ws: Path, rel: str, what: str) -> str | None:
    """Why ``rel`` is not ``what`` among the files the sandbox receives (see workspace_paths), or None.

    Checked on the path as written, never through a symlink: a link to a host file exists on the host
    only, so validating its target would accept a file the agent can never see.
    """

    norm = posixpath.normpath(rel)
    if posixpath.isabs(norm) or norm == ".." or norm.startswith("../"):
        return f"{rel} is outside the workspace"
    p = ws
    parts = norm.split("/")
    for i, part in enumerate(parts):
        p = p / part
        if p.is_symlink():
            where = (
                "is a symlink"
                if i == len(parts) - 1
                else f"is under a symlink ({'/'.join(parts[: i + 1])})"
            )
            return f"{rel} {where}, which the sandbox does not receive"
        if part in SKIP_DIRS:
            return f"{rel} is inside {part}, which the sandbox does not receive"
    return None if p.is_file() else f"{rel} is not {what} of the workspace"


def _workspace_size_problem(ws: Path, ws_rel: str) -> str | None:
    """The sandbox's size limit, checked here so that a run never starts on a suite it cannot upload."""

    sizes = [(p.stat().st_size, rel) for rel, p in workspace_paths(ws)]
    total = sum(n for n, _ in sizes)
    if total <= MAX_WORKSPACE_BYTES:
        return None
    biggest, name = max(sizes)
    return (
        f"{ws_rel} holds {total / 2**20:.1f} MiB, over the sandbox's {MAX_WORKSPACE_BYTES >> 20} MiB "
        f"(largest: {name}, {biggest / 2**20:.1f} MiB)"
    )


def _line_count_and_lengths(path: Path) -> list[int] | None:
    try:
        return [len(line) for line in path.read_text(encoding="utf-8").split("\n")]
    except (OSError, UnicodeDecodeError):
        return None


def _cursor(
    obj: Any, where: str, path: str, probs: _Problems, ws: Path | None, *, placement: bool
) -> Cursor | None:
    if not isinstance(obj, dict):
        probs.add(where, path, f"must be an object, got {type(obj).__name__}")
        return None
    f = _get(obj, "file", str, where, probs, f"{path}.file")
    line = _get(obj, "line", int, where, probs, f"{path}.line")
    col = _get(obj, "column", int, where, probs, f"{path}.column")
    place = "before"
    if placement:
        place = _get(obj, "placement", str, where, probs, f"{path}.placement")
        if place is not None and place not in ("before", "after"):
            probs.add(where, f"{path}.placement", f"must be 'before' or 'after', got {place!r}")
    if None in (f, line, col, place):
        return None
    if ws is not None and ws.is_dir():
        problem = _sandbox_file_problem(ws, f, "a text file")
        lengths = None if problem else _line_count_and_lengths(ws / f)
        if lengths is None:
            probs.add(where, f"{path}.file", problem or f"{f} is not a text file of the workspace")
            return None
        if not 1 <= line <= len(lengths):
            probs.add(where, f"{path}.line", f"line {line} is outside {f} (1..{len(lengths)})")
            return None
        if not 1 <= col <= lengths[line - 1] + 1:
            probs.add(
                where,
                f"{path}.column",
                f"column {col} is outside line {line} of {f} (1..{lengths[line - 1] + 1})",
            )
            return None
    return Cursor(f, line, col, place)


def _session(
    obj: Any, where: str, root: Path, probs: _Problems, sandbox: SuiteSandbox = SuiteSandbox()
) -> Session | None:

    if not isinstance(obj, dict):
        probs.add(where, "session", f"must be a JSON object, got {type(obj).__name__}")
        return None
    n_before = len(probs.items)
    sid = _get(obj, "session_id", str, where, probs, "session_id")
    instr = _get(obj, "user_instruction", str, where, probs, "user_instruction")
    final = _get(obj, "final_output", str, where, probs, "final_output")
    intent = _get(obj, "intent", str, where, probs, "intent")
    if intent is not None and intent not in INTENTS:
        probs.add(where, "intent", f"unknown intent {intent!r}; known: {', '.join(INTENTS)}")
    ws_rel = obj.get("workspace", f"workspaces/{sid}")
    ws = None
    if isinstance(ws_rel, dict):
        ws = _patched_workspace(ws_rel, where, root, probs)
    elif not isinstance(ws_rel, str):
        probs.add(where, "workspace", f"must be a string, got {type(ws_rel).__name__}")
    else:
        try:
            ws = (root / ws_rel).resolve()
        except (OSError, ValueError):  # a NUL byte or a lone surrogate: no path the OS can hold
            ws = None
        if ws is None:
            probs.add(where, "workspace", f"{ws_rel!r} is not a usable path")
        elif not ws.is_dir():
            probs.add(where, "workspace", f"folder {ws_rel} does not exist")
        elif root.resolve() not in ws.parents:
            probs.add(where, "workspace", f"{ws_rel} is outside the suite folder")
        elif too_big := _workspace_size_problem(ws, ws_rel):
            probs.add(where, "workspace", too_big)
    ctx = _get(obj, "ide_context", dict, where, probs, "ide_context")
    ide = None
    if ctx is not None:
        files = _get(ctx, "open_files", list, where, probs, "ide_context.open_files")
        for i, f in enumerate(files or []):
            if not isinstance(f, str):
                probs.add(where, f"ide_context.open_files[{i}]", "must be a string")
            elif (
                ws is not None
                and ws.is_dir()
                and (problem := _sandbox_file_problem(ws, f, "a file"))
            ):
                probs.add(where, f"ide_context.open_files[{i}]", problem)
        cur = (
            _cursor(
                ctx.get("cursor_position"),
                where,
                "ide_context.cursor_position",
                probs,
                ws,
                placement=False,
            )
            if "cursor_position" in ctx
            else probs.add(where, "ide_context.cursor_position", "missing")
        )
        gs = _get(ctx, "git_status", str, where, probs, "ide_context.git_status")
        vp_obj = (
            _get(ctx, "viewport", dict, where, probs, "ide_context.viewport", required=False) or {}
        )
        vp = Viewport()
        for key, typ in (
            ("scroll_top_line", int),
            ("line_height_px", (int, float)),
            ("char_width_px", (int, float)),
            ("gutter_px", (int, float)),
            ("zoom", (int, float)),
        ):
            if key in vp_obj:
                val = _get(vp_obj, key, typ, where, probs, f"ide_context.viewport.{key}")
                if val is not None and not math.isfinite(val):  # json.loads reads NaN and Infinity
                    probs.add(
                        where, f"ide_context.viewport.{key}", f"must be a finite number, got {val}"
                    )
                elif val is not None and (
                    val < 0 or (key != "scroll_top_line" and key != "gutter_px" and val == 0)
                ):
                    probs.add(where, f"ide_context.viewport.{key}", f"must be positive, got {val}")
        if not any(p.startswith(f"{where}: ide_context.viewport") for p in probs.items):
            vp = Viewport(**{k: vp_obj[k] for k in vp_obj if k in Viewport.__dataclass_fields__})
            unknown = sorted(set(vp_obj) - set(Viewport.__dataclass_fields__))
            if unknown:
                probs.add(where, "ide_context.viewport", f"unknown key(s): {', '.join(unknown)}")
        if files is not None and cur is not None and gs is not None:
            ide = IdeContext(tuple(files), cur, gs, vp)
    trace_raw = _get(obj, "execution_trace", list, where, probs, "execution_trace")
    steps: list[Step] = []
    for i, st in enumerate(trace_raw or []):
        p = f"execution_trace[{i}]"
        if not isinstance(st, dict):
            probs.add(where, p, f"must be an object, got {type(st).__name__}")
            continue
        num = _get(st, "step", int, where, probs, f"{p}.step")
        tool = _get(st, "tool_called", str, where, probs, f"{p}.tool_called")
        args = _get(st, "tool_args", dict, where, probs, f"{p}.tool_args")
        res = _get(st, "execution_result", dict, where, probs, f"{p}.execution_result")
        if num is not None and num != i + 1:
            probs.add(
                where,
                f"{p}.step",
                f"steps must be numbered 1..n in order; expected {i + 1}, got {num}",
            )
        if tool is not None and tool not in tools.tool_names():
            probs.add(
                where,
                f"{p}.tool_called",
                f"unknown tool {tool!r}; known: {', '.join(tools.tool_names())}",
            )
        elif tool is not None and args is not None:
            problem = tools.validate(tool, args)
            if problem:
                probs.add(where, f"{p}.tool_args", problem)
        if None not in (num, tool, args, res):
            steps.append(Step(num, tool, args, res))
    if trace_raw is not None and not trace_raw:
        probs.add(where, "execution_trace", "must hold at least one step")
    ver = _get(obj, "verify", dict, where, probs, "verify", required=False) or {}
    vfiles = ver.get("test_files", [])
    if not isinstance(vfiles, list) or not all(isinstance(f, str) for f in vfiles):
        probs.add(where, "verify.test_files", "must be a list of strings")
        vfiles = []
    for f in vfiles:
        if ws is not None and ws.is_dir() and (problem := _sandbox_file_problem(ws, f, "a file")):
            probs.add(where, "verify.test_files", problem)
    target = (
        _cursor(obj["cursor_target"], where, "cursor_target", probs, ws, placement=True)
        if "cursor_target" in obj
        else probs.add(where, "cursor_target", "missing")
    )
    held = (
        _held_out_folder(obj["held_out_tests"], where, root, probs, ws)
        if "held_out_tests" in obj
        else None
    )
    if len(probs.items) > n_before:
        return None
    base_dir, patch_files = None, ()
    if isinstance(ws_rel, dict):  # sound, or a problem was added above
        base_dir = _base_folder(root, ws_rel["base"])
        patch_files = tuple(sorted({e["file"] for e in ws_rel["patch"]}))
    return Session(
        sid, instr, ide, tuple(steps), final, ws, tuple(vfiles), intent, target, raw=obj,
        sandbox_env=sandbox.env, sandbox_memory_mb=sandbox.memory_mb, held_out_dir=held,
        base_dir=base_dir, patch_files=patch_files,
    )  # fmt: skip


MAX_HELD_OUT_BYTES = 4 << 20


def _held_out_folder(
    rel: Any, where: str, root: Path, probs: _Problems, ws: Path | None
) -> Path | None:
    """``held_out_tests``: a folder inside the suite whose files are test files at workspace paths
    (protected by name or place, so that workspace code may not load them and changing one is
    seen). A file may be new, or replace a workspace test file that the session ships stripped of
    the held-out cases. Problems are added to ``probs``; the folder is returned when sound."""

    field_ = "held_out_tests"
    folder = _base_folder(root, rel)
    if folder is None:
        probs.add(where, field_, "must name a folder inside the suite")
        return None
    files = list(workspace_paths(folder))
    if not files:
        probs.add(where, field_, f"{rel} holds no file")
        return None
    total = 0
    for name, p in files:
        total += p.stat().st_size
        if not is_protected(name):
            probs.add(
                where,
                field_,
                f"{name} is not a test path (a test folder, or a name such as *.test.js), "
                "so workspace code could load it",
            )
        elif ws is not None and (ws / name).is_symlink():
            probs.add(where, field_, f"{name} replaces a symlink of the workspace")
    if total > MAX_HELD_OUT_BYTES:
        probs.add(where, field_, f"{rel} holds {total} bytes, over {MAX_HELD_OUT_BYTES}")
    return folder


def _base_folder(root: Path, rel: Any) -> Path | None:
    """A folder inside the suite, or None."""
    if not isinstance(rel, str):
        return None
    try:
        p = (root / rel).resolve()
    except (OSError, ValueError):
        return None
    return p if p.is_dir() and root.resolve() in p.parents else None


@functools.cache
def base_digest(base: Path) -> str:
    """Digest of the files a base snapshot gives the sandbox (once per base and load_suite)."""

    h = hashlib.sha256()
    for rel, p in workspace_paths(base):
        h.update(rel.encode() + b"\0" + hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def _patched_workspace(spec: dict, where: str, root: Path, probs: _Problems) -> Path | None:
    """``{"base": FOLDER, "patch": [{"file", "old", "new"}, ...]}``: the base snapshot with each
    edit applied in order (each ``old`` exactly once in the file as it is then), materialised once
    under the ETAI cache (base files hard-linked, edited ones written), so a suite stores one copy
    of its project however many sessions it holds."""

    unknown = sorted(set(spec) - {"base", "patch"})
    if unknown:
        probs.add(where, "workspace", f"unknown key(s): {', '.join(unknown)}")
    base = _base_folder(root, spec.get("base"))
    if base is None:
        probs.add(where, "workspace.base", "must name a folder inside the suite")
        return None
    patch = spec.get("patch")
    if not isinstance(patch, list) or not patch:
        probs.add(where, "workspace.patch", "must be a non-empty list of {file, old, new}")
        return None
    texts: dict[str, str] = {}
    for i, e in enumerate(patch):
        p = f"workspace.patch[{i}]"
        ok = isinstance(e, dict) and set(e) == {"file", "old", "new"}
        if not ok or not all(isinstance(e[k], str) for k in ("file", "old", "new")):
            probs.add(where, p, "must be an object of three strings: file, old, new")
            return None
        if e["file"] not in texts:
            if problem := _sandbox_file_problem(base, e["file"], "a file"):
                probs.add(where, f"{p}.file", problem)
                return None
            try:
                texts[e["file"]] = (base / e["file"]).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                probs.add(where, f"{p}.file", f"{e['file']} is not a UTF-8 text file of the base")
                return None
        n = texts[e["file"]].count(e["old"]) if e["old"] else 0
        if n != 1:
            probs.add(where, f"{p}.old", f"occurs {n} times in {e['file']} (must be once)")
            return None
        texts[e["file"]] = texts[e["file"]].replace(e["old"], e["new"], 1)
    key = hashlib.sha256((base_digest(base) + json.dumps(patch, sort_keys=True)).encode())
    target = cache_dir() / "workspaces" / key.hexdigest()[:24]
    if not target.is_dir():
        _materialise(base, texts, target)
    return target


def _materialise(base: Path, texts: dict[str, str], target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="ws-", dir=target.parent))
    for rel, p in workspace_paths(base):
        dst = tmp / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if rel in texts:
            dst.write_text(texts[rel], encoding="utf-8")
            continue
        try:
            os.link(p, dst)
        except OSError:  # another file system
            shutil.copy2(p, dst)
    try:  # the rename is atomic: a folder under its final name is complete
        tmp.rename(target)
    except OSError:  # built by a concurrent loader meanwhile: identical
        shutil.rmtree(tmp, ignore_errors=True)


def find_suite(name_or_path: str | Path) -> Path:
    """A bundled suite by name, or a folder path."""
    p = Path(name_or_path)
    if p.is_dir():
        return p.resolve()
    if (BUNDLED / str(name_or_path)).is_dir():
        return (BUNDLED / str(name_or_path)).resolve()
    bundled = sorted(d.name for d in BUNDLED.iterdir() if (d / "sessions.jsonl").is_file())
    raise InputError(
        f"no suite folder or bundled suite named {str(name_or_path)!r}; bundled: {', '.join(bundled)}"
    )


def load_suite(name_or_path: str | Path) -> Suite:
    root = find_suite(name_or_path)
    base_digest.cache_clear()  # once per base and load: a base changed since is hashed anew
    meta: dict[str, Any] = {}
    if (root / "suite.yaml").is_file():
        try:
            meta = yaml.safe_load(decode_utf8((root / "suite.yaml").read_bytes())) or {}
        except yaml.YAMLError as e:
            raise InputError(f"not valid YAML: {e}", where=str(root / "suite.yaml")) from None
        except ValueError as e:
            raise InputError(str(e), where=str(root / "suite.yaml")) from None
        if not isinstance(meta, dict):
            raise InputError("must be a mapping", where=str(root / "suite.yaml"))
    defaults = suite_defaults(meta, root)
    sandbox = _suite_sandbox(meta.get("sandbox"), root)
    jl = root / "sessions.jsonl"
    if not jl.is_file():
        raise InputError("sessions.jsonl is missing", where=str(root))
    probs = _Problems(jl)
    sessions: list[Session] = []
    seen: dict[str, int] = {}
    for n, raw in enumerate(jl.read_bytes().split(b"\n"), 1):
        try:
            line = decode_utf8(raw)
        except ValueError as e:
            probs.add(f"line {n}", "encoding", str(e))
            continue
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            probs.add(f"line {n}", "json", f"not valid JSON ({e.msg} at column {e.colno})")
            continue
        except (
            ValueError,
            RecursionError,
        ) as e:  # an integer over Python's digit limit; nesting too deep
            probs.add(f"line {n}", "json", f"not valid JSON ({type(e).__name__}: {str(e)[:120]})")
            continue
        sid = obj.get("session_id") if isinstance(obj, dict) else None
        where = f"line {n} (session {sid})" if isinstance(sid, str) else f"line {n}"
        if isinstance(sid, str) and sid in seen:
            probs.add(where, "session_id", f"duplicate id, first on line {seen[sid]}")
            continue
        if isinstance(sid, str):
            seen[sid] = n
        s = _session(obj, where, root, probs, sandbox)
        if s is not None:
            sessions.append(s)
    if not probs.items and not sessions:
        probs.add("sessions.jsonl", "sessions", "the suite holds no session")
    if probs.items:
        raise InputError(
            f"{len(probs.items)} problem(s):\n  " + "\n  ".join(probs.items), where=str(jl)
        )
    return Suite(
        str(meta.get("name", root.name)),
        root,
        str(meta.get("description", "")),
        defaults,
        tuple(sessions),
        sandbox,
    )


SUITE_KEYS = ("name", "description", "defaults", "sandbox")
DEFAULTS = {"k": 3, "max_steps": 10}  # what a run uses without -k / --max-steps (session_kind.py)


def suite_defaults(meta: dict, root: Path) -> dict[str, int]:
    """suite.yaml's keys and its ``defaults:``, checked by the one schema that `etai suite validate`
    and `etai run` both load through: whole numbers of at least 1, ``max_steps`` at least ``k`` (a
    run without flags refuses less), unknown keys named (a typo such as ``max_step`` would else be
    ignored and the run's own default used). One InputError listing every problem."""
    probs = [
        f"{k}: unknown key (known: {', '.join(SUITE_KEYS)})" for k in meta if k not in SUITE_KEYS
    ]
    obj = {} if meta.get("defaults") is None else meta["defaults"]
    if not isinstance(obj, dict):
        probs.append(f"defaults: must be a mapping of {' and '.join(DEFAULTS)}")
        obj = {}
    for k, v in obj.items():
        if k not in DEFAULTS:
            probs.append(f"defaults.{k}: unknown key (known: {', '.join(DEFAULTS)})")
        elif isinstance(v, bool) or not isinstance(v, int) or v < 1:
            probs.append(f"defaults.{k}: must be a whole number of at least 1, got {v!r}")
    if not probs:
        k, steps = obj.get("k", DEFAULTS["k"]), obj.get("max_steps", DEFAULTS["max_steps"])
        if steps < k:
            probs.append(f"defaults: max_steps must be at least k (max_steps={steps}, k={k})")
    if probs:
        where = str(root / "suite.yaml")
        raise InputError(f"{len(probs)} problem(s):\n  " + "\n  ".join(probs), where=where)
    return dict(obj)


def _suite_sandbox(obj: Any, root: Path) -> SuiteSandbox:
    """suite.yaml's ``sandbox: {env: {NAME: value}, node_modules: FOLDER, timeout_s: S, memory_mb: MB}``;
    InputError naming the key."""

    where = str(root / "suite.yaml")
    if obj is None:
        return SuiteSandbox()
    if not isinstance(obj, dict) or set(obj) - {"env", "node_modules", "timeout_s", "memory_mb"}:
        raise InputError(
            "sandbox: must be a mapping of env, node_modules, timeout_s and memory_mb", where=where
        )
    memory = obj.get("memory_mb")
    if memory is not None and (
        isinstance(memory, bool) or not isinstance(memory, int) or not 256 <= memory <= 16384
    ):
        raise InputError(
            f"sandbox.memory_mb: must be a whole number of MiB in [256, 16384], got {memory!r}",
            where=where,
        )
    timeout = obj.get("timeout_s")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 600
    ):
        raise InputError(f"sandbox.timeout_s: must be in (0, 600], got {timeout!r}", where=where)
    env = obj.get("env") or {}
    if not isinstance(env, dict):
        raise InputError("sandbox.env: must be a mapping of NAME: value", where=where)
    for k, v in env.items():
        if not isinstance(k, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k):
            raise InputError(f"sandbox.env: {k!r} is not a variable name", where=where)
        if k.upper().startswith(SUITE_ENV_REFUSED):
            raise InputError(
                f"sandbox.env: {k} may not be set by a suite (it would reach the sandbox's own "
                f"runner); refused: {', '.join(SUITE_ENV_REFUSED)}",
                where=where,
            )
        if not isinstance(v, (str, int, float)) or isinstance(v, bool):
            raise InputError(
                f"sandbox.env.{k}: must be a string, got {type(v).__name__}", where=where
            )
    deps = None
    if obj.get("node_modules") is not None:
        deps = _base_folder(root, obj["node_modules"])
        if deps is None or not (deps / "package.json").is_file():
            raise InputError(
                "sandbox.node_modules: must name a folder of the suite holding package.json and "
                "its lockfile",
                where=where,
            )
    return SuiteSandbox(tuple(sorted((k, str(v)) for k, v in env.items())), deps, timeout, memory)
