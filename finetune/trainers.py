"""Trainers by name: a config in, a ready Composer ``Trainer`` out (``build()``).

``sft`` trains the agent model on whole sessions (LM + heads, composite loss by default);
``dpo`` trains on (chosen, rejected) action pairs against a frozen reference. Outside trainers
plug in as ``trainer: {type: "module:Class"}``; subclassing SFTTrainer and overriding one step
(``records``, ``collate``, ``algorithms``, ...) is the intended way. The data steps
(``sessions`` ... ``dataloader``) come from finetune/assembly.py; this module adds the loss, the
algorithms, the callbacks, the optimizer and the scheduler, and builds the ``Trainer``.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from finetune.assembly import DPOData, RFTData, SFTData
from finetune.config import Config
from finetune.errors import ConfigError
from finetune.evaluation import KEY as EVAL_KEY
from finetune.fsdp import fsdp_settings
from finetune.lm import apply_lora, build_lm
from finetune.registry import Registry
from finetune.split import eval_defaults

TRAINERS: Registry[type] = Registry("trainer", "trainer.type", group="etai.trainers")


@TRAINERS.register("sft")
class SFTTrainer(SFTData):
    """The agent model (LM + heads) trained on SFTData's examples; each step a method."""

    default_loss = "composite"
    paired = False

    def loss(self) -> Any:
        from finetune.losses import build_loss  # torch: the train extra

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
        from finetune.algorithms import (  # torch: the train extra
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
        from composer.utils import dist  # composer: the train extra

        from finetune.callbacks import ExportHF, HarnessEval  # composer: the train extra

        cfg, out = self.cfg, []
        spec = cfg.get(EVAL_KEY, (dict, bool), False)
        if spec:
            default_out = self.save_folder or Path("runs") / self.run_name
            harness_eval = _construct(
                HarnessEval,
                spec,
                EVAL_KEY,
                out=default_out,
                max_result_chars=self.max_result_chars,
                **eval_defaults(cfg, spec),
            )
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
                    f"{EVAL_KEY}.{key}",
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
        from composer.optim import DecoupledAdamW  # composer: the train extra

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
        from composer.optim import (  # composer: the train extra
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

    # --- the Trainer ------------------------------------------------------------------------
    def build(self) -> Any:
        # composer and torch: the train extra
        from composer import Trainer
        from composer.loggers import FileLogger, InMemoryLogger
        from composer.utils import dist, reproducibility

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
            fsdp = fsdp_settings(fsdp, precision)  # buffers (RoPE inv_freq) stay fp32
        callbacks = self.callbacks()
        tokenizer, examples = self.assemble(callbacks)
        lm = build_lm(cfg, tokenizer, self.max_seq_len)
        reference = None
        if getattr(loss, "needs_reference", False):
            _disable_dropout(lm)  # as TRL does: policy and reference must agree at step 0
            if self.paired and cfg.get("algorithms.reference.precompute", bool, False):
                from finetune.data import with_reference_logps  # torch: the train extra

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
class DPOTrainer(DPOData, SFTTrainer):
    """DPO on preference pairs (see DPOData) against a frozen reference."""

    default_loss = "dpo"
    paired = True


@TRAINERS.register("rft")
class RFTTrainer(RFTData, SFTTrainer):
    """Rejection-sampling fine-tuning: SFT (same examples, same loss mask) on the verified-green
    rollouts of ``data.rollouts`` (see RFTData for the ``trainer`` options)."""


def _disable_dropout(module: Any) -> None:
    import torch  # torch: the train extra

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
