"""The built-in tools. Registration order is the tool index used by model heads: append only."""

from __future__ import annotations

import base64
import json
import posixpath
from typing import Any

from harness.grading import jest
from harness.sandbox import ToolFailure
from harness.tools import HARNESS_ONLY, Tool, register

_PATH = {"type": "string", "minLength": 1, "description": "path relative to the workspace root"}


def _inside(rel: str) -> str:
    """Refuse a path that leaves the workspace, in the runner's words (Jest itself would just find no test)."""
    norm = posixpath.normpath(rel)
    if norm.startswith("/") or norm == ".." or norm.startswith("../"):
        raise ToolFailure(f"path {json.dumps(rel, ensure_ascii=False)} leaves the workspace")
    return rel


def _obj(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": False,
    }


def _jest_run(sb, args):
    files = [_inside(args["test_file"])] if args.get("test_file") else None
    timeout = float(args.get("timeout_s", sb.limits.timeout_s))
    answer = sb.request(
        "jest",
        {
            "test_files": files,
            "name_pattern": args.get("name_pattern"),
            "timeout_ms": int(timeout * 1000),
            "output_cap": sb.limits.output_cap,
        },
        timeout=timeout,
    )
    run = jest.from_runner(answer, guarded=sb.limits.guard)
    return {**run.to_dict(), HARNESS_ONLY: {"jest_s": run.jest_s}}


register(
    Tool(
        "jest_run",
        "Run the workspace's Jest tests (all, one test file, or tests whose name matches a pattern).",
        _obj(
            {
                "test_file": _PATH,
                "name_pattern": {"type": "string"},
                "timeout_s": {"type": "number", "exclusiveMinimum": 0, "maximum": 600},
            },
            [],
        ),
        _jest_run,
        status_of=lambda d: d["status"],
    )
)


def _file_read(sb, args):
    r = sb.request("read", {"path": args["file"]})
    content = base64.b64decode(r["content_b64"]).decode("utf-8", "replace")
    return {
        "file": args["file"],
        "content": content,
        "size": r["size"],
        "truncated": r["truncated"],
    }


register(
    Tool("file_read", "Read a file of the workspace.", _obj({"file": _PATH}, ["file"]), _file_read)
)


def _file_write(sb, args):
    r = sb.request(
        "write",
        {"path": args["file"], "content_b64": base64.b64encode(args["content"].encode()).decode()},
    )
    return {"file": r["path"], "bytes": r["bytes"], "success": True}


register(
    Tool(
        "file_write",
        "Create or overwrite a file of the workspace.",
        _obj({"file": _PATH, "content": {"type": "string"}}, ["file", "content"]),
        _file_write,
    )
)


def _file_edit(sb, args):
    r = sb.request(
        "edit",
        {
            "path": args["file"],
            "old": args["old"],
            "new": args["new"],
            "all": bool(args.get("all", False)),
        },
    )
    return {
        "file": r["path"],
        "replacements": r["replacements"],
        "line": r["line"],
        "column": r["column"],
        "success": True,
    }


register(
    Tool(
        "file_edit",
        "Replace an exact string in a file (unique unless all=true).",
        _obj(
            {
                "file": _PATH,
                "old": {"type": "string", "minLength": 1},
                "new": {"type": "string"},
                "all": {"type": "boolean"},
            },
            ["file", "old", "new"],
        ),
        _file_edit,
    )
)


def _git(cmd):
    def run(sb, args):
        paths = [args["file"]] if args.get("file") else []
        return {
            "output": sb.request("git", {"cmd": cmd, "args": ["--", *paths] if paths else []})[
                "text"
            ]
        }

    return run


register(
    Tool(
        "git_diff",
        "Show what changed in the workspace since the session started.",
        _obj({"file": _PATH}, []),
        _git("diff"),
    )
)
register(
    Tool(
        "git_status",
        "List changed, added and deleted files (porcelain format).",
        _obj({}, []),
        _git("status"),
    )
)


def _list_files(sb, args):
    return sb.request("list", {"path": args.get("path", "."), "max": args.get("max", 1000)})


register(
    Tool(
        "list_files",
        "List the workspace's files (node_modules and .git excluded).",
        _obj({"path": _PATH, "max": {"type": "integer", "minimum": 1, "maximum": 10000}}, []),
        _list_files,
    )
)


def _search(sb, args):
    flags = "i" if args.get("ignore_case") else ""
    return sb.request(
        "search",
        {
            "pattern": args["pattern"],
            "path": args.get("path", "."),
            "max": args.get("max", 200),
            "flags": flags,
        },
    )


register(
    Tool(
        "search",
        "Search the workspace's files for a regular expression (like grep -n).",
        _obj(
            {
                "pattern": {"type": "string", "minLength": 1},
                "path": _PATH,
                "ignore_case": {"type": "boolean"},
                "max": {"type": "integer", "minimum": 1, "maximum": 5000},
            },
            ["pattern"],
        ),
        _search,
    )
)
