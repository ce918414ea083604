"""Composer callbacks that close the loop with the harness: ``HarnessEval`` runs the suite on the
model being trained every N batches; ``ExportHF`` writes the ``hf:FOLDER`` export at fit end.

HarnessEval runs on every rank and never raises into the trainer:

1. Due? ``create_interval_scheduler(interval, checkpoint_events=False)``: on ``BATCH_END`` for
   ``ba``/``sp``/``tok``/``dur`` intervals, ``EPOCH_END`` for ``ep``, and once more at
   ``FIT_END`` unless the last batch was just evaluated. Every rank decides the same.
2. The evaluation, sharded across ranks (finetune/sharded_eval.py) over the suites and sessions
   of finetune/evaluation.py, which also holds the metrics and the time budget (``budget_s``).
   Results go to ``<out>/harness-eval/ba<N>/`` (``results.jsonl``, ``summary.json``); ``out``
   defaults to the save folder, else ``runs/<run_name>``.
3. The metrics (computed from the rows with ``harness.runs.metrics.summarize``) are broadcast from
   rank 0 and logged on every rank (the destinations filter by rank). Any exception, on any
   rank, becomes ``harness/error = 1`` and a warning.

``mode: async`` (``finetune.async_eval``; it takes one suite): at the interval a detached copy of
the checkpoint is taken (every rank takes part; training waits for this only), and a thread of
rank 0 writes it to ``harness-eval/hf-ba<N>/`` and then starts ``async_command`` (default: ``etai run --agent hf:{folder}`` with the same sessions and options,
into ``ba<N>/``); training goes on. Its metrics are logged by rank 0 against batch N when it has
ended (checked at every batch end), and fit end waits for the outstanding ones up to
``async_wait_s`` (then kills them: ``harness/error``). While ``async_max_running`` are running an
interval is skipped (``harness/async_skipped``). ``budget_s`` does not apply to the process.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from composer import Callback, Event
from composer.core import Time
from composer.utils import dist
from composer.utils.misc import create_interval_scheduler

from finetune import async_eval, sharded_eval
from finetune.errors import ConfigError
from finetune.evaluation import (
    DEFAULT_SUITE,
    KEY,
    check_fsdp_generation,
    eval_metrics,
    generation_options,
    load_eval_suites,
    run_limits,
)
from finetune.export import export_hf, snapshot_hf
from harness.agents.etai_format import DEFAULT_MAX_RESULT_CHARS

log = logging.getLogger(__name__)
_EVENTS = (Event.BATCH_END, Event.EPOCH_END, Event.FIT_END)
CHECKPOINT_BATCH = "harness/checkpoint_batch"  # async: the batch the evaluated checkpoint is of


class HarnessEval(Callback):
    """Evaluate the current model through the harness every ``interval`` (see the module doc)."""

    def __init__(
        self,
        interval: str = "200ba",
        suite: str | Sequence[str] = DEFAULT_SUITE,
        sessions: Sequence[str] | None = None,
        k: int | None = None,
        max_steps: int | None = None,
        workers: int = 4,
        budget_s: float = 600.0,
        generation: Mapping[str, Any] | None = None,
        out: str | Path | None = None,
        at_fit_end: bool = True,
        max_result_chars: int | None = None,
        sandbox: str = "docker",
        allow_overlap: bool = False,
        mode: str = "sync",
        async_command: str | None = None,
        async_wait_s: float = 1800.0,
        async_max_running: int = 1,
        keep_exports: bool = False,
        fsdp_generation: str = "gathered",
    ):
        self.interval = _interval(interval)
        self.suites, self.session_ids = load_eval_suites(suite, sessions)
        # As given: the asynchronous command passes it on (async takes one suite).
        self.suite_arg = str(suite if isinstance(suite, (str, Path)) else suite[0])
        self.k, self.max_steps, self.workers, self.budget_s = run_limits(
            self.suites, k, max_steps, workers, budget_s
        )
        self.generation = generation_options(generation)
        self.out = Path(out) if out else None
        self.max_result_chars = max_result_chars
        self.sandbox = sandbox
        self.allow_overlap = bool(allow_overlap)  # evaluating training sessions (finetune.split)
        self._due = create_interval_scheduler(
            self.interval,
            include_end_of_training=at_fit_end,
            checkpoint_events=False,
            final_events={Event.FIT_END},
        )
        self.last: dict[str, float] = {}  # the latest metrics; checkpointed with the callback
        self.rounds = (0, 0)  # FSDP: the last evaluation's generation rounds, and padded ones
        self.fsdp_generation = check_fsdp_generation(fsdp_generation)
        self._async = self._async_mode(
            mode, async_command, async_wait_s, async_max_running, keep_exports
        )

    def _async_mode(
        self, mode: str, command: str | None, wait_s: float, max_running: int, keep: bool
    ) -> Any:
        """None for ``mode: sync``; for ``async``, the processes' keeper (see async_eval)."""
        if mode not in ("sync", "async"):
            raise ConfigError(f"{KEY}.mode", f"expected sync or async, got {mode!r}")
        if mode == "sync":
            if command is not None:
                raise ConfigError(f"{KEY}.async_command", "only with mode: async")
            return None
        if len(self.suites) > 1:
            raise ConfigError(
                f"{KEY}.suite", "mode: async evaluates one suite (its command takes one --suite)"
            )
        if not wait_s > 0 or max_running < 1:
            raise ConfigError(
                f"{KEY}.async_wait_s", "async_wait_s and async_max_running must be positive"
            )
        self.async_command = command or async_eval.DEFAULT_COMMAND
        self.async_wait_s = float(wait_s)
        # Every placeholder is checked now (exit 2), not at the first interval.
        dummy = async_eval.values_of(self, folder=Path("F"), out=Path("O"), batch=0)
        async_eval.render(self.async_command, dummy)
        return async_eval.AsyncEvals(
            self.async_command,
            metrics_of=lambda rows: eval_metrics(rows, k=self.k, n=self._n_sessions()),
            keep_exports=bool(keep),
            max_running=int(max_running),
        )

    @property
    def is_async(self) -> bool:
        return self._async is not None

    def _n_sessions(self) -> int:
        return len(self.evaluated_ids())

    def evaluated_ids(self) -> tuple[str, ...]:
        """The sessions every evaluation runs: those named, else every session of the suites."""
        return self.session_ids or tuple(s.session_id for st in self.suites for s in st.sessions)

    # ------------------------------------------------------------------------------ Composer
    def run_event(self, event: Event, state: Any, logger: Any) -> None:
        if self._async is not None and event in (Event.BATCH_END, Event.FIT_END):
            self._log_async(logger, self._async.collect())  # those that ended since the last batch
        if event in _EVENTS and self._due(state, event):
            self.evaluate(state, logger)
        if self._async is not None and event == Event.FIT_END:
            self._log_async(logger, self._async.collect(wait_s=self.async_wait_s))

    def close(self, state: Any, logger: Any) -> None:
        if self._async is not None:
            self._async.close()  # a run that ended without FIT_END leaves no evaluation running

    def state_dict(self) -> dict[str, Any]:
        return {"last": dict(self.last)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.last = dict(state.get("last", {}))

    # ------------------------------------------------------------------------------ evaluation
    def evaluate(self, state: Any, logger: Any) -> dict[str, float]:
        """One evaluation at the current batch; every rank must call it. Returns the metrics
        (asynchronous mode: those of the start, ``harness/export_seconds``)."""
        if self._async is not None:
            return self._start_async(state, logger)
        start = time.monotonic()
        batch = int(state.timestamp.batch)
        metrics: dict[str, float] | None = None
        try:
            out = self._root(state) / f"ba{batch}"
            metrics = sharded_eval.evaluate(self, state, batch, start, out)
        except Exception as e:  # noqa: BLE001 - the trainer goes on: a broken eval is a metric
            log.warning("harness eval at batch %d failed: %s: %s", batch, type(e).__name__, e)
            metrics = {"harness/error": 1.0}
        if metrics is not None:
            metrics["harness/eval_seconds"] = time.monotonic() - start
        box = [metrics]
        try:
            dist.broadcast_object_list(box, src=0)
        except Exception as e:  # noqa: BLE001 - a collective failing must not end the run either
            log.warning("harness eval at batch %d: broadcast failed: %s", batch, e)
            box = [{"harness/error": 1.0}]
        self.last = dict(box[0] or {"harness/error": 1.0})
        logger.log_metrics(self.last)
        return self.last

    def _root(self, state: Any) -> Path:
        return (self.out or Path("runs") / state.run_name) / "harness-eval"

    # ------------------------------------------------------------------------------ asynchronous
    def _start_async(self, state: Any, logger: Any) -> dict[str, float]:
        """Snapshot (every rank), then write and evaluate it in rank 0's thread; training goes on."""
        assert self._async is not None
        start = time.monotonic()
        batch = int(state.timestamp.batch)
        busy = [self._async.busy() if dist.get_global_rank() == 0 else None]
        dist.broadcast_object_list(busy, src=0)  # the export is collective: one decision
        if busy[0]:
            log.warning("harness eval at batch %d skipped: the last one is still running", batch)
            self.last = {"harness/async_skipped": 1.0}
            logger.log_metrics(self.last)
            return self.last
        root = self._root(state)
        folder, out = root / f"hf-ba{batch}", root / f"ba{batch}"
        metrics = {"harness/async_skipped": 0.0}
        try:
            snapshot = snapshot_hf(
                state,
                None,
                max_result_chars=self.max_result_chars or DEFAULT_MAX_RESULT_CHARS,
                heads=False,
                detach=True,  # written while training changes the weights
            )
            if snapshot is not None:
                values = async_eval.values_of(self, folder=folder, out=out, batch=batch)
                argv = async_eval.render(self.async_command, values)
                write = functools.partial(snapshot.write, folder)
                self._async.launch(argv, batch=batch, folder=folder, out=out, write=write)
        except Exception as e:  # noqa: BLE001 - the trainer goes on: a broken eval is a metric
            log.warning(
                "harness eval at batch %d: start failed: %s: %s", batch, type(e).__name__, e
            )
            metrics["harness/error"] = 1.0
        metrics["harness/export_seconds"] = time.monotonic() - start  # what training waited
        logger.log_metrics(metrics)
        return metrics

    def _log_async(self, logger: Any, finished: Sequence[tuple[int, dict[str, float]]]) -> None:
        # At the current step: the checkpoint's batch is behind it by the time its evaluation
        # ends, and trackers such as W&B drop a step lower than one already logged. Which
        # checkpoint was evaluated is a field of its own.
        for batch, metrics in finished:
            self.last = {**metrics, CHECKPOINT_BATCH: float(batch)}
            logger.log_metrics(self.last)


class ExportHF(Callback):
    """At ``FIT_END``, ``export_hf`` the trained model to ``folder`` (every rank calls; rank 0 writes).

    An export failure raises: the user asked for the folder, and the checkpoints are already saved.
    """

    def __init__(self, folder: str | Path, *, max_result_chars: int, heads: bool = True):
        self.folder, self.max_result_chars, self.heads = Path(folder), int(max_result_chars), heads

    def fit_end(self, state: Any, logger: Any) -> None:
        if export_hf(
            state, None, self.folder, max_result_chars=self.max_result_chars, heads=self.heads
        ):
            log.info("exported the model to %s (etai run --agent hf:%s)", self.folder, self.folder)


def _interval(value: Any) -> str:
    """A Composer time string; a bare int would silently mean epochs, so it is refused."""
    if not isinstance(value, str):
        raise ConfigError(
            f"{KEY}.interval", f"expected a time string such as '200ba', got {value!r}"
        )
    try:
        Time.from_timestring(value)
    except ValueError as e:
        raise ConfigError(
            f"{KEY}.interval", f"{value!r} is not a Composer time string ({e})"
        ) from None
    return value
