"""HarnessEval's asynchronous mode: at the interval a detached copy of the checkpoint is taken
(``snapshot_hf``, what training waits for), written as an ``hf:`` folder in a thread of rank 0 and
evaluated by a separate process (``etai run --agent hf:FOLDER``, or any command template, e.g. on
spare devices or through ssh); training does not wait for the writing or the process. A finished process's metrics are logged
at the current step with the batch its checkpoint belongs to as ``harness/checkpoint_batch``, at
the first batch end after it finished, and at fit end, which waits for the outstanding ones
(bounded).

Only global rank 0 starts and watches processes (the snapshot is collective: every rank takes
part, rank 0 keeps it), so only rank 0 logs these metrics. The process is judged by its rows: the metrics
come from ``<out>/harness-eval/ba<N>/results.jsonl`` exactly as a synchronous evaluation's do; a
process that exits with neither 0 nor 3 (etai run's "incomplete"), or leaves no rows, is
``harness/error = 1`` for its batch with the end of its log in a warning.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from finetune.errors import ConfigError

log = logging.getLogger(__name__)
KEY = "callbacks.harness_eval.async_command"
# What etai run is given by default: the same sessions, budgets and generation options as a
# synchronous evaluation, into the same folder a synchronous one would write.
DEFAULT_COMMAND = (
    "{etai} run --suite {suite} --agent hf:{folder} -k {k} --max-steps {max_steps} "
    "--workers {workers} --sandbox {sandbox} --out {out} --no-progress {sessions} {generation}"
)
PLACEHOLDERS = (
    "etai",
    "python",
    "suite",
    "folder",
    "out",
    "batch",
    "k",
    "max_steps",
    "workers",
    "sandbox",
    "sessions",
    "generation",
)
_FLAGS = {"temperature": "--temperature", "top_p": "--top-p", "max_new_tokens": "--max-new-tokens"}
LOG_NAME = "async.log"


def etai_command() -> str:
    """The ``etai`` of this environment: the script beside this Python, else ``python -m``."""
    script = Path(sys.executable).with_name("etai")
    return str(script) if script.is_file() else f"{sys.executable} -m harness.cli"


def render(template: str, values: Mapping[str, Any]) -> list[str]:
    """The argv of one evaluation; ConfigError naming a placeholder the template may not use."""
    try:
        text = template.format(**values)
    except (KeyError, IndexError, ValueError) as e:
        raise ConfigError(
            KEY, f"bad template {template!r} ({type(e).__name__}: {e}); known: {PLACEHOLDERS}"
        ) from None
    argv = shlex.split(text)
    if not argv:
        raise ConfigError(KEY, "the command template is empty")
    return argv


def values_of(cb: Any, *, folder: Path, out: Path, batch: int) -> dict[str, str]:
    """The placeholders' values for HarnessEval ``cb`` (flags already quoted for the shell)."""
    gen = [
        x
        for key, flag in _FLAGS.items()
        if key in cb.generation
        for x in (flag, str(cb.generation[key]))
    ]
    return {
        "etai": etai_command(),
        "python": shlex.quote(sys.executable),
        "suite": shlex.quote(str(cb.suite_arg)),
        "folder": shlex.quote(str(folder)),
        "out": shlex.quote(str(out)),
        "batch": str(batch),
        "k": str(cb.k),
        "max_steps": str(cb.max_steps),
        "workers": str(cb.workers),
        "sandbox": shlex.quote(cb.sandbox),
        "sessions": shlex.join(x for s in cb.session_ids for x in ("--session", s)),
        "generation": shlex.join(gen),
    }


@dataclass
class Pending:
    """One evaluation: its checkpoint's batch and folders; the export written (``write``), then the
    process started, both in a thread of its own; when it started, was written and ended."""

    batch: int
    folder: Path
    out: Path
    argv: list[str]
    write: Callable[[], Any] | None = None
    started: float = field(default_factory=time.monotonic)
    written: float | None = None
    ended: float | None = None
    proc: subprocess.Popen | None = None
    error: str | None = None  # the export could not be written, or the process not started
    _killed: bool = field(default=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _waiter: threading.Thread | None = field(default=None, repr=False)

    def start(self) -> None:
        # A thread per evaluation: the export is written off the training thread (training waited
        # for the snapshot only), and the process's end is noted when it happens, so eval_seconds
        # is its own wall clock, not the time until a batch end happened to look.
        def run() -> None:
            try:
                if self.write is not None:
                    self.write()
                self.written = time.monotonic()
                with self._lock:
                    if self._killed:
                        return
                    self.proc = _popen(self.argv, self.out)
                self.proc.wait()
            except Exception as e:  # noqa: BLE001 - reported as this evaluation's harness/error
                self.error = f"{type(e).__name__}: {e}"
            finally:
                self.ended = time.monotonic()

        self._waiter = threading.Thread(target=run, name=f"etai-async-ba{self.batch}", daemon=True)
        self._waiter.start()

    def done(self) -> bool:
        return self.ended is not None

    def kill(self) -> None:
        """The whole process group (etai run's own workers and sandboxes' clients too); an export
        still being written is let finish, and no process is started after it."""
        with self._lock:
            self._killed = True
            proc = self.proc
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=30)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
        if self._waiter is not None:
            self._waiter.join(timeout=None if proc is None else 5)
        self.ended = self.ended or time.monotonic()


