"""Where a command will write, checked when the CLI dispatches it, before it does any work.

`etai gate` writes its --junit, --markdown and --json files, `etai report` its --out folder and
`etai view --out` its HTML file only at the end, after loading runs: a folder given for a file, a
file for the folder, or a place that cannot be written was a traceback there (exit 1), after all
that work (`etai view --out` given a folder wrote view.html into it: one flag, one meaning).
The commands live in reports/cli.py (an entry point); their output flags are named here by
command, so that any of them is an InputError (exit 2) first. Creating missing folders is left to
the command, which does so (reports/_gate_out.py, reports/_render.py)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from harness.base.errors import InputError

# command -> (attribute, flag, "file" | "folder")
OUTPUTS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "gate": (
        ("junit", "--junit", "file"),
        ("markdown", "--markdown", "file"),
        ("json", "--json", "file"),
    ),
    "report": (("out", "--out", "folder"),),
    "view": (("out", "--out", "file"),),
}


def check_outputs(args: argparse.Namespace) -> None:
    for attr, flag, kind in OUTPUTS.get(getattr(args, "command", ""), ()):
        value = getattr(args, attr, None)
        if isinstance(value, str):
            problem = writable_problem(Path(value), kind)
            if problem:
                raise InputError(f"{value}: {problem}", where=flag)


def writable_problem(path: Path, kind: str) -> str | None:
    """Why ``path`` cannot be written as a ``kind`` ("file" or "folder"), or None."""
    if path.is_dir():
        if kind == "file":
            return "is a folder; name a file"
        return None if os.access(path, os.W_OK | os.X_OK) else "the folder cannot be written"
    if path.exists() or path.is_symlink():
        if kind == "folder":
            return "is a file; name a folder"
        return None if os.access(path, os.W_OK) else "the file cannot be written"
    parent = path.parent
    while not parent.exists():  # the command makes the missing folders: the first one that is
        parent = parent.parent
    if not parent.is_dir():
        return f"{parent} is a file, not a folder"
    if not os.access(parent, os.W_OK | os.X_OK):  # also false on a read-only file system
        return f"{parent} cannot be written"
    return None
