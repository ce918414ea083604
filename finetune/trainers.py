"""Trainers by name: a config in, a ready Composer ``Trainer`` out (``build()``).

``sft`` trains the agent model on whole sessions (LM + heads, composite loss by default);
``dpo`` trains on (chosen, rejected) action pairs against a frozen reference. Outside trainers
plug in as ``trainer: {type: "module:Class"}``; subclassing SFTTrainer and overriding one step
(``records``, ``collate``, ``algorithms``, ...) is the intended way.
"""

from __future__ import annotations

import copy
import functools
import logging
from pathlib import Path
from typing import Any

from finetune.config import Config
from finetune.errors import ConfigError
from finetune.registry import Registry
from harness import etai_format as fmt

log = logging.getLogger(__name__)
TRAINERS: Registry[type] = Registry("trainer", "trainer.type")


@TRAINERS.register("sft")
class SFTTrainer:
    default_loss = "composite"
    paired = False

    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.run_name = cfg.get("run_name", str, "etai")
        self.seed = cfg.get("seed", int, 17)
        self.max_seq_len = cfg.get("data.max_seq_len", int, 2048)
        self.max_result_chars = cfg.get("data.max_result_chars", int, fmt.DEFAULT_MAX_RESULT_CHARS)
        self.batch_size = cfg.get("train.batch_size", int, 8)
        save_folder = cfg.get("train.save_folder", str, None)
        self.save_folder = (
            cfg.path_of("train.save_folder", must_exist=False) if save_folder else None
        )
        self.truncation = None  # a TruncationReport once records() ran

    # --- steps, in build order --------------------------------------------------------------
    def sessions(self) -> list[dict[str, Any]]:
        from finetune.examples import load_sessions
        from finetune.split import train_sessions

        return train_sessions(load_sessions(self.cfg.paths_of("data.sessions")), self.cfg)

    def tokenizer(self, sessions: list[dict[str, Any]]) -> Any:
        """model path / tokenizer.path, or a tiny BPE trained on the sessions (saved with the run
        so a resumed run gets the same ids)."""
        from composer.utils import dist

        from finetune.tokenizer import add_etai_tokens, load_tokenizer, train_tiny_tokenizer

        path = self.cfg.get("tokenizer.path", str, None) or self.cfg.get(
            "model.pretrained", str, None
        )
        if path:
            tokenizer = load_tokenizer(path)
        else:
            saved = self.save_folder / "tokenizer" if self.save_folder else None
            with dist.run_local_rank_zero_first():
                if saved and (saved / "tokenizer.json").exists():
                    tokenizer = load_tokenizer(saved)
                else:
                    texts = [
                        fmt.render_training_example(s, self.max_result_chars)[0] for s in sessions
                    ]
                    tokenizer = train_tiny_tokenizer(
                        texts, self.cfg.get("tokenizer.train_vocab_size", int, 512)
                    )
                    if saved and dist.get_local_rank() == 0:
                        tokenizer.save_pretrained(str(saved))
        add_etai_tokens(tokenizer)
        return tokenizer

    def records(self, sessions: list[dict[str, Any]], tokenizer: Any) -> list[Any]:
        from finetune.examples import build_example, truncation_report

        examples = [  # a rollout trajectory brings its text (rft: rollouts.rollout_text)
            build_example(
                s, tokenizer, self.max_seq_len, self.max_result_chars, rendered=s.get("rendered")
            )
            for s in sessions
        ]
        examples += self.outcome_records(tokenizer)
        self.truncation = truncation_report(examples)
        return examples

    def outcome_records(self, tokenizer: Any) -> list[Any]:
        """``data.reward_rollouts``: every rollout of these run folders as a reward-head example,
        its target the episode's reward (``finetune.outcomes``); none without the key."""
        from finetune.outcomes import outcome_example

        return [
            outcome_example(row, target, tokenizer, self.max_seq_len, self.max_result_chars)
            for row, target in self.reward_rows()
        ]

    def reward_rows(self) -> list[tuple[dict[str, Any], float]]:
        """The ``data.reward_rollouts`` rows that become examples, with their targets (read once:
        the held-out check sees them before they are tokenised)."""
        if getattr(self, "_reward_rows", None) is None:
            self._reward_rows = []
            if self.cfg.get("data.reward_rollouts", (str, list), None) is not None:
                from finetune.outcomes import DEFAULT_RANGE, outcome_rows
                from finetune.rewards import build_reward

                rows = _rollout_rows(self.cfg, "data.reward_rollouts")
                self._reward_rows = outcome_rows(
                    rows,
                    build_reward(self.cfg.section("reward")),
                    self.cfg.get("data.reward_range", list, list(DEFAULT_RANGE)),
                )
                if not self._reward_rows:
                    raise ConfigError(
                        "data.reward_rollouts",
                        "no rollout with a step and a reward in these run folders",
                    )
                log.info("reward head: %d rollouts of %d rows", len(self._reward_rows), len(rows))
        return self._reward_rows

    def trained_ids(self, sessions: list[dict[str, Any]]) -> dict[str, set[str]]:
        """The session ids every data source trains on, by the key that brings them: what the
        held-out check compares with the evaluated sessions."""
        out: dict[str, set[str]] = {}
        for s in sessions:  # an rft rollout carries its rendered text; a session does not
            key = "data.rollouts" if "rendered" in s else "data.sessions"
            out.setdefault(key, set()).add(s["session_id"])
        rows = self.reward_rows()
        if rows:
            out["data.reward_rollouts"] = {row["session_id"] for row, _ in rows}
        return out

    def collate(self, tokenizer: Any) -> Any:
        from finetune.data import collate_examples

        return functools.partial(collate_examples, pad_id=tokenizer.pad_token_id)

    def dataloader(self, examples: list[Any], tokenizer: Any) -> Any:
        from composer.utils import dist

        from finetune.data import RecordDataset, make_dataloader, read_mds, to_record, write_mds

        kind = self.cfg.get("data.format", str, "memory")
        if kind == "memory":
            dataset = RecordDataset([to_record(e) for e in examples])
        elif kind == "mds":
            out = self.cfg.path_of("data.mds_dir", must_exist=False)
            with dist.run_local_rank_zero_first():
                if dist.get_local_rank() == 0:
                    write_mds(examples, out)
            dataset = read_mds(
                out,
                self.batch_size,
                shuffle=self.cfg.get("data.shuffle", bool, True),
                seed=self.seed,
            )
        else:
            raise ConfigError("data.format", f"unknown format {kind!r}; known: memory, mds")
        return make_dataloader(
            dataset,
            self.batch_size,
            self.collate(tokenizer),
            shuffle=self.cfg.get("data.shuffle", bool, True),
            seed=self.seed,
            num_workers=self.cfg.get("data.num_workers", int, 0),
        )

    def loss(self) -> Any:
        from finetune.losses import build_loss

        loss = build_loss(self.cfg.section("loss"), self.default_loss)
        if getattr(loss, "paired", False) != self.paired:
            need = "dpo" if getattr(loss, "paired", False) else "sft"
            raise ConfigError("loss.name", f"loss {type(loss).__name__} needs trainer.type: {need}")
        if self.cfg.get("data.reward_rollouts", (str, list), None) is not None and (
            self.paired or not getattr(loss, "trains_heads", False)
        ):
            raise ConfigError(
                "data.reward_rollouts",
                f"trains the reward head: needs an unpaired trainer and a loss that trains the "
                f"heads (composite), not {type(loss).__name__}",
            )
        return loss

    def algorithms(self, loss: Any, reference: Any) -> list[Any]:
        from finetune.algorithms import (
            GlobalGradientClipping,
            LossWeightSchedule,
            ReferenceForward,
            SequenceLengthWarmup,
            ToolFailureMask,
        )

        cfg, algos = self.cfg, []
        schedule = cfg.get(
            "algorithms.loss_weight_schedule", (dict, bool), hasattr(loss, "set_weights")
        )
        if schedule:
            if not hasattr(loss, "set_weights"):
                raise ConfigError(
                    "algorithms.loss_weight_schedule",
                    f"{type(loss).__name__} has no weights to schedule",
                )
            algos.append(
                _construct(LossWeightSchedule, schedule, "algorithms.loss_weight_schedule")
            )
        mask = cfg.get("algorithms.tool_failure_mask", (dict, bool), not self.paired)
        if mask:
            algos.append(_construct(ToolFailureMask, mask, "algorithms.tool_failure_mask"))
        warmup = cfg.get("algorithms.seq_length_warmup", (dict, bool), False)
        if warmup:
            algos.append(
                _construct(
                    SequenceLengthWarmup,
                    warmup,
                    "algorithms.seq_length_warmup",
                    max_seq_len=self.max_seq_len,
                )
            )
        clip = cfg.get("algorithms.gradient_clipping", (float, bool), False)
        if clip:
            algos.append(GlobalGradientClipping(float(clip)))  # one norm over all FSDP roots
        if reference is not None:
            cache = cfg.get("algorithms.reference.cache", bool, False)
            algos.append(ReferenceForward(reference, loss, cache=cache))
        return algos

    def callbacks(self) -> list[Any]:
        """``callbacks.harness_eval`` and ``export``; built before any data work, so a missing suite
        or an unknown session id is a config error (exit 2), not a failure at batch 200."""
        from finetune.callbacks import KEY, ExportHF, HarnessEval

        cfg, out = self.cfg, []
        spec = cfg.get(KEY, (dict, bool), False)
        if spec:
            default_out = self.save_folder or Path("runs") / self.run_name
            from finetune.split import eval_defaults

            harness_eval = _construct(
                HarnessEval,
                spec,
                KEY,
                out=default_out,
                max_result_chars=self.max_result_chars,
                **eval_defaults(cfg, spec),
            )
            from composer.utils import dist

            dist_timeout = cfg.get("train.dist_timeout", float, 300.0)
            # Ranks wait in a collective for the slowest shard (sync), or for rank 0 waiting for
            # its evaluation processes at fit end (async); the wait must fit the timeout.
            slack = 120.0  # one generation and one verification may run past the budget
            key, wait = (
                ("async_wait_s", harness_eval.async_wait_s)
                if harness_eval.is_async
                else ("budget_s", harness_eval.budget_s)
            )
            if dist.get_world_size() > 1 and wait + slack > dist_timeout:
                raise ConfigError(
                    f"{KEY}.{key}",
                    f"{wait:g} s + {slack:g} s slack exceeds train.dist_timeout "
                    f"({dist_timeout:g} s); raise train.dist_timeout or lower {key}",
                )
            out.append(harness_eval)
        folder = cfg.get("export.folder", str, None)
        if folder:
            out.append(
                ExportHF(
                    cfg.path_of("export.folder", must_exist=False),
                    max_result_chars=self.max_result_chars,
                    heads=cfg.get("export.heads", bool, True),
                )
            )
        return out

    def optimizer(self, model: Any) -> Any:
        from composer.optim import DecoupledAdamW

        lr = self.cfg.get("optimizer.lr", float, 1e-4)
        heads = {k[: -len("_lr")]: float(v) for k, v in self.cfg.section("heads").items()}
        name = self.cfg.get("optimizer.name", str, "decoupled_adamw")
        if name != "decoupled_adamw":
            raise ConfigError(
                "optimizer.name", f"unknown optimizer {name!r}; known: decoupled_adamw"
            )
        betas = tuple(self.cfg.get("optimizer.betas", list, [0.9, 0.95]))
        return DecoupledAdamW(
            model.param_groups(lr, heads),
            lr=lr,
            betas=betas,
            eps=self.cfg.get("optimizer.eps", float, 1e-8),
            weight_decay=self.cfg.get("optimizer.weight_decay", float, 0.0),
        )

    def scheduler(self) -> Any:
        from composer.optim import (
            ConstantScheduler,
            CosineAnnealingWithWarmupScheduler,
            LinearWithWarmupScheduler,
        )

        name = self.cfg.get("scheduler.name", str, "constant")
        warmup = self.cfg.get("scheduler.t_warmup", str, "0ba")
        alpha_f = self.cfg.get("scheduler.alpha_f", float, 0.0)
        if name == "constant":
            return ConstantScheduler()
        if name == "cosine_with_warmup":
            return CosineAnnealingWithWarmupScheduler(t_warmup=warmup, alpha_f=alpha_f)
        if name == "linear_with_warmup":
            return LinearWithWarmupScheduler(t_warmup=warmup, alpha_f=alpha_f)
        raise ConfigError(
            "scheduler.name",
            f"unknown scheduler {name!r}; known: constant, cosine_with_warmup, linear_with_warmup",
        )

    # --- assembly ---------------------------------------------------------------------------
    def build(self) -> Any:
        from composer import Trainer
        from composer.loggers import FileLogger, InMemoryLogger
        from composer.utils import dist, reproducibility

        from finetune.lm import apply_lora, build_lm
        from finetune.model import AgentModel

        cfg = self.cfg
        device = cfg.get("train.device", str, "cpu")
        dist_timeout = cfg.get("train.dist_timeout", float, 300.0)
        if dist.get_world_size() > 1:
            # the rank-0-first sections below need it; the Trainer reuses it
            dist.initialize_dist(device, timeout=dist_timeout)
        reproducibility.seed_all(self.seed)
        loss = self.loss()  # first: a bad loss name fails before any data work
        precision = cfg.get("train.precision", str, "fp32")
        fsdp = cfg.get("train.fsdp", dict, None)
        if fsdp:
            from finetune.fsdp import fsdp_settings

            fsdp = fsdp_settings(fsdp, precision)  # buffers (RoPE inv_freq) stay fp32
        callbacks = self.callbacks()
        sessions = self.sessions()
        from finetune.split import check_held_out, split_of

        # every source assembled (read, not yet tokenised), before anything is written: exit 2
        check_held_out(self.trained_ids(sessions), callbacks, split_of(cfg))
        tokenizer = self.tokenizer(sessions)
        examples = self.records(sessions, tokenizer)
        if self.truncation and self.truncation.truncated_examples:
            log.warning("data.max_seq_len=%d: %s", self.max_seq_len, self.truncation)
        lm = build_lm(cfg, tokenizer, self.max_seq_len)
        reference = None
        if getattr(loss, "needs_reference", False):
            _disable_dropout(lm)  # as TRL does: policy and reference must agree at step 0
            if self.paired and cfg.get("algorithms.reference.precompute", bool, False):
                from finetune.data import with_reference_logps

                # Once, before training (and before LoRA): the pairs carry them from here on.
                examples = with_reference_logps(examples, lm, tokenizer.pad_token_id)
                self.reference_stored = True
            if not getattr(self, "reference_stored", False):
                reference = copy.deepcopy(lm)
        dataloader = self.dataloader(examples, tokenizer)
        lm = apply_lora(lm, cfg.get("model.lora", dict, None))
        model = AgentModel(lm, tokenizer, loss)
        loggers = [InMemoryLogger()]
        log_file = cfg.get("train.log_file", str, None)
        if log_file:
            loggers.append(FileLogger(filename=log_file, flush_interval=1))
        save_kwargs = {}
        if self.save_folder:
            save_kwargs = {
                "save_folder": str(self.save_folder),
                "save_overwrite": True,
                "save_interval": cfg.get("train.save_interval", str, "1ep"),
                "save_num_checkpoints_to_keep": cfg.get(
                    "train.save_num_checkpoints_to_keep", int, -1
                ),
                "autoresume": cfg.get("train.autoresume", bool, False),
            }
        elif cfg.get("train.autoresume", bool, False):
            raise ConfigError("train.autoresume", "needs train.save_folder")
        trainer = Trainer(
            model=model,
            train_dataloader=dataloader,
            run_name=self.run_name,
            seed=self.seed,
            max_duration=cfg.get("train.max_duration", str, "1ep"),
            optimizers=self.optimizer(model),
            schedulers=self.scheduler(),
            algorithms=self.algorithms(loss, reference),
            callbacks=callbacks,
            loggers=loggers,
            dist_timeout=dist_timeout,
            device=device,
            precision=precision,
            device_train_microbatch_size=cfg.get("train.microbatch_size", (int, str), None),
            parallelism_config={"fsdp": fsdp} if fsdp else None,
            progress_bar=cfg.get("train.progress_bar", bool, False),
            log_to_console=cfg.get("train.progress_bar", bool, False) is False,
            console_log_interval=cfg.get("train.console_log_interval", str, "1ep"),
            **save_kwargs,
        )
        if self.truncation:
            trainer.logger.log_hyperparameters(
                {
                    "data/truncated_examples": self.truncation.truncated_examples,
                    "data/tokens_cut": self.truncation.tokens_cut,
                }
            )
        return trainer


