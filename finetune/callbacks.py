"""Composer callbacks that close the loop with the harness: ``HarnessEval`` runs the suite on the
model being trained every N batches; ``ExportHF`` writes the ``hf:FOLDER`` export at fit end.

HarnessEval runs on every rank and never raises into the trainer:

1. Due? ``create_interval_scheduler(interval, checkpoint_events=False)``: on ``BATCH_END`` for
   ``ba``/``sp``/``tok``/``dur`` intervals, ``EPOCH_END`` for ``ep``, and once more at
   ``FIT_END`` unless the last batch was just evaluated. Every rank decides the same.
2. The evaluation is sharded: rank r evaluates sessions r, r+W, ... (``harness.run`` with the
   agent ``hfmem:<run>-ba<N>``, eval mode under ``no_grad``, train mode restored after) in
   ``ba<N>/rank<r>/``. Without FSDP every rank holds the whole model. Under FSDP
   (``fsdp_generation``), ``gathered`` (the default): the full weights are all-gathered once per
   evaluation into a plain copy on every rank (``export.full_lm``), which then generates on its
   own like a replica; ``lockstep`` (when a full copy does not fit beside the shards): a forward
   is a collective, so every rank generates in rounds with all the others
   (``finetune.lockstep``), every block's weights gathered for every token, and a rank with
   nothing to generate, or whose shard is done, pads the round with a dummy generation until
   every rank is done. The rows are gathered (``all_gather_object``, which every rank
   reaches whatever happened to its shard) and rank 0 writes them and one summary to ``ba<N>/``.
   One process: no rank folder. ``suite`` may name several suites (a project split holds out
   whole projects, each a suite with its own base and node_modules): session ids are unique
   across them, each suite's sessions run into ``<folder>/<suite name>/`` and the metrics are
   over all of them (``mode: async`` takes one suite).
3. The metrics (computed from the rows with ``harness.metrics.summarize``) are broadcast from
   rank 0 and logged on every rank (the destinations filter by rank). Any exception, on any
   rank, becomes ``harness/error = 1`` and a warning.

The time budget (``budget_s``, from the evaluation's start: image, preflight, rollouts) is
enforced by the agent (``harness.agents.hf``): past it, an episode not yet started never starts
its sandbox (a ``skipped_budget`` row: not run), one whose sandbox is still starting is given up
at the deadline (``harness.loop``; ``skipped_budget`` too), and a running one stops at its next
generation (an ``infra_error`` row); at most the verification already under way finishes. Both are in no
denominator, are retried by a rerun, and are counted as ``harness/skipped_budget`` and
``harness/stopped_budget``; ``harness/complete`` is 0. The image and the preflight are cached on
the machine after the first evaluation; a cold first one is not cut short. Results go to
``<out>/harness-eval/ba<N>/`` (``results.jsonl``, ``summary.json``); ``out`` defaults to the
save folder, else ``runs/<run_name>``.

``mode: async`` (``finetune.async_eval``): at the interval the checkpoint is exported to
``harness-eval/hf-ba<N>/`` (every rank takes part) and rank 0 starts ``async_command`` (default:
``etai run --agent hf:{folder}`` with the same sessions and options, into ``ba<N>/``); training
goes on. Its metrics are logged by rank 0 against batch N when it has ended (checked at every
batch end), and fit end waits for the outstanding ones up to ``async_wait_s`` (then kills them:
``harness/error``). While ``async_max_running`` are running an interval is skipped
(``harness/async_skipped``). ``budget_s`` does not apply to the process.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from composer import Callback, Event
from composer.utils import dist

from finetune.errors import ConfigError
from harness.etai_format import DEFAULT_MAX_RESULT_CHARS

log = logging.getLogger(__name__)
KEY = "callbacks.harness_eval"
GENERATION_KEYS = ("temperature", "top_p", "max_new_tokens", "batch_size", "batch_wait_ms")
_EVENTS = (Event.BATCH_END, Event.EPOCH_END, Event.FIT_END)


DEFAULT_SUITE = "jest-bugfix"  # the bundled suite (suites/jest-bugfix)
# Under FSDP: each rank generates with a full copy gathered once per evaluation, or with the
# sharded model, every token's forward a collective (finetune/lockstep.py; no copy to fit).
FSDP_GENERATION = ("gathered", "lockstep")
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
        from composer.utils.misc import create_interval_scheduler

        self.interval = _interval(interval)
        self.suites, self.session_ids = _suites(suite, sessions)
        # As given: the asynchronous command passes it on (async takes one suite).
        self.suite_arg = str(suite if isinstance(suite, (str, Path)) else suite[0])
        defaults = self.suites[0].defaults  # k and max_steps unless given: the first suite's
        k = int(k or defaults.get("k", 3))
        max_steps = int(max_steps or defaults.get("max_steps", 10))
        if k < 1 or max_steps < k:
            raise ConfigError(
                f"{KEY}.k", f"need 1 <= k <= max_steps (got k={k}, max_steps={max_steps})"
            )
        if workers < 1 or not budget_s > 0:
            raise ConfigError(f"{KEY}.workers", "workers and budget_s must be positive")
        self.k, self.max_steps, self.workers, self.budget_s = (
            k,
            max_steps,
            int(workers),
            float(budget_s),
        )
        self.generation = _generation(generation)
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
        if fsdp_generation not in FSDP_GENERATION:
            raise ConfigError(
                f"{KEY}.fsdp_generation",
                f"expected one of {', '.join(FSDP_GENERATION)}, got {fsdp_generation!r}",
            )
        self.fsdp_generation = fsdp_generation
        self._async = self._async_mode(
            mode, async_command, async_wait_s, async_max_running, keep_exports
        )

    def _async_mode(
        self, mode: str, command: str | None, wait_s: float, max_running: int, keep: bool
    ) -> Any:
        """None for ``mode: sync``; for ``async``, the processes' keeper (see async_eval)."""
        from finetune import async_eval

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
            metrics_of=lambda rows: _metrics(rows, k=self.k, n=self._n_sessions()),
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
            metrics = self._evaluate(state, batch, start)
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

    def _evaluate(self, state: Any, batch: int, start: float) -> dict[str, float] | None:
        from finetune.export import agent_model, is_fsdp

        model = agent_model(state)
        fsdp = is_fsdp(model)
        rank, world = dist.get_global_rank(), dist.get_world_size()
        ids = self.evaluated_ids()
        out = self._root(state) / f"ba{batch}"
        if world == 1:
            rows, skipped = self._shard(state, model, fsdp, batch, start, ids, out)
            if len(self.suites) > 1:  # one folder per suite: the rows and a summary over all
                _write_merged(out, rows, k=self.k)
            return _metrics(rows, k=self.k, n=len(ids), skipped_before=skipped)
        # Every rank evaluates its share (rank r: sessions r, r+W, ...) in its own folder: with a
        # full replica (DDP or a gathered FSDP copy), or taking part in every forward (FSDP,
        # lockstep). Every rank
        # reaches the gather whatever happened to its shard; rank 0 merges.
        try:
            mine = self._shard(
                state, model, fsdp, batch, start, ids[rank::world], out / f"rank{rank}"
            )
            part: tuple = (*mine, None)
        except Exception as e:  # noqa: BLE001 - reported by rank 0 as harness/error
            part = ([], 0, f"rank {rank}: {type(e).__name__}: {e}")
        parts = dist.all_gather_object(part)
        if rank != 0:
            return None
        failed = [error for _, _, error in parts if error]
        if failed:
            raise RuntimeError("; ".join(failed))
        rows = [row for shard, _, _ in parts for row in shard]
        _write_merged(out, rows, k=self.k)
        return _metrics(rows, k=self.k, n=len(ids), skipped_before=sum(n for _, n, _ in parts))

    def _shard(
        self,
        state: Any,
        model: Any,
        fsdp: bool,
        batch: int,
        start: float,
        ids: Sequence[str],
        out: Path,
    ) -> tuple[list[dict[str, Any]], int]:
        """This process's rows for ``ids`` in ``out``, and how many sessions the budget skipped
        before anything started. Under FSDP a rank with nothing (left) to evaluate still serves
        every generation round until all ranks are done."""
        import torch
        from composer.core.precision import get_precision_context

        from harness.results import read_rows

        lm = model.lm
        if fsdp and hasattr(lm, "merge_and_unload"):
            raise NotImplementedError("evaluating a LoRA model under FSDP is not supported")
        if fsdp and self.fsdp_generation == "gathered":
            from finetune.export import full_lm

            lm, fsdp = full_lm(model), False  # collective: before any rank returns below
            self.rounds = (0, 0)
        spent = time.monotonic() > start + self.budget_s  # spent gathering: nothing starts
        if not fsdp and (spent or not ids):
            return [], len(ids) if spent else 0
        name = f"{state.run_name}-ba{batch}"
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad(), get_precision_context(state.precision), _full_root(lm, fsdp):
                fingerprint = _weights_fingerprint(lm, name, summed_over_ranks=fsdp)

                def run(lockstep: Any = None) -> str | None:
                    if spent or not ids:
                        return None
                    tok = model.tokenizer
                    return self._run(lm, tok, name, fingerprint, start, ids, out, lockstep)

                if fsdp:
                    lockstep = _lockstep(lm, model.tokenizer)
                    spec = lockstep.drive(lambda: run(lockstep))
                    self.rounds = (lockstep.rounds, lockstep.padded)
                else:
                    spec = run()
        finally:
            model.train(was_training)
        if spec is None:
            return [], len(ids) if spent else 0
        rows = [
            r for folder, _, _ in self._parts(ids, out) for r in read_rows(folder / "results.jsonl")
        ]
        return [r for r in rows if r["agent"] == spec and r["session_id"] in set(ids)], 0

    def _parts(self, ids: Sequence[str], out: Path) -> list[tuple[Path, Any, list[str]]]:
        """(folder, suite, its ids) for each suite with a session in ``ids``: ``out`` itself for
        one suite, ``out/<suite name>`` for several."""
        parts = []
        for suite in self.suites:
            names = {s.session_id for s in suite.sessions}
            mine = [i for i in ids if i in names]
            if mine:
                parts.append((out if len(self.suites) == 1 else out / suite.name, suite, mine))
        return parts

    def _run(
        self,
        lm: Any,
        tokenizer: Any,
        name: str,
        fingerprint: str,
        start: float,
        ids: Sequence[str],
        out: Path,
        lockstep: Any = None,
    ) -> str:
        import harness
        from harness.agents.hf import live_model

        with live_model(
            name,
            lm,
            tokenizer,
            fingerprint=fingerprint,
            max_result_chars=self.max_result_chars,
            deadline=start + self.budget_s,
            lockstep=lockstep,
        ) as spec:
            for folder, suite, mine in self._parts(ids, out):
                harness.run(
                    suite,
                    [spec],
                    k=self.k,
                    max_steps=self.max_steps,
                    workers=self.workers,
                    out=folder,
                    sandbox=self.sandbox,
                    options=dict(self.generation),
                    progress=False,
                    session_ids=mine,
                )
        return spec

    # ------------------------------------------------------------------------------ asynchronous
    def _start_async(self, state: Any, logger: Any) -> dict[str, float]:
        """Export (every rank) and start the evaluation process (rank 0); training goes on."""
        from finetune import async_eval
        from finetune.export import export_hf

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
            if export_hf(
                state,
                None,
                folder,
                max_result_chars=self.max_result_chars or DEFAULT_MAX_RESULT_CHARS,
                heads=False,
            ):
                values = async_eval.values_of(self, folder=folder, out=out, batch=batch)
                argv = async_eval.render(self.async_command, values)
                self._async.launch(argv, batch=batch, folder=folder, out=out)
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
        from finetune.export import export_hf

        if export_hf(
            state, None, self.folder, max_result_chars=self.max_result_chars, heads=self.heads
        ):
            log.info("exported the model to %s (etai run --agent hf:%s)", self.folder, self.folder)