def _popen(argv: Sequence[str], out: Path) -> subprocess.Popen:
    with open(out / LOG_NAME, "ab") as logf:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=logf,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: killed whole, and no Ctrl-C from ours
        )


class AsyncEvals:
    """The evaluation processes of one training run (rank 0's; empty elsewhere)."""

    def __init__(
        self,
        template: str,
        *,
        metrics_of: Callable[[Sequence[Mapping[str, Any]]], dict[str, float]],
        keep_exports: bool,
        max_running: int,
    ):
        self.template, self.metrics_of = template, metrics_of
        self.keep_exports, self.max_running = keep_exports, max_running
        self.pending: list[Pending] = []

    def busy(self) -> bool:
        return sum(not p.done() for p in self.pending) >= self.max_running

    def launch(
        self,
        argv: Sequence[str],
        *,
        batch: int,
        folder: Path,
        out: Path,
        write: Callable[[], Any] | None = None,
    ) -> Pending:
        """Start ``argv`` for the checkpoint of ``batch``, after ``write()`` (the export into
        ``folder``) has returned; both happen in the evaluation's thread, so this returns at once."""
        out.mkdir(parents=True, exist_ok=True)
        p = Pending(batch, folder, out, list(argv), write)
        p.start()
        self.pending.append(p)
        log.info("harness eval of batch %d: started %s (log %s)", batch, shlex.join(argv), out)
        return p

    def collect(self, *, wait_s: float = 0.0) -> list[tuple[int, dict[str, float]]]:
        """(batch, metrics) of every process that has ended, waiting up to ``wait_s`` for the rest;
        those still running after that are killed and reported as ``harness/error``."""
        deadline = time.monotonic() + wait_s
        while wait_s > 0 and not all(p.done() for p in self.pending):
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
        out = []
        for p in list(self.pending):
            if not p.done():
                if wait_s <= 0:
                    continue
                log.warning(
                    "harness eval of batch %d: still running after %.0f s at fit end; killed",
                    p.batch,
                    wait_s,
                )
                p.kill()
                out.append((p.batch, {"harness/error": 1.0, **self._seconds(p)}))
            else:
                out.append((p.batch, self._finished(p)))
            self.pending.remove(p)
            if not self.keep_exports:
                shutil.rmtree(p.folder, ignore_errors=True)
        return out

    def close(self) -> None:
        for p in self.pending:
            if not p.done():
                p.kill()
        self.pending.clear()

    def _seconds(self, p: Pending) -> dict[str, float]:
        """The evaluation process's wall clock, and the export's writing (off the training thread)."""
        end, written = p.ended or time.monotonic(), p.written
        if written is None:
            return {"harness/write_seconds": end - p.started}
        return {"harness/write_seconds": written - p.started, "harness/eval_seconds": end - written}

    def _finished(self, p: Pending) -> dict[str, float]:
        from harness.base.errors import InputError
        from harness.runs.results import read_rows

        if p.error is not None or p.proc is None:
            log.warning("harness eval of batch %d failed: %s", p.batch, p.error or "not started")
            return {"harness/error": 1.0, **self._seconds(p)}
        rc = p.proc.returncode
        try:
            rows = read_rows(p.out / "results.jsonl")
        except InputError as e:
            rows, rc = [], f"{rc}; {e}"
        if rc not in (0, 3) or not rows:  # 3: etai run finished with rows left to retry
            tail = _tail(p.out / LOG_NAME)
            log.warning(
                "harness eval of batch %d failed (exit %s, %d rows); log %s:\n%s",
                p.batch,
                rc,
                len(rows),
                p.out / LOG_NAME,
                tail,
            )
            return {"harness/error": 1.0, **self._seconds(p)}
        return {**self.metrics_of(rows), **self._seconds(p)}


def _tail(path: Path, n: int = 2000) -> str:
    try:
        return path.read_bytes()[-n:].decode("utf-8", "replace")
    except OSError:
        return "(no log)"