@TRAINERS.register("dpo")
class DPOTrainer(SFTTrainer):
    """DPO on preference pairs: ``data.pairs`` is a JSONL of {session_id, step, chosen, rejected}
    records, or ``synthetic`` to derive pairs from the sessions (see examples.synthetic_pairs)."""

    default_loss = "dpo"
    paired = True

    def sessions(self) -> list[dict[str, Any]]:
        if self.cfg.get("data.pairs", str, "synthetic") == "rollouts":
            return []  # the prefixes come with the pairs (rollout trajectories)
        return super().sessions()

    def trained_ids(self, sessions: list[dict[str, Any]]) -> dict[str, set[str]]:
        """The sessions the pairs are of (with ``pairs: rollouts`` there are no sessions)."""
        pairs, _ = self.pair_records(sessions)
        ids = {str(p["session_id"]) for p in pairs if p.get("session_id") is not None}
        rollouts = self.cfg.get("data.pairs", str, "synthetic") == "rollouts"
        return {"data.rollouts (data.pairs: rollouts)" if rollouts else "data.pairs": ids}

    def pair_records(self, sessions: list[dict[str, Any]]) -> tuple[list[Any], dict[str, Any]]:
        """``data.pairs``: ``synthetic``, ``rollouts`` (execution pairs from ``data.rollouts``, see
        finetune.rollouts.execution_pairs, ranked by ``reward``) or a JSONL file of records.
        Read once: the held-out check sees them before records() tokenises them."""
        if getattr(self, "_pairs", None) is None:
            self._pairs = self._read_pairs(sessions)
        return self._pairs

    def _read_pairs(self, sessions: list[dict[str, Any]]) -> tuple[list[Any], dict[str, Any]]:
        from finetune.examples import synthetic_pairs

        by_id = {s["session_id"]: s for s in sessions}
        source = self.cfg.get("data.pairs", str, "synthetic")
        if source == "synthetic":
            return synthetic_pairs(sessions, self.seed), by_id
        if source == "rollouts":
            from finetune.rewards import build_reward
            from finetune.rollouts import execution_pairs

            pairs = execution_pairs(
                _rollout_rows(self.cfg), build_reward(self.cfg.section("reward"))
            )
            if not pairs:
                raise ConfigError("data.rollouts", "no execution pairs in these run folders")
            return pairs, {}
        return _read_jsonl(self.cfg.path_of("data.pairs"), "data.pairs"), by_id

    def records(self, sessions: list[dict[str, Any]], tokenizer: Any) -> list[Any]:
        from finetune.data import columns_of
        from finetune.examples import build_pair, truncation_report

        pairs, by_id = self.pair_records(sessions)
        examples = [
            build_pair(p, by_id, tokenizer, self.max_seq_len, self.max_result_chars) for p in pairs
        ]
        columns_of(examples)  # pairs with and without stored ref_logps do not mix
        self.reference_stored = bool(examples) and examples[0].ref_logps is not None
        self.truncation = truncation_report(examples)
        return examples

    def collate(self, tokenizer: Any) -> Any:
        from finetune.data import collate_pairs

        return functools.partial(collate_pairs, pad_id=tokenizer.pad_token_id)


