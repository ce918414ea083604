"""The data steps of a trainer (finetune/trainers.py builds the Composer ``Trainer`` on them):
read every source, refuse training on what is evaluated, tokenise, batch.

``SFTData``: the sessions of ``data.sessions`` (``data.split`` applied) and the rollouts of
``data.reward_rollouts``; ``DPOData``: preference pairs (``data.pairs``); ``RFTData``: the
verified-green rollouts of ``data.rollouts``. Each is a step per method, in build order
(``sessions``, ``trained_ids``, ``tokenizer``, ``records``, ``collate``, ``dataloader``), so a
trainer that subclasses ``SFTTrainer`` overrides one step.
"""

from __future__ import annotations

import functools
import json
import logging
from pathlib import Path
from typing import Any

from finetune.config import Config
from finetune.errors import ConfigError
from finetune.examples import (
    build_example,
    build_pair,
    load_sessions,
    synthetic_pairs,
    truncation_report,
)
from finetune.outcomes import DEFAULT_RANGE, outcome_example, outcome_rows
from finetune.rewards import build_reward
from finetune.rollouts import (
    check_prompts,
    execution_pairs,
    read_runs,
    rollout_text,
    select_green,
    trajectory,
)
from finetune.split import check_held_out, split_of, train_sessions
from finetune.tokenizer import add_etai_tokens, load_tokenizer, train_tiny_tokenizer
from harness.agents import etai_format as fmt

log = logging.getLogger(__name__)


class SFTData:
    """Whole sessions as examples (LM + heads), and the reward head's rollouts."""

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

    def assemble(self, callbacks: list[Any]) -> tuple[Any, list[Any]]:
        """(tokenizer, examples): every source read and checked against what ``callbacks``
        evaluate before anything is written (exit 2), then tokenised."""
        sessions = self.sessions()
        check_held_out(self.trained_ids(sessions), callbacks, split_of(self.cfg))
        tokenizer = self.tokenizer(sessions)
        examples = self.records(sessions, tokenizer)
        if self.truncation and self.truncation.truncated_examples:
            log.warning("data.max_seq_len=%d: %s", self.max_seq_len, self.truncation)
        return tokenizer, examples

    # --- steps, in build order --------------------------------------------------------------
    def sessions(self) -> list[dict[str, Any]]:
        return train_sessions(load_sessions(self.cfg.paths_of("data.sessions")), self.cfg)

    def tokenizer(self, sessions: list[dict[str, Any]]) -> Any:
        """model path / tokenizer.path, or a tiny BPE trained on the sessions (saved with the run
        so a resumed run gets the same ids)."""
        from composer.utils import dist  # composer: the train extra

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
        from finetune.data import collate_examples  # torch: the train extra

        return functools.partial(collate_examples, pad_id=tokenizer.pad_token_id)

    def dataloader(self, examples: list[Any], tokenizer: Any) -> Any:
        from composer.utils import dist  # composer: the train extra

        # torch: the train extra
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


class DPOData(SFTData):
    """Preference pairs: ``data.pairs`` is a JSONL of {session_id, step, chosen, rejected}
    records, or ``synthetic`` to derive pairs from the sessions (see examples.synthetic_pairs)."""

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
        by_id = {s["session_id"]: s for s in sessions}
        source = self.cfg.get("data.pairs", str, "synthetic")
        if source == "synthetic":
            return synthetic_pairs(sessions, self.seed), by_id
        if source == "rollouts":
            pairs = execution_pairs(
                _rollout_rows(self.cfg), build_reward(self.cfg.section("reward"))
            )
            if not pairs:
                raise ConfigError("data.rollouts", "no execution pairs in these run folders")
            return pairs, {}
        return _read_jsonl(self.cfg.path_of("data.pairs"), "data.pairs"), by_id

    def records(self, sessions: list[dict[str, Any]], tokenizer: Any) -> list[Any]:
        from finetune.data import columns_of  # torch: the train extra

        pairs, by_id = self.pair_records(sessions)
        examples = [
            build_pair(p, by_id, tokenizer, self.max_seq_len, self.max_result_chars) for p in pairs
        ]
        columns_of(examples)  # pairs with and without stored ref_logps do not mix
        self.reference_stored = bool(examples) and examples[0].ref_logps is not None
        self.truncation = truncation_report(examples)
        return examples

    def collate(self, tokenizer: Any) -> Any:
        from finetune.data import collate_pairs  # torch: the train extra

        return functools.partial(collate_pairs, pad_id=tokenizer.pad_token_id)


class RFTData(SFTData):
    """The verified-green rollouts of ``data.rollouts`` (run folders of ``etai run``), shortest
    first, deduplicated, as sessions.

    ``trainer: {type: rft, per_session: 1, allow_invalid: false, with_sessions: false}``:
    distinct green rollouts kept per session; whether rollouts with an invalid step may be kept;
    whether the reference traces of ``data.sessions`` are trained on too. Every kept row's prompts
    are re-rendered and checked against the hashes the agent stored (``rollouts.check_prompts``).
    """

    def sessions(self) -> list[dict[str, Any]]:
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
    value = cfg.get(key, (str, list))
    folders = [value] if isinstance(value, str) else value
    return read_runs([cfg.path_of_value(str(f), key) for f in folders])


def _read_jsonl(path: Path, key: str) -> list[dict[str, Any]]:
    records = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except ValueError as exc:
            raise ConfigError(key, f"{path}:{n}: not JSON: {exc}") from None
    return records
