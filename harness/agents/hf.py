"""``hf:PATH`` — a local transformers causal LM and its tokenizer, prompted with the ETAI text format.

The folder is what ``save_pretrained`` writes (config.json, weights, tokenizer files). The prompt is
``render_prompt`` tokenized exactly as training tokenized it (``tokenizer(text)``, so a Llama gets
its BOS); generation stops at ``<RESULT>`` or ``<TRACE_END>`` and the text, special tokens kept, goes
to ``parse_action``. Concurrent episodes are generated together: a micro-batcher collects the
``act`` calls that arrive within a few milliseconds and runs one left-padded ``generate``.

Options (from the CLI): temperature (0 = greedy, the default), top_p, max_new_tokens, and for this
backend device (default cuda when available, else cpu), batch_size (8), batch_wait_ms (5),
max_result_chars (else ``etai.json`` in the folder, else the format's default).

``hfmem:NAME`` is the same agent over a model held in this process (a training job's, through
``live_model``): nothing is loaded or copied, the model's own device is used, and its train/eval
mode is the caller's business. The Composer callback ``finetune.callbacks.HarnessEval`` uses it.
Sampled generation is seeded per batch; it is reproducible only when the same requests meet in
the same batch, which concurrent runs do not promise. Greedy decoding is.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness.agents import AgentContext, TaskView, register
from harness.agents._model_batcher import MicroBatcher
from harness.agents._model_common import (
    Generation,
    TextEpisode,
    folder_fingerprint,
    folder_settings,
    tool_names_of,
)
from harness.agents.etai_format import STOP_MARKERS
from harness.base.errors import BudgetSkipped, InfraError, InputError

# Row reasons of a spent deadline: a running episode stops at its next generation (an infra_error
# row); one not yet started never starts a sandbox (a skipped_budget row).
BUDGET_SPENT = "the evaluation's time budget is spent"
NOT_STARTED = "episode not started"
_UNBOUNDED_CONTEXT = 1_000_000  # tokenizers say model_max_length=1e30 when they do not know


class HFAgent:
    def __init__(self, path: str, ctx: AgentContext):
        folder = Path(path).expanduser()
        if not (folder / "config.json").is_file():
            raise InputError("not a transformers model folder (no config.json)", where=path)
        self.spec = f"hf:{path}"
        self.folder = folder
        self.fingerprint = folder_fingerprint(folder)
        opts = dict(ctx.options)
        self.gen = Generation.from_options(opts, **_trained_with(folder))
        self.deadline: float | None = None
        self.lockstep: Any = None
        self._load(folder, opts.get("device"))
        self._start_batcher(opts, folder.name)

    @classmethod
    def from_model(
        cls,
        model: Any,
        tokenizer: Any,
        ctx: AgentContext,
        *,
        spec: str,
        fingerprint: str,
        max_result_chars: int | None = None,
        deadline: float | None = None,
        lockstep: Any = None,
    ) -> HFAgent:
        """An agent over a live causal LM (a PreTrainedModel or a peft model) and its tokenizer.

        ``deadline`` (``time.monotonic()``): generation requests after it fail as InfraError, so a
        caller with a time budget gets every remaining row quickly instead of waiting for them.
        ``lockstep``: a model sharded across processes (FSDP), whose forward is a collective. Its
        ``run(call)`` runs ``call`` where every process's generations meet (in rounds, padded
        by the processes with nothing to generate; finetune.lockstep) and returns the result;
        ``generate`` then runs with ``synced_gpus=True`` so that a process whose rows ended
        early keeps stepping until every process's rows have.
        """
        self = cls.__new__(cls)
        self.spec, self.folder, self.fingerprint = spec, None, fingerprint
        opts = dict(ctx.options)
        trained = {} if max_result_chars is None else {"max_result_chars": int(max_result_chars)}
        self.gen = Generation.from_options(opts, **trained)
        self.deadline, self.lockstep = deadline, lockstep
        self.model, self.tokenizer = model, tokenizer
        self.device = str(next(model.parameters()).device)
        self._configure()
        self._start_batcher(opts, spec.partition(":")[2] or "live")
        return self

    def _start_batcher(self, opts: dict[str, Any], name: str) -> None:
        self._batcher: MicroBatcher[tuple[str, int], str] = MicroBatcher(
            self._generate_batch,
            max_batch=int(opts.get("batch_size", 8)),
            wait_s=float(opts.get("batch_wait_ms", 5)) / 1000,
            name=f"etai-hf-{name}",
        )

    # --------------------------------------------------------------------------- loading
    def _load(self, folder: Path, device: str | None) -> None:
        # torch: the train extra
        import torch

        # transformers: the train extra
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(str(folder))
            # On CPU, float32: bf16 matmuls there are slow or missing. On GPU, the checkpoint's dtype.
            dtype = "auto" if self.device.startswith("cuda") else torch.float32
            self.model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype).to(
                self.device
            )
        except (OSError, ValueError, KeyError, RuntimeError) as e:
            raise InputError(
                f"cannot load model or tokenizer: {type(e).__name__}: {e}", where=str(folder)
            ) from None
        self.model.eval()
        self._configure()

    def _configure(self) -> None:
        tok = self.tokenizer
        self.pad_id = next(i for i in (tok.pad_token_id, tok.eos_token_id, 0) if i is not None)
        self.marker_ids = _single_token_ids(tok, STOP_MARKERS)  # None: markers are not tokens here
        self.eos_ids = {
            i
            for i in (tok.eos_token_id, getattr(self.model.generation_config, "eos_token_id", None))
            if isinstance(i, int)
        }
        self.max_context = _max_context(self.model.config, tok)

    # --------------------------------------------------------------------------- Agent
    def start(self, task: TaskView, sample: int) -> TextEpisode:
        return TextEpisode(
            task.record(), sample, tool_names_of(task.tools), self.gen, self.complete
        )

    def check_available(self) -> None:
        """Asked by the loop before it starts an episode's sandbox: past the deadline, an episode
        that has not started costs nothing (a ``skipped_budget`` row whose reason says NOT_STARTED)."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise BudgetSkipped(f"{self.spec}: {BUDGET_SPENT}; {NOT_STARTED}")

    def complete(self, prompt: str, seed: int) -> str:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise InfraError(f"{self.spec}: {BUDGET_SPENT}")
        try:
            return self._batcher.submit((prompt, seed))
        except InfraError:
            raise
        except Exception as e:  # out of memory, a CUDA fault: the row is infra_error and is retried
            raise InfraError(f"{self.spec}: generation failed: {type(e).__name__}: {e}") from e

    def close(self) -> None:
        self._batcher.close()

    @property
    def batch_sizes(self) -> list[int]:
        return self._batcher.batch_sizes

    # --------------------------------------------------------------------------- generation
    def _prompt_ids(self, prompt: str) -> list[int]:
        ids = self.tokenizer(prompt)["input_ids"]
        limit = self.max_context - self.gen.max_new_tokens
        if limit > 0 and len(ids) > limit:
            # Keep the head (instruction and context) and the tail (the latest steps); drop the middle.
            head = limit // 4
            ids = ids[:head] + ids[len(ids) - (limit - head) :]
        return ids

    def _generate_batch(self, items: Sequence[tuple[str, int]]) -> list[str]:
        # torch: the train extra
        import torch

        rows = [self._prompt_ids(p) for p, _ in items]
        width = max(len(r) for r in rows)
        # Left padding: every row's next token is at the same position, as generate expects.
        ids = torch.tensor([[self.pad_id] * (width - len(r)) + r for r in rows], device=self.device)
        mask = torch.tensor(
            [[0] * (width - len(r)) + [1] * len(r) for r in rows], device=self.device
        )
        kwargs: dict[str, Any] = {
            "max_new_tokens": self.gen.max_new_tokens,
            "pad_token_id": self.pad_id,
            "do_sample": not self.gen.greedy,
        }
        if self.gen.greedy:
            kwargs.update(
                temperature=None, top_p=None, top_k=None
            )  # silence the config's sampling defaults
        else:
            kwargs.update(temperature=self.gen.temperature, top_p=self.gen.top_p, top_k=None)
            seed = 0
            for _, s in items:
                seed ^= s
            torch.manual_seed(seed)
        if self.marker_ids is not None:
            kwargs["eos_token_id"] = sorted(set(self.marker_ids) | self.eos_ids)
        else:  # a model without ETAI tokens: stop on the marker strings instead
            kwargs.update(stop_strings=list(STOP_MARKERS), tokenizer=self.tokenizer)
            if self.eos_ids:
                kwargs["eos_token_id"] = sorted(self.eos_ids)
        if self.lockstep is not None:
            out = self.lockstep.run(
                lambda: self.model.generate(
                    input_ids=ids, attention_mask=mask, synced_gpus=True, **kwargs
                )
            )
        else:
            with torch.inference_mode():
                out = self.model.generate(input_ids=ids, attention_mask=mask, **kwargs)
        return [self._decode(row[width:].tolist()) for row in out]

    def _decode(self, new: list[int]) -> str:
        stops = set(self.marker_ids or ())
        for n, i in enumerate(new):
            if i in stops:  # the marker belongs to the action: parse_action reads it
                new = new[: n + 1]
                break
            if i in self.eos_ids:  # the model's own end; padding only ever follows an end token
                new = new[:n]
                break
        text = self.tokenizer.decode(new, skip_special_tokens=False)
        for marker in STOP_MARKERS:  # string stops: cut just after the first marker
            at = text.find(marker)
            if at >= 0:
                text = text[: at + len(marker)]
        return text


