"""Crash-safe result storage: append-only JSONL with fsync, a tolerant loader, atomic summaries.

Every row carries a ``cache_key``. A rerun skips keys already stored (resume); a row torn by a
SIGKILL mid-write is ignored by the loader and its key re-run; duplicate keys (a crash between
write and bookkeeping) are dropped deterministically, first row wins. Rows whose status is
``infra_error`` are not terminal: a rerun retries them (research/reliability.md §5).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any, Iterable

RESULTS = "results.jsonl"
NON_TERMINAL = {"infra_error"}


def cache_key(*parts: Any) -> str:
    """Stable key over JSON-able parts (agent spec, fingerprints, content hashes, k, sample)."""
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write JSON to a temp file, fsync, then rename over ``path``: readers never see half a file."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=True, default=str)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _fsync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_rows(path: Path) -> list[dict[str, Any]]:
    """All complete rows of a results file, deduplicated by cache_key.

    The first terminal row of a key wins; an ``infra_error`` row is replaced by a later retry.
    """
    path = Path(path)
    if not path.exists():
        return []
    by_key: dict[str, dict[str, Any]] = {}
    with open(path, "rb") as f:
        for raw in f:
            if not raw.endswith(b"\n"):
                break  # torn last line: that row is re-run
            try:
                row = json.loads(raw)
            except ValueError:
                continue
            key = row.get("cache_key")
            old = by_key.get(key)
            if old is None or (old.get("status") in NON_TERMINAL and row.get("status") not in NON_TERMINAL):
                by_key[key] = row
    return list(by_key.values())


class ResultStore:
    """The results file of one run directory; one writer per process, thread-safe."""

    def __init__(self, run_dir: Path | str):
        self.dir = Path(run_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / RESULTS
        self._lock = threading.Lock()
        self._repair_torn_tail()
        self._rows = read_rows(self.path)
        self._terminal = {r["cache_key"] for r in self._rows if r.get("status") not in NON_TERMINAL}

    def _repair_torn_tail(self) -> None:
        # Cut a torn last line so that the next append starts on a line of its own.
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        with open(self.path, "rb+") as f:
            f.seek(-1, os.SEEK_END)
            if f.read(1) == b"\n":
                return
            f.seek(0)
            data = f.read()
            f.truncate(data.rfind(b"\n") + 1)
            f.flush()
            os.fsync(f.fileno())

    def has(self, key: str) -> bool:
        return key in self._terminal

    def append(self, row: dict[str, Any]) -> None:
        if "cache_key" not in row:
            raise ValueError("a result row needs a cache_key")
        line = (json.dumps(row, sort_keys=True, default=str) + "\n").encode()
        with self._lock:
            new = not self.path.exists()
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)  # one write of a whole line on an O_APPEND fd
                os.fsync(fd)
            finally:
                os.close(fd)
            if new:
                _fsync_dir(self.dir)
            self._rows = [r for r in self._rows if r["cache_key"] != row["cache_key"]] + [row]
            if row.get("status") not in NON_TERMINAL:
                self._terminal.add(row["cache_key"])

    def rows(self, keys: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Rows of this run; with ``keys``, only those (so a summary covers exactly this command's work)."""
        if keys is None:
            return list(self._rows)
        wanted = set(keys)
        return [r for r in self._rows if r["cache_key"] in wanted]
