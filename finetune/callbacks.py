"""Composer callbacks that close the loop with the harness: ``HarnessEval`` runs the suite on the
model being trained every N batches; ``ExportHF`` writes the ``hf:FOLDER`` export at fit end.

HarnessEval runs on every rank and never raises into the trainer:

1. Due? ``create_interval_scheduler(interval, checkpoint_events=False)``: on ``BATCH_END`` for
   ``ba``/``sp``/``tok``/``dur`` intervals, ``EPOCH_END`` for ``ep``, and once more at
   ``FIT_END`` unless the last batch was just evaluated. Every rank decides the same.
2. Under FSDP every rank takes part in gathering the full weights (collective); rank 0 rebuilds a
   plain copy and alone generates and drives the sandboxes for every session, while the other
   ranks wait in ``broadcast_object_list`` (the wait must stay under ``train.dist_timeout``).
3. Without FSDP (DDP, or one process) every rank holds the whole model, so the evaluation is
   sharded: rank r evaluates sessions r, r+W, ... (``harness.run`` with the agent
   ``hfmem:<run>-ba<N>``, eval mode under ``no_grad``, train mode restored after) in
   ``ba<N>/rank<r>/``; the rows are gathered (``all_gather_object``, which every rank reaches
   whatever happened to its shard) and rank 0 writes them and one summary to ``ba<N>/``.
4. The metrics (computed from the rows with ``harness.metrics.summarize``) are broadcast from
   rank 0 and logged on every rank (the destinations filter by rank). Any exception, on any
   rank, becomes ``harness/error = 1`` and a warning.

The time budget (``budget_s``, from the evaluation's start: gathering, image, preflight, rollouts)
is enforced by the agent (``harness.agents.hf``): past it, an episode not yet started never starts
its sandbox, and a running one stops at its next generation; at most the verification already
under way finishes. Both end as ``infra_error`` rows (in no denominator, retried by a rerun) and
are counted as ``harness/skipped_budget`` and ``harness/stopped_budget``; ``harness/complete``
is 0. Budget spent before the harness starts: no run, every session skipped. The image and the
preflight are cached on the machine after the first evaluation; a cold first one is not cut
short. Results go to
``<out>/harness-eval/ba<N>/`` (``results.jsonl``, ``summary.json``); ``out`` defaults to the
save folder, else ``runs/<run_name>``.
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

log = logging.getLogger(__name__)
KEY = "callbacks.harness_eval"
GENERATION_KEYS = ("temperature", "top_p", "max_new_tokens", "batch_size", "batch_wait_ms")
_EVENTS = (Event.BATCH_END, Event.EPOCH_END, Event.FIT_END)


class HarnessEval(Callback):
    """Evaluate the current model through the harness every ``interval`` (see the module doc)."""

    def __init__(
        self,
        interval: str = "200ba",
        suite: str = "jest-bugfix",
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
    ):
        from composer.utils.misc import create_interval_scheduler

        self.interval = _interval(interval)
        self.suite, self.session_ids = _suite(suite, sessions)
        k = int(k or self.suite.defaults.get("k", 3))
        max_steps = int(max_steps or self.suite.defaults.get("max_steps", 10))
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

    # ------------------------------------------------------------------------------ Composer
    def run_event(self, event: Event, state: Any, logger: Any) -> None:
        if event in _EVENTS and self._due(state, event):
            self.evaluate(state, logger)

    def state_dict(self) -> dict[str, Any]:
        return {"last": dict(self.last)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.last = dict(state.get("last", {}))

    # ------------------------------------------------------------------------------ evaluation
    def evaluate(self, state: Any, logger: Any) -> dict[str, float]:
        """One evaluation at the current batch; every rank must call it. Returns the metrics."""
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

    def _evaluate(self, state: Any, batch: int, start: float) -> dict[str, float] | None:
        from finetune.export import agent_model, gathered_state, is_fsdp

        model = agent_model(state)
        fsdp = is_fsdp(model)
        # Collective under FSDP: every rank gathers before rank 0 goes off on its own.
        full = gathered_state(model) if fsdp else None
        rank, world = dist.get_global_rank(), dist.get_world_size()
        ids = self.session_ids or tuple(s.session_id for s in self.suite.sessions)
        out = (self.out or Path("runs") / state.run_name) / "harness-eval" / f"ba{batch}"
        if fsdp or world == 1:
            # Only rank 0 holds a full copy (gathered above): it evaluates every session.
            if rank != 0:
                return None
            rows, skipped = self._shard(state, model, full, batch, start, ids, out)
        else:
            # Every rank holds a full replica (DDP, or no wrapper): each evaluates its share in
            # its own folder; rank 0 merges. Every rank reaches the gather, whatever happened.
            try:
                mine = self._shard(
                    state, model, None, batch, start, ids[rank::world], out / f"rank{rank}"
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
            skipped = sum(n for _, n, _ in parts)
            _write_merged(out, rows, k=self.k)
        return _metrics(rows, k=self.k, n=len(ids), skipped_before=skipped)

    def _shard(
        self,
        state: Any,
        model: Any,
        full: Any,
        batch: int,
        start: float,
        ids: Sequence[str],
        out: Path,
    ) -> tuple[list[dict[str, Any]], int]:
        """This process's rows for ``ids`` in ``out``, and how many sessions the budget skipped
        before anything started."""
        import torch
        from composer.core.precision import get_precision_context

        from finetune.export import plain_lm
        from harness.results import read_rows

        if not ids:
            return [], 0
        if time.monotonic() > start + self.budget_s:  # spent gathering: nothing starts
            return [], len(ids)
        lm = plain_lm(model, full, merge_lora=False)
        was_training = model.training
        model.eval()
        lm.eval()
        try:
            with torch.no_grad(), get_precision_context(state.precision):
                spec = self._run(state, lm, model.tokenizer, batch, start, ids, out)
        finally:
            model.train(was_training)
        rows = read_rows(out / "results.jsonl")
        return [r for r in rows if r["agent"] == spec and r["session_id"] in set(ids)], 0

    def _run(
        self,
        state: Any,
        lm: Any,
        tokenizer: Any,
        batch: int,
        start: float,
        ids: Sequence[str],
        out: Path,
    ) -> str:
        import harness
        from harness.agents.hf import live_model

        name = f"{state.run_name}-ba{batch}"
        with live_model(
            name,
            lm,
            tokenizer,
            fingerprint=_weights_fingerprint(lm, name),
            max_result_chars=self.max_result_chars,
            deadline=start + self.budget_s,
        ) as spec:
            harness.run(
                self.suite,
                [spec],
                k=self.k,
                max_steps=self.max_steps,
                workers=self.workers,
                out=out,
                sandbox=self.sandbox,
                options=dict(self.generation),
                progress=False,
                session_ids=list(ids),
            )
        return spec


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


def _suite(name: str, sessions: Sequence[str] | None) -> tuple[Any, tuple[str, ...]]:
    """Load the suite now: a missing suite or an unknown session fails at config time (exit 2)."""
    from harness.errors import EtaiError
    from harness.sessions import load_suite

    try:
        suite = load_suite(name)
    except EtaiError as e:
        raise ConfigError(f"{KEY}.suite", str(e)) from None
    if sessions is None:
        return suite, ()
    ids = tuple(sessions)
    if not ids:
        raise ConfigError(
            f"{KEY}.sessions", "empty subset; leave the key out to evaluate every session"
        )
    unknown = sorted(set(ids) - {s.session_id for s in suite.sessions})
    if unknown:
        raise ConfigError(f"{KEY}.sessions", f"not in suite {suite.name}: {', '.join(unknown)}")
    return suite, ids


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


def _weights_fingerprint(lm: Any, name: str) -> str:
    """Cheap and weight-dependent: a resumed run that reaches the same batch with the same weights
    reuses its rows, with other weights it does not. One sum per tensor, no copy to the host."""
    import torch

    with torch.no_grad():
        sums = torch.stack([p.detach().float().sum() for p in lm.parameters()]).cpu()
    return hashlib.sha256(name.encode() + sums.numpy().tobytes()).hexdigest()[:16]


def _nan(value: Any) -> float:
    return math.nan if value is None else float(value)  # undefined (no valid rows) is not zero


def _budget_counts(rows: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    """(skipped, stopped): rows the deadline kept from starting, and rows it stopped mid-way."""
    from harness.agents.hf import BUDGET_SPENT, NOT_STARTED

    cut = [str(r.get("reason") or "") for r in rows if r.get("status") == "infra_error"]
    skipped = sum(NOT_STARTED in reason for reason in cut)
    return skipped, sum(BUDGET_SPENT in reason for reason in cut) - skipped


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
    complete = len(rows) == n and not agent["n_infra_error"]
    out = {f"harness/path_accuracy@{j}": _nan(v) for j, v in agent["path_accuracy"].items()}
    out["harness/pass@1"] = _nan(agent["pass_at_k"].get(1))
    out["harness/steps_to_green"] = _nan(agent["steps_to_green"]["mean"])
    out["harness/invalid_actions"] = float(agent["invalid_actions"])
    out["harness/tamper_rate"] = _nan(agent.get("tamper_rate"))
    out["harness/infra_errors"] = float(
        agent["n_infra_error"] - (skipped - skipped_before) - stopped
    )
    out["harness/skipped_budget"], out["harness/stopped_budget"] = float(skipped), float(stopped)
    out["harness/complete"] = float(complete)
    out["harness/error"] = 0.0
    return out