# ---------------------------------------------------------------------------------- helpers
def _interval(value: Any) -> str:
    """A Composer time string; a bare int would silently mean epochs, so it is refused."""
    from composer.core import Time

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


def _suites(
    suite: str | Path | Sequence[str | Path], sessions: Sequence[str] | None
) -> tuple[tuple[Any, ...], tuple[str, ...]]:
    """Load the suite or suites now (each a bundled name or a folder, relative to the working
    directory or the project): a missing suite, a session id two suites share, or an unknown
    session fails at config time (exit 2), not at batch 200."""
    from finetune.config import PROJECT_ROOT
    from harness.errors import EtaiError
    from harness.sessions import load_suite

    names = [suite] if isinstance(suite, (str, Path)) else list(suite)
    if not names:
        raise ConfigError(f"{KEY}.suite", "names no suite")
    suites = []
    for name in names:
        path = Path(name).expanduser()
        if not path.is_absolute() and not path.is_dir() and (PROJECT_ROOT / path).is_dir():
            path = PROJECT_ROOT / path
        try:
            suites.append(load_suite(path if path.is_dir() else name))
        except EtaiError as e:
            raise ConfigError(f"{KEY}.suite", str(e)) from None
    for what, values in (
        ("suite name", [st.name for st in suites]),
        ("session id", [s.session_id for st in suites for s in st.sessions]),
    ):
        twice = sorted({v for v in values if values.count(v) > 1})
        if twice:  # rows are told apart by session id, results folders by suite name
            raise ConfigError(f"{KEY}.suite", f"{what} in two suites: {', '.join(twice[:5])}")
    if sessions is None:
        return tuple(suites), ()
    ids = tuple(sessions)
    if not ids:
        raise ConfigError(
            f"{KEY}.sessions", "empty subset; leave the key out to evaluate every session"
        )
    known = {s.session_id for st in suites for s in st.sessions}
    unknown = sorted(set(ids) - known)
    if unknown:
        where = ", ".join(st.name for st in suites)
        raise ConfigError(f"{KEY}.sessions", f"not in suite {where}: {', '.join(unknown)}")
    return tuple(suites), ids


