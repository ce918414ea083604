"""Examples -> batches: MDS shards read back through StreamingDataset, or an in-memory list.

MDS is the path for real runs (shuffled, resumable mid-epoch through Composer's dataset state);
the in-memory path keeps small runs free of shard files. Both yield the same records, and one
collate function pads them.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from finetune.errors import DataError
from finetune.examples import IGNORE, MISSING, Example, PairExample

EXAMPLE_COLUMNS = {
    "uid": "int",
    "input_ids": "ndarray:int32",
    "labels": "ndarray:int32",
    "intent": "int",
    "intent_pos": "int",
    "tool_pos": "ndarray:int32",
    "tool_label": "ndarray:int32",
    "reward_pos": "ndarray:int32",
    "reward_label": "ndarray:float32",  # a step's 1/0, or a rollout's target (finetune.outcomes)
    "cursor_pos": "int",
    "cursor_xy": "ndarray:float32",
    "placement": "int",
    "exit_label": "int",
    "truncated": "int",
}
PAIR_COLUMNS = {
    "uid": "int",
    "chosen_ids": "ndarray:int32",
    "chosen_labels": "ndarray:int32",
    "rejected_ids": "ndarray:int32",
    "rejected_labels": "ndarray:int32",
    "truncated": "int",
}
REF_LOGPS_COLUMN = {"ref_logps": "ndarray:float32"}  # pairs whose reference log-probs are stored


def columns_of(examples: Sequence[Example | PairExample]) -> dict[str, str]:
    """The MDS columns: examples', or pairs' (with ``ref_logps`` when every pair has it).

    Pairs with and without stored reference log-probs cannot share a batch (the loss would get the
    column for some rows only), so a mix is a DataError.
    """
    if not examples or isinstance(examples[0], Example):
        return EXAMPLE_COLUMNS
    stored = {e.ref_logps is not None for e in examples}
    if len(stored) > 1:
        raise DataError("some preference pairs carry ref_logps and some do not: give all or none")
    return {**PAIR_COLUMNS, **REF_LOGPS_COLUMN} if stored == {True} else PAIR_COLUMNS


def to_record(example: Example | PairExample) -> dict[str, Any]:
    columns = EXAMPLE_COLUMNS if isinstance(example, Example) else PAIR_COLUMNS
    record = asdict(example)
    if isinstance(example, PairExample):
        if example.ref_logps is None:
            record.pop("ref_logps")
        else:
            columns = {**columns, **REF_LOGPS_COLUMN}
    for key, kind in columns.items():
        if kind.startswith("ndarray"):
            record[key] = np.asarray(record[key], dtype=kind.split(":")[1])
    return record


def write_mds(examples: Sequence[Example | PairExample], out_dir: str | Path) -> Path:
    """Write shards to ``out_dir`` (replaced if present) and return it."""
    from streaming import MDSWriter

    out_dir = Path(out_dir)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    columns = columns_of(examples)
    with MDSWriter(out=str(out_dir), columns=columns, compression="zstd") as writer:
        for example in examples:
            writer.write(to_record(example))
    return out_dir


def read_mds(local_dir: str | Path, batch_size: int, shuffle: bool = True, seed: int = 9176) -> Any:
    """A StreamingDataset over local shards; no remote, so nothing is downloaded."""
    from streaming import StreamingDataset

    return StreamingDataset(
        local=str(local_dir), remote=None, shuffle=shuffle, shuffle_seed=seed, batch_size=batch_size
    )


class RecordDataset(Dataset):
    """The in-memory path: records held in a list."""

    def __init__(self, records: Sequence[dict[str, Any]]):
        self.records = list(records)

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.records[index]


def _pad(
    rows: Sequence[Any], value: int, min_len: int = 1, dtype: torch.dtype = torch.long
) -> torch.Tensor:
    rows = [np.asarray(r).reshape(-1) for r in rows]
    width = max([min_len] + [len(r) for r in rows])
    out = torch.full((len(rows), width), value, dtype=dtype)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.from_numpy(np.array(r)).to(dtype)  # copy: MDS arrays are read-only
    return out


def _scalars(records: Sequence[dict[str, Any]], key: str) -> torch.Tensor:
    return torch.tensor([int(r[key]) for r in records], dtype=torch.long)


def collate_examples(records: Sequence[dict[str, Any]], pad_id: int) -> dict[str, torch.Tensor]:
    ids = _pad([r["input_ids"] for r in records], pad_id)
    lengths = torch.tensor([len(np.asarray(r["input_ids"]).reshape(-1)) for r in records])
    batch = {
        "input_ids": ids,
        "attention_mask": (torch.arange(ids.size(1)) < lengths.unsqueeze(1)).long(),
        "labels": _pad([r["labels"] for r in records], IGNORE),
        "cursor_xy": torch.as_tensor(
            np.stack([np.asarray(r["cursor_xy"], dtype=np.float32) for r in records])
        ),
    }
    for key in (
        "uid",
        "intent",
        "intent_pos",
        "cursor_pos",
        "placement",
        "exit_label",
        "truncated",
    ):
        batch[key] = _scalars(records, key)
    for key in ("tool_pos", "tool_label", "reward_pos"):
        batch[key] = _pad([r[key] for r in records], MISSING)
    batch["reward_label"] = _pad([r["reward_label"] for r in records], MISSING, dtype=torch.float32)
    return batch


def collate_pairs(records: Sequence[dict[str, Any]], pad_id: int) -> dict[str, torch.Tensor]:
    """Rows [B, 2, L]: chosen at index 0, rejected at 1, padded to one length."""
    sides = [r[k] for r in records for k in ("chosen_ids", "rejected_ids")]
    ids = _pad(sides, pad_id)
    lengths = torch.tensor([len(np.asarray(s).reshape(-1)) for s in sides])
    labels = _pad([r[k] for r in records for k in ("chosen_labels", "rejected_labels")], IGNORE)
    mask = (torch.arange(ids.size(1)) < lengths.unsqueeze(1)).long()
    batch = {
        k: v.view(len(records), 2, -1)
        for k, v in {"input_ids": ids, "attention_mask": mask, "labels": labels}.items()
    }
    batch["uid"] = _scalars(records, "uid")
    batch["truncated"] = _scalars(records, "truncated")
    if "ref_logps" in records[0]:  # precomputed reference log-probs travel with the pair
        batch["ref_logps"] = torch.tensor(
            [list(r["ref_logps"]) for r in records], dtype=torch.float32
        )
    return batch


def make_dataloader(
    dataset: Any, batch_size: int, collate: Any, shuffle: bool, seed: int, num_workers: int = 0
) -> DataLoader:
    """A DataLoader; map-style datasets get Composer's DistributedSampler (required when world > 1)."""
    from composer.utils import dist

    sampler = (
        None
        if isinstance(dataset, torch.utils.data.IterableDataset)
        else dist.get_sampler(dataset, shuffle=shuffle, drop_last=False, seed=seed)
    )
    return DataLoader(
        dataset,
        batch_size=batch_size,
        sampler=sampler,
        collate_fn=collate,
        num_workers=num_workers,
        drop_last=False,
    )


