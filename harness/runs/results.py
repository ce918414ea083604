"""Crash-safe result storage: append-only JSONL with fsync, a tolerant loader, atomic summaries.

Every row carries a ``cache_key``. A rerun skips keys already stored (resume); a row torn by a
SIGKILL mid-write is ignored by the loader and its key re-run; duplicate keys (a crash between
write and bookkeeping) are dropped deterministically, first row wins. Rows whose status is
``infra_error`` are not terminal: a rerun retries them (docs/sandbox.md#crash-safety).

A row is all or nothing: a write that fails (a full disk) is cut back and raised as InfraError, so
the file never holds half a row. ``RunFolder`` gives one run at a time the folder (see there).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness.base.errors import EtaiError, FolderBusy, InfraError, InputError
from harness.session.records import NON_TERMINAL, problem, stamp

RESULTS = "results.jsonl"
LOCK = ".etai.lock"


def cache_key(*parts: Any) -> str:
    """Stable key over JSON-able parts (agent spec, fingerprints, content hashes, k, sample)."""
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def storage_error(e: OSError, where: Path, what: str) -> EtaiError:
    """A failed write as a typed error: a full or failing disk is the machine's (InfraError, exit 3);
    anything else (read-only, no permission, not a folder) is the user's choice of place (exit 2)."""
    if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO):
        return InfraError(f"{where}: {what}: {e.strerror or e}")
    return InputError(f"{what}: {e.strerror or e}", where=str(where))


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write JSON to a temp file, fsync, then rename over ``path``: readers never see half a file."""
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def write_text_atomic(path: Path, text: str) -> None:
    """Write to a temp file, fsync, then rename over ``path``: readers never see half a file."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(text.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise storage_error(e, path, "cannot write") from e


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
        for n, raw in enumerate(f, 1):
            if not raw.endswith(b"\n"):
                break  # torn last line: that row is re-run
            try:
                row = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(row, dict) or "cache_key" not in row:
                continue  # valid JSON but not a row (a hand-edited file): skipped like a torn one
            wrong = problem(row)
            if wrong:
                raise InputError(wrong, where=f"{path}: line {n}")
            key = row["cache_key"]
            old = by_key.get(key)
            if old is None or (
                old.get("status") in NON_TERMINAL and row.get("status") not in NON_TERMINAL
            ):
                by_key[key] = row
    return list(by_key.values())


def append_line(path: Path, line: bytes, *, new: bool = False) -> None:
    """Append one whole line and fsync it, all or nothing: a failed write (a full disk) is cut
    back, so a reader never sees half a line; ``new``: the file did not exist and is removed again.
    The one append of the project (result rows, HumanEval completions)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        try:
            view = memoryview(line)
            while view:  # a whole line per call, normally; a short write (disk filling) goes on
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except OSError:
            os.ftruncate(fd, size)
            if new:
                os.unlink(path)
            raise
    finally:
        os.close(fd)


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
        row = stamp(
            row
        )  # schema_version; a row without a cache_key or with an unknown status is a bug
        line = (json.dumps(row, sort_keys=True, default=str) + "\n").encode()
        with self._lock:
            new = not self.path.exists()
            try:
                self._write(line, new)
                if new:
                    _fsync_dir(self.dir)
            except OSError as e:
                raise storage_error(e, self.path, "cannot write a result row") from e
            self._rows = [r for r in self._rows if r["cache_key"] != row["cache_key"]] + [row]
            if row.get("status") not in NON_TERMINAL:
                self._terminal.add(row["cache_key"])

    def _write(self, line: bytes, new: bool) -> None:
        append_line(self.path, line, new=new)

    def rows(self, keys: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Rows of this run; with ``keys``, only those (so a summary covers exactly this command's work)."""
        if keys is None:
            return list(self._rows)
        wanted = set(keys)
        return [r for r in self._rows if r["cache_key"] in wanted]


class RunFolder:
    """A run's folder, held for the run's life: ``with RunFolder(path) as folder: ...``.

    The hold is an advisory lock (``flock``) on ``.etai.lock``, which names the holder's pid: a
    second run on the same folder gets FolderBusy at once, naming it. The kernel drops a lock with
    its process, so a lock left by a SIGKILLed or crashed run is free and simply taken over. A folder
    that cannot be written (a file, read-only) is an InputError here, before anything runs. If this
    run created the folder and leaves nothing in it (it stopped on bad input or a missing engine),
    the folder goes again.
    """

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self._made: list[Path] = []  # folders this run created, outermost first
        self._fd: int | None = None

    def __enter__(self) -> RunFolder:
        if self.path.exists() and not self.path.is_dir():
            raise InputError(
                "the run folder is a file; name a folder with --out", where=str(self.path)
            )
        self._made = [d for d in (*reversed(self.path.parents), self.path) if not d.exists()]
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self._fd = self._lock()
        except OSError as e:
            self._remove_if_empty()
            raise storage_error(e, self.path, "cannot write the run folder") from e
        except BaseException:
            self._remove_if_empty()
            raise
        return self

    def _lock(self) -> int:
        lock = self.path / LOCK
        while True:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
                os.close(fd)
                pid = int(holder) if holder.isdigit() else None
                raise FolderBusy(
                    f"the run folder is in use by another etai run (pid {pid or 'unknown'}); "
                    "wait for it to end or choose another --out",
                    where=str(self.path),
                    holder=pid,
                ) from None
            try:  # the file locked must still be the one named (a run ending removes an empty folder's lock)
                if os.fstat(fd).st_ino == os.stat(lock).st_ino:
                    break
            except FileNotFoundError:
                pass
            os.close(fd)
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            os.fsync(fd)
        except OSError:
            os.close(fd)
            raise
        return fd

    def __exit__(self, *exc: object) -> None:
        fd, self._fd = self._fd, None
        try:
            self._remove_if_empty()
        finally:
            if fd is not None:
                os.close(fd)

    def _remove_if_empty(self) -> None:
        if not self._made:
            return
        try:
            if set(os.listdir(self.path)) - {LOCK}:
                return
            (self.path / LOCK).unlink(missing_ok=True)
        except FileNotFoundError:
            pass  # mkdir failed part of the way: remove the parents it made
        except OSError:
            return
        for d in reversed(self._made):
            try:
                d.rmdir()
            except FileNotFoundError:
                continue
            except OSError:
                return
