"""HarnessEval's asynchronous mode: at the interval the checkpoint is exported (``export_hf``) and
evaluated by a separate process (``etai run --agent hf:FOLDER``, or any command template, e.g. on
spare devices or through ssh); training does not wait. A finished process's metrics are logged
at the current step with the batch its checkpoint belongs to as ``harness/checkpoint_batch``, at
the first batch end after it finished, and at fit end, which waits for the outstanding ones
(bounded).

Only global rank 0 starts and watches processes (the export is collective: every rank takes part,
rank 0 writes), so only rank 0 logs these metrics. The process is judged by its rows: the metrics
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
    """One evaluation process: its checkpoint's batch, folders, and when it started and ended."""

    batch: int
    folder: Path
    out: Path
    proc: subprocess.Popen
    started: float
    ended: float | None = None
    _waiter: threading.Thread | None = field(default=None, repr=False)

    def watch(self) -> None:
        # A thread per process only to note when it ended: eval_seconds is the process's own wall
        # clock, not the time until a batch end happened to look.
        def wait() -> None:
            self.proc.wait()
            self.ended = time.monotonic()

        self._waiter = threading.Thread(target=wait, name=f"etai-async-ba{self.batch}", daemon=True)
        self._waiter.start()

    def done(self) -> bool:
        return self.ended is not None

    def kill(self) -> None:
        """The whole process group: etai run's own workers and sandboxes' clients too."""
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        if self._waiter is not None:
            self._waiter.join(timeout=5)
        self.ended = self.ended or time.monotonic()


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

    def launch(self, argv: Sequence[str], *, batch: int, folder: Path, out: Path) -> Pending:
        out.mkdir(parents=True, exist_ok=True)
        with open(out / LOG_NAME, "ab") as logf:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=logf,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own group: killed whole, and no Ctrl-C from ours
            )
        p = Pending(batch, folder, out, proc, time.monotonic())
        p.watch()
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
        return {"harness/eval_seconds": (p.ended or time.monotonic()) - p.started}

    def _finished(self, p: Pending) -> dict[str, float]:
        from harness.base.errors import InputError
        from harness.runs.results import read_rows

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