def _generation(options: Mapping[str, Any] | None) -> dict[str, Any]:
    from harness.agents._model_common import Generation
    from harness.errors import InputError

    options = dict(options or {})
    unknown = sorted(set(options) - set(GENERATION_KEYS))
    if unknown:
        raise ConfigError(
            f"{KEY}.generation", f"unknown option(s) {unknown}; known: {GENERATION_KEYS}"
        )
    try:
        Generation.from_options(options)
    except InputError as e:
        raise ConfigError(f"{KEY}.generation", str(e)) from None
    return options


def _weights_fingerprint(lm: Any, name: str, *, summed_over_ranks: bool = False) -> str:
    """Cheap and weight-dependent: a resumed run that reaches the same batch with the same weights
    reuses its rows, with other weights it does not. One sum per tensor, no copy to the host.
    ``summed_over_ranks`` (FSDP, collective): each rank holds shards, so one total over all ranks
    makes the same fingerprint everywhere."""
    import torch

    with torch.no_grad():
        sums = torch.stack([p.detach().float().sum() for p in lm.parameters()])
        if summed_over_ranks:
            sums = sums.sum().reshape(1)
            dist.all_reduce(sums)
        sums = sums.cpu()
    return hashlib.sha256(name.encode() + sums.numpy().tobytes()).hexdigest()[:16]


