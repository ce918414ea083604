"""What the model backends share: generation options, the text-protocol episode, seeds, fingerprints.

Stdlib only: the backends import torch or open sockets inside their own functions, so that the
agent registry (which imports every backend module) stays cheap.
"""

from __future__ import annotations

import hashlib
import json
import os
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.agents.etai_format import DEFAULT_MAX_RESULT_CHARS, parse_action, render_prompt
from harness.base.errors import InputError

DEFAULT_MAX_NEW_TOKENS = 512  # a file_write of a small source file fits; the tiny tests pass less


def option(
    options: Mapping[str, Any],
    key: str,
    kind: type,
    default: Any,
    ok: Callable[[Any], bool],
    rule: str,
    *,
    env: str | None = None,
    where: str | None = None,
) -> Any:
    """Agent option ``key``, else environment variable ``env``, else ``default``: the one parser of
    agent settings. A bad value is an InputError naming where it came from (exit 2, before the
    run), never a ValueError's traceback from inside it; a fraction is no whole number."""
    value, where = options.get(key), where or f"--{key.replace('_', '-')}"
    if value is None and env:
        value, where = env_first(env), env
    if value is None:
        return default
    try:
        parsed = kind(value)
        if kind is int and parsed != float(value):  # int(1.5) would quietly be 1
            raise ValueError
    except (TypeError, ValueError):
        raise InputError(f"{key} must be {rule} (got {value!r})", where=where) from None
    if not ok(parsed):
        raise InputError(f"{key} must be {rule} (got {value!r})", where=where)
    return parsed


@dataclass(frozen=True)
class Generation:
    """Decoding settings, the same for every backend. ``temperature == 0`` means greedy."""

    temperature: float = 0.0
    top_p: float = 1.0
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS  # must match what the model was trained with

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0

    @classmethod
    def from_options(cls, options: Mapping[str, Any], **defaults: Any) -> Generation:
        """From the CLI's options; absent keys fall back to ``defaults`` and then the class defaults."""
        base = cls(**defaults)
        return cls(
            temperature=option(
                options,
                "temperature",
                float,
                base.temperature,
                lambda v: 0 <= v <= 10,
                "a number in [0, 10]",
            ),
            top_p=option(
                options, "top_p", float, base.top_p, lambda v: 0 < v <= 1, "a number in (0, 1]"
            ),
            max_new_tokens=option(
                options,
                "max_new_tokens",
                int,
                base.max_new_tokens,
                lambda v: v >= 1,
                "a positive integer",
            ),
            max_result_chars=option(
                options,
                "max_result_chars",
                int,
                base.max_result_chars,
                lambda v: v >= 0,
                "a non-negative integer (0 = no limit)",
            ),
        )


def step_seed(session_id: str, sample: int, step: int) -> int:
    """A seed per (session, sample, step): sampled rollouts are reproducible where the backend allows."""
    return zlib.crc32(f"{session_id}\0{sample}\0{step}".encode()) & 0x7FFFFFFF


def tool_names_of(tools: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The names in OpenAI-style function schemas (what TaskView.tools holds)."""
    return tuple(
        t["function"]["name"]
        for t in tools
        if isinstance(t, Mapping) and isinstance(t.get("function"), Mapping)
    )


# A completion function: (prompt, seed) -> the model's text up to and including its stop marker.
Complete = Callable[[str, int], str]


@dataclass
class TextEpisode:
    """One rollout through the ETAI text protocol: render the prompt, complete it, parse the output.

    Stateless apart from its identity: the prompt is rebuilt from the observations each step, so
    what the model sees is exactly ``render_prompt`` (the text it was trained on).
    """

    record: dict[str, Any]
    sample: int
    tools: tuple[str, ...]
    gen: Generation
    complete: Complete
    outputs: list[str] = field(default_factory=list)  # raw model texts, one per step
    prompt_sha256: list[str] = field(default_factory=list)  # of the prompt text, one per step

    def act(self, observations: Sequence[Mapping[str, Any]]):
        prompt = render_prompt(self.record, observations, self.gen.max_result_chars)
        self.prompt_sha256.append(hashlib.sha256(prompt.encode()).hexdigest())
        text = self.complete(
            prompt, step_seed(self.record["session_id"], self.sample, len(observations))
        )
        self.outputs.append(text)
        return parse_action(text, tools=self.tools)

    def transcript(self) -> dict[str, Any]:
        """What a result row keeps to be training data: the render settings, a hash of each prompt
        (a reader re-renders it from the row's task and observations and checks the hash) and the
        raw output of each step, invalid ones included."""
        return {
            "format": "etai-text",
            "max_result_chars": self.gen.max_result_chars,
            "temperature": self.gen.temperature,
            "prompt_sha256": list(self.prompt_sha256),
            "outputs": list(self.outputs),
        }


# ------------------------------------------------------------------------------ fingerprints
# Files that change what a model folder generates. Weights are hashed in full up to this size and
# sampled above it (size, head, tail and one block every 64 MiB): a fine-tuned checkpoint differs
# from its base everywhere, so samples tell them apart without reading 15 GB on every run.
_FULL_HASH_BYTES = 512 << 20
_SAMPLE_STRIDE, _SAMPLE_BYTES = 64 << 20, 64 << 10
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
_CONFIG_NAMES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
    "chat_template.jinja",
    "chat_template.json",
    "etai.json",
    "trainer_state.json",
    "model.safetensors.index.json",
    "pytorch_model.bin.index.json",
)
_cache: dict[tuple[str, int, int], str] = {}


def _file_digest(path: Path) -> str:
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key in _cache:
        return _cache[key]
    h = hashlib.sha256(str(st.st_size).encode())
    with path.open("rb") as f:
        if st.st_size <= _FULL_HASH_BYTES:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        else:
            for offset in [
                *range(0, st.st_size, _SAMPLE_STRIDE),
                max(st.st_size - _SAMPLE_BYTES, 0),
            ]:
                f.seek(offset)
                h.update(f.read(_SAMPLE_BYTES))
    _cache[key] = h.hexdigest()
    return _cache[key]


def folder_fingerprint(folder: Path) -> str:
    """sha256 over a model folder's config, tokenizer and weight files (names and contents)."""
    h = hashlib.sha256()
    for p in sorted(folder.iterdir()):
        if p.is_file() and (p.name in _CONFIG_NAMES or p.suffix in _WEIGHT_SUFFIXES):
            h.update(p.name.encode() + b"\0" + _file_digest(p).encode() + b"\n")
    return h.hexdigest()[:16]


def folder_settings(folder: Path) -> dict[str, Any]:
    """Optional ``etai.json`` beside the weights: settings the model was trained with (for example
    ``{"max_result_chars": 400}``), so prompts are rendered the way training rendered them."""
    p = folder / "etai.json"
    if not p.is_file():
        return {}
    try:
        data = json.loads(p.read_text())
    except (OSError, ValueError) as e:
        raise InputError(f"etai.json is not valid JSON ({e})", where=str(p)) from None
    if not isinstance(data, dict):
        raise InputError("etai.json must hold a JSON object", where=str(p))
    return data


def env_first(*names: str) -> str | None:
    """The first of ``names`` set (non-empty) in the environment."""
    for n in names:
        if os.environ.get(n):
            return os.environ[n]
    return None
