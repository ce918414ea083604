"""Tokenizers: a pretrained one from disk, or a tiny BPE trained locally on the session texts.

Either way the ETAI special tokens are added through the same call (``add_etai_tokens``), so a
tiny run exercises the path a real model takes: new ids, then the embeddings are resized.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness.agents.etai_format import SPECIAL_TOKENS

PAD, EOS = "<|pad|>", "<|endoftext|>"
MODEL_INPUTS = ("input_ids", "attention_mask")  # what training gives the LM; no token_type_ids


def train_tiny_tokenizer(texts: Iterable[str], vocab_size: int = 512) -> Any:
    """A byte-level BPE trained on ``texts``; nothing is downloaded."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[PAD, EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # every byte stays encodable
        show_progress=False,
    )
    tok.train_from_iterator(list(texts), trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token=PAD, eos_token=EOS, model_input_names=list(MODEL_INPUTS)
    )


def load_tokenizer(path: str | Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path))


def add_etai_tokens(tokenizer: Any) -> int:
    """Add the ETAI markers as special tokens (never split, never merged); returns how many were new.

    A tokenizer without a pad token pads with EOS: padded positions are masked anyway.
    """
    added = tokenizer.add_special_tokens(
        {"additional_special_tokens": list(SPECIAL_TOKENS)}, replace_additional_special_tokens=False
    )
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return added


_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def make_servable(folder: str | Path) -> None:
    """Rewrite a saved tokenizer so that a server returns what the model emits and feeds it what
    it was trained on.

    Markers: servers decode what they return with ``skip_special_tokens=True`` (``transformers
    serve`` 4.57 always, with no request option to change it; vLLM and TGI unless asked), which
    deletes every marker a served ETAI model emits. As added tokens that are not *special* they
    are still one id each, matched in raw text (``normalized: false``) exactly as before, so
    encoding is unchanged and only decoding keeps them. ``add_etai_tokens`` on a tokenizer loaded
    from such a folder (a later fine-tune) marks them special again under the same ids.

    Inputs: a server passes the model every input the tokenizer returns. A tokenizer that returns
    ``token_type_ids`` (the tiny BPE of ``train_tiny_tokenizer`` did) makes GPT-2 add an embedding
    it never saw in training, where only ids and mask are given: ``model_input_names`` drops them.
    """
    import json

    folder = Path(folder)
    for name in _TOKENIZER_FILES:
        path = folder / name
        if not path.is_file():
            continue
        data = json.loads(path.read_text())
        entries = list(data.get("added_tokens") or [])  # tokenizer.json
        entries += list((data.get("added_tokens_decoder") or {}).values())  # tokenizer_config
        for entry in entries:
            if entry.get("content") in SPECIAL_TOKENS:
                entry["special"], entry["normalized"] = False, False
        extra = data.get("additional_special_tokens")
        if isinstance(extra, list):
            data["additional_special_tokens"] = [
                t
                for t in extra
                if (t.get("content") if isinstance(t, dict) else t) not in SPECIAL_TOKENS
            ]
        if name == "tokenizer_config.json":
            data["model_input_names"] = list(MODEL_INPUTS)
        path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