@TRAINERS.register("rft")
class RFTTrainer(SFTTrainer):
    """Rejection-sampling fine-tuning: SFT (same examples, same loss mask) on the verified-green
    rollouts of ``data.rollouts`` (run folders of ``etai run``), shortest first, deduplicated.

    ``trainer: {type: rft, per_session: 1, allow_invalid: false, with_sessions: false}``:
    distinct green rollouts kept per session; whether rollouts with an invalid step may be kept;
    whether the reference traces of ``data.sessions`` are trained on too. Every kept row's prompts
    are re-rendered and checked against the hashes the agent stored (``rollouts.check_prompts``).
    """

    def sessions(self) -> list[dict[str, Any]]:
        from finetune.rollouts import check_prompts, rollout_text, select_green, trajectory

        spec = self.cfg.section("trainer")
        rows = _rollout_rows(self.cfg)
        green = select_green(
            rows,
            per_session=int(spec.get("per_session", 1)),
            allow_invalid=bool(spec.get("allow_invalid", False)),
        )
        kept = []
        for row in green:
            check_prompts(row)
            chars = self.max_result_chars
            kept.append({**trajectory(row), "rendered": rollout_text(row, chars)})
        self.kept = len(kept)
        log.info("rft: kept %d green rollouts of %d rows", len(kept), len(rows))
        if spec.get("with_sessions", False):
            kept = super().sessions() + kept
        if not kept:
            raise ConfigError("data.rollouts", "no verified-green rollout to train on")
        return kept