def _trained_with(folder: Path) -> dict[str, Any]:
    settings = folder_settings(folder)
    return (
        {"max_result_chars": int(settings["max_result_chars"])}
        if "max_result_chars" in settings
        else {}
    )


def _single_token_ids(tok: Any, markers: Sequence[str]) -> list[int] | None:
    ids = []
    for m in markers:
        enc = tok(m, add_special_tokens=False)["input_ids"]
        if len(enc) != 1:
            return None
        ids.append(enc[0])
    return ids


def _max_context(config: Any, tok: Any) -> int:
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    value = getattr(tok, "model_max_length", None)
    return (
        value if isinstance(value, int) and 0 < value < _UNBOUNDED_CONTEXT else _UNBOUNDED_CONTEXT
    )


def _factory(arg: str | None, ctx: AgentContext) -> HFAgent:
    if not arg:
        raise InputError("hf needs a model folder: hf:PATH", where="--agent")
    return HFAgent(arg, ctx)


register("hf", _factory, "a local transformers causal LM (hf:PATH, a save_pretrained folder)")

# Live models by name. A spec string must name them because the runner builds agents from specs
# (so that every caller, the CLI included, goes through one path and one cache key scheme). The
# prefix is registered on first use: from the command line there is never a live model to name.
_LIVE: dict[str, dict[str, Any]] = {}


