"""Stored reference log-probs: a pair's ``ref_logps`` travels through records, MDS shards and
batches, is computed once by the reference model, and spares DPO the reference pass."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from finetune.errors import DataError
from finetune.examples import build_pair, synthetic_pairs

pytestmark = pytest.mark.train


def _pairs(sessions, tokenizer, ref=None, n=3):
    by_id = {s["session_id"]: s for s in sessions}
    records = synthetic_pairs(sessions[:1])[:n]
    if ref is not None:
        records = [{**r, "ref_logps": [ref - i, ref - i - 1.5]} for i, r in enumerate(records)]
    return [build_pair(r, by_id, tokenizer, 512) for r in records]


def test_ref_logps_reach_the_batch_in_memory_and_through_mds(sessions, tokenizer, tmp_path):
    from finetune.data import collate_pairs, read_mds, to_record, write_mds

    pairs = _pairs(sessions, tokenizer, ref=-10.0)
    assert pairs[1].ref_logps == (-11.0, -12.5)
    batch = collate_pairs([to_record(p) for p in pairs], pad_id=tokenizer.pad_token_id)
    assert batch["ref_logps"].tolist() == [[-10.0, -11.5], [-11.0, -12.5], [-12.0, -13.5]]
    dataset = read_mds(write_mds(pairs, tmp_path / "mds"), batch_size=3, shuffle=False)
    from_disk = collate_pairs([dataset[i] for i in range(3)], pad_id=tokenizer.pad_token_id)
    np.testing.assert_array_equal(from_disk["ref_logps"].numpy(), batch["ref_logps"].numpy())
    plain = collate_pairs(
        [to_record(p) for p in _pairs(sessions, tokenizer)], tokenizer.pad_token_id
    )
    assert "ref_logps" not in plain


def test_pairs_with_and_without_ref_logps_do_not_mix(sessions, tokenizer, tmp_path):
    from finetune.data import write_mds

    mixed = _pairs(sessions, tokenizer, ref=-1.0, n=1) + _pairs(sessions, tokenizer, n=1)
    with pytest.raises(DataError, match="ref_logps"):
        write_mds(mixed, tmp_path / "mds")
    bad = {**synthetic_pairs(sessions[:1])[0], "ref_logps": [1.0]}
    with pytest.raises(DataError, match="ref_logps"):
        build_pair(bad, {s["session_id"]: s for s in sessions}, tokenizer, 512)


def test_computed_once_equals_the_losss_reference_pass(sessions, tokenizer):
    from transformers import GPT2Config, GPT2LMHeadModel

    from finetune.data import collate_pairs, to_record, with_reference_logps
    from finetune.losses import DPOLoss

    torch.manual_seed(0)
    lm = GPT2LMHeadModel(
        GPT2Config(vocab_size=len(tokenizer), n_positions=512, n_embd=32, n_layer=1, n_head=2)
    )
    pairs = _pairs(sessions, tokenizer)
    stored = with_reference_logps(pairs, lm, tokenizer.pad_token_id, batch_size=2)
    batch = collate_pairs([to_record(p) for p in pairs], pad_id=tokenizer.pad_token_id)
    with torch.no_grad():
        want = DPOLoss().reference_outputs(lm.eval(), batch)["ref_logps"]
    got = torch.tensor([p.ref_logps for p in stored])
    assert torch.allclose(got, want, atol=1e-4)
    assert all(p.ref_logps is None for p in pairs)  # the inputs are left as they were


@pytest.mark.slow
def test_dpo_with_stored_ref_logps_runs_no_reference(tmp_path, tiny_overrides, sessions):
    from finetune.train import train

    from .conftest import TINY_CONFIG

    pairs = [{**r, "ref_logps": [-50.0, -50.0]} for r in synthetic_pairs(sessions[:1])]
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in pairs))
    common = dict(
        trainer__type="dpo",
        loss__name="dpo",
        data__format="memory",
        train__max_duration="1ep",
        train__save_folder="",
        train__autoresume=False,
        algorithms__loss_weight_schedule=False,
        data__max_seq_len=512,
    )
    trainer = train(TINY_CONFIG, tiny_overrides(tmp_path, data__pairs=str(path), **common))
    names = [type(a).__name__ for a in trainer.state.algorithms]
    assert "ReferenceForward" not in names
    precomputed = train(
        TINY_CONFIG,
        tiny_overrides(tmp_path, algorithms__reference="{precompute: true}", **common),
    )
    assert "ReferenceForward" not in [type(a).__name__ for a in precomputed.state.algorithms]
    first = precomputed.state.dataloader.dataset[0]
    assert len(first["ref_logps"]) == 2 and first["ref_logps"][0] < 0