def _rollout_rows(cfg: Config, key: str = "data.rollouts") -> list[dict[str, Any]]:
    from finetune.rollouts import read_runs

    value = cfg.get(key, (str, list))
    folders = [value] if isinstance(value, str) else value
    return read_runs([cfg.path_of_value(str(f), key) for f in folders])


def _read_jsonl(path: Path, key: str) -> list[dict[str, Any]]:
    import json

    records = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except ValueError as exc:
            raise ConfigError(key, f"{path}:{n}: not JSON: {exc}") from None
    return records


def _disable_dropout(module: Any) -> None:
    import torch

    for sub in module.modules():
        if isinstance(sub, torch.nn.Dropout):
            sub.p = 0.0


def _construct(cls: type, value: Any, key: str, **defaults: Any) -> Any:
    """``key: true`` or ``key: {kwargs}`` -> ``cls(**kwargs)``; bad kwargs name the key."""
    try:
        return cls(**{**defaults, **({} if value is True else dict(value))})
    except TypeError as exc:
        raise ConfigError(key, str(exc)) from None


def build_trainer(cfg: Config) -> Any:
    cls = TRAINERS.resolve(cfg.get("trainer.type", str, "sft"))
    if not callable(getattr(cls, "build", None)):
        raise ConfigError("trainer.type", f"{cls!r} has no build() returning a Composer Trainer")
    return cls(cfg).build()