def _full_root(lm: Any, fsdp: bool) -> Any:
    """Under FSDP, the LM's root unit gathered (embeddings, final norm, head) for the evaluation,
    collectively; the blocks gather their own weights in their forward. Else nothing to do."""
    import contextlib

    if not fsdp:
        return contextlib.nullcontext()
    from torch.distributed.fsdp import FullyShardedDataParallel

    return FullyShardedDataParallel.summon_full_params(lm, recurse=False, writeback=False)


def _lockstep(lm: Any, tokenizer: Any) -> Any:
    """The rounds every rank generates in (finetune.lockstep); the padding is a one-token
    generation on one token, which steps (synced_gpus) as long as the longest batch of the round."""
    import torch

    from finetune.lockstep import Lockstep

    device = next(lm.parameters()).device
    pad = next(i for i in (tokenizer.pad_token_id, tokenizer.eos_token_id, 0) if i is not None)

    def dummy() -> None:
        ids = torch.tensor([[pad]], device=device)
        lm.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=1,
            pad_token_id=pad,
            do_sample=False,
            temperature=None,
            top_p=None,
            top_k=None,
            synced_gpus=True,
        )

    return Lockstep(device, dummy)


def _nan(value: Any) -> float:
    return math.nan if value is None else float(value)  # undefined (no valid rows) is not zero