def with_reference_logps(
    pairs: Sequence[PairExample], lm: Any, pad_id: int, batch_size: int = 8
) -> list[PairExample]:
    """The pairs with ``ref_logps`` filled in by ``lm`` (the frozen reference), computed once.

    The same sums the DPO loss's reference pass computes (``losses.sequence_logps``), so a run
    with stored log-probs needs no reference model in memory during training.
    """
    from finetune.losses import sequence_logps

    out: list[PairExample] = []
    was_training = lm.training
    lm.eval()
    device = next(lm.parameters()).device
    with torch.no_grad():
        for start in range(0, len(pairs), batch_size):
            chunk = [replace(p, ref_logps=None) for p in pairs[start : start + batch_size]]
            batch = collate_pairs([to_record(p) for p in chunk], pad_id)
            flat = {
                k: batch[k].reshape(-1, batch[k].size(-1)).to(device)
                for k in ("input_ids", "attention_mask", "labels")
            }
            logits = lm(input_ids=flat["input_ids"], attention_mask=flat["attention_mask"]).logits
            logps, _ = sequence_logps(logits, flat["labels"])
            for pair, (c, r) in zip(chunk, logps.view(-1, 2).tolist()):
                out.append(replace(pair, ref_logps=(c, r)))
    lm.train(was_training)
    return out
