"""A session's workspace on disk: which files a sandbox receives, and how much it may hold.

One walk for everyone who reads a workspace (the loader's checks, content hashes, the suite
builder, the sandbox backends that copy it in), so all of them see the same files.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

from harness.base.errors import InputError

MAX_WORKSPACE_BYTES = 32 << 20
SKIP_DIRS = {"node_modules", ".git"}


def workspace_paths(root: Path) -> Iterator[tuple[str, Path]]:
    """The files a sandbox receives, as (relative path, path): neither node_modules nor .git, nor
    symlinks or anything below one (``rglob`` does not enter linked folders)."""
    for p in sorted(root.rglob("*")):
        parts = p.relative_to(root).parts
        if any(part in SKIP_DIRS for part in parts) or p.is_symlink() or not p.is_file():
            continue
        yield "/".join(parts), p


def workspace_files(root: Path) -> dict[str, str]:
    """The workspace as {relative path: base64 content}."""
    if not root.is_dir():
        raise InputError("workspace folder does not exist", where=str(root))
    files: dict[str, str] = {}
    total = 0
    for rel, p in workspace_paths(root):
        data = p.read_bytes()
        total += len(data)
        if total > MAX_WORKSPACE_BYTES:
            raise InputError(
                f"workspace is larger than {MAX_WORKSPACE_BYTES >> 20} MiB", where=str(root)
            )
        files[rel] = base64.b64encode(data).decode()
    return files


def decode_utf8(raw: bytes) -> str:
    """``raw`` as text, or ValueError naming the first byte that is not UTF-8 and its offset."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(
            f"not valid UTF-8 (byte 0x{raw[e.start]:02x} at offset {e.start})"
        ) from None


def text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """The numbered lines of a UTF-8 file; InputError naming ``path:line`` at a line that is not UTF-8."""
    for n, raw in enumerate(path.read_bytes().split(b"\n"), 1):
        try:
            yield n, decode_utf8(raw)
        except ValueError as e:
            raise InputError(str(e), where=f"{path}:{n}") from None