@contextmanager
def live_model(
    name: str,
    model: Any,
    tokenizer: Any,
    *,
    fingerprint: str,
    max_result_chars: int | None = None,
    deadline: float | None = None,
    lockstep: Any = None,
) -> Iterator[str]:
    """Make ``model`` reachable as the agent spec ``hfmem:NAME`` inside the block; yields the spec.

    ``fingerprint`` goes into every result row's cache key: give a value that changes with the
    weights, or a rerun into the same folder reuses rows of other weights.
    """
    if name in _LIVE:
        raise InputError(f"a live model is already registered as hfmem:{name}", where="live_model")
    register("hfmem", _live_factory, "a model held in this process (hfmem:NAME, see live_model)")
    _LIVE[name] = {
        "model": model,
        "tokenizer": tokenizer,
        "fingerprint": fingerprint,
        "max_result_chars": max_result_chars,
        "deadline": deadline,
        "lockstep": lockstep,
    }
    try:
        yield f"hfmem:{name}"
    finally:
        _LIVE.pop(name, None)


def _live_factory(arg: str | None, ctx: AgentContext) -> HFAgent:
    if not arg or arg not in _LIVE:
        raise InputError(
            f"no live model is registered as hfmem:{arg or ''} (see harness.agents.hf.live_model)",
            where="--agent",
        )
    return HFAgent.from_model(ctx=ctx, spec=f"hfmem:{arg}", **_LIVE[arg])
