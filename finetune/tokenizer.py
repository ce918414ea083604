"""Tokenizers: a pretrained one from disk, or a tiny BPE trained locally on the session texts.

Either way the ETAI special tokens are added through the same call (``add_etai_tokens``), so a
tiny run exercises the path a real model takes: new ids, then the embeddings are resized.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness.etai_format import SPECIAL_TOKENS

PAD, EOS = "<|pad|>", "<|endoftext|>"


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
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=PAD, eos_token=EOS)


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