def _budget_counts(rows: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    """(skipped, stopped): rows the deadline kept from starting (``skipped_budget``), and
    ``infra_error`` rows it stopped mid-way (their reason says so)."""
    from harness.agents.hf import BUDGET_SPENT

    skipped = sum(r.get("status") == "skipped_budget" for r in rows)
    stopped = sum(
        r.get("status") == "infra_error" and BUDGET_SPENT in str(r.get("reason") or "")
        for r in rows
    )
    return skipped, stopped


def _write_merged(out: Path, rows: Sequence[Mapping[str, Any]], *, k: int) -> None:
    """Rank 0's one folder of a sharded evaluation: every rank's rows and their summary."""
    from harness import metrics
    from harness.results import ResultStore, write_json_atomic

    store = ResultStore(out)
    for row in rows:
        if not store.has(row["cache_key"]):
            store.append(dict(row))
    agents = sorted({r["agent"] for r in rows})
    summary = {
        "shards": sorted(str(p) for p in out.glob("rank*")),
        "agents": {a: metrics.summarize([r for r in rows if r["agent"] == a], k=k) for a in agents},
    }
    write_json_atomic(out / "summary.json", summary)


def _metrics(
    rows: Sequence[Mapping[str, Any]], *, k: int, n: int, skipped_before: int = 0
) -> dict[str, float]:
    """The logged metrics over the evaluation's rows (every rank's): ``n`` sessions were asked
    for; ``skipped_before`` of them had no row because the budget was spent before they started."""
    from harness import metrics

    agent = metrics.summarize(list(rows), k=k)
    skipped, stopped = _budget_counts(rows)
    skipped += skipped_before
    complete = len(rows) == n and not agent["n_infra_error"] and not agent["n_skipped_budget"]
    out = {f"harness/path_accuracy@{j}": _nan(v) for j, v in agent["path_accuracy"].items()}
    out["harness/pass@1"] = _nan(agent["pass_at_k"].get(1))
    out["harness/steps_to_green"] = _nan(agent["steps_to_green"]["mean"])
    out["harness/invalid_actions"] = float(agent["invalid_actions"])
    out["harness/tamper_rate"] = _nan(agent.get("tamper_rate"))
    out["harness/special_case_rate"] = _nan(agent.get("special_case_rate"))
    out["harness/infra_errors"] = float(agent["n_infra_error"] - stopped)
    out["harness/skipped_budget"], out["harness/stopped_budget"] = float(skipped), float(stopped)
    out["harness/complete"] = float(complete)
    out["harness/error"] = 0.0
    return out
