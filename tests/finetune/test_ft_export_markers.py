"""An exported folder is servable: its ETAI markers survive a server's ``skip_special_tokens``
decoding with the trained ids unchanged, and its generation config ends a turn at the markers.
(The loopback ``transformers serve`` run is tests/harness/test_agents_transformers_serve.py.)"""

from __future__ import annotations

import json

import pytest

from finetune.tokenizer import add_etai_tokens, load_tokenizer, make_servable
from harness.agents import etai_format as fmt

pytestmark = pytest.mark.train


def test_markers_survive_skip_special_tokens_with_the_same_ids(tokenizer, sessions, tmp_path):
    text = fmt.render_training_example(sessions[0], 400)[0]
    tokenizer.save_pretrained(str(tmp_path))
    stripped = tokenizer.decode(tokenizer(text)["input_ids"], skip_special_tokens=True)
    assert fmt.STEP not in stripped  # what every server returned before
    make_servable(tmp_path)
    served = load_tokenizer(tmp_path)
    ids = served(text)["input_ids"]
    assert ids == tokenizer(text)["input_ids"] and len(served) == len(tokenizer)
    assert served.decode(ids, skip_special_tokens=True) == text
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert not set(fmt.SPECIAL_TOKENS) & set(config.get("additional_special_tokens") or [])
    # a later fine-tune from the folder marks them special again, under the same ids
    add_etai_tokens(served)
    assert served(text)["input_ids"] == ids and len(served) == len(tokenizer)
    assert served.decode(ids, skip_special_tokens=True) == stripped


def test_export_keeps_the_markers_and_ends_turns_at_them(tokenizer, tmp_path):
    from finetune.export import export_hf
    from finetune.lm import build_tiny
    from finetune.model import AgentModel

    lm = build_tiny({"arch": "gpt2", "layers": 1, "heads": 2, "hidden": 32}, len(tokenizer), 256)
    folder = export_hf(
        AgentModel(lm, tokenizer, None), tokenizer, tmp_path / "hf", max_result_chars=300
    )
    action = fmt.render_action("git_status", {}) + fmt.render_final("done")
    served = load_tokenizer(folder)
    assert served.decode(served(action)["input_ids"], skip_special_tokens=True) == action
    # a server passes the model every input the tokenizer returns: only what training gave it
    assert set(
        served.apply_chat_template([{"role": "user", "content": action}], return_dict=True)
    ) == {
        "input_ids",
        "attention_mask",
    }
    ends = [tokenizer.convert_tokens_to_ids(m) for m in fmt.STOP_MARKERS]
    generation = json.loads((folder / "generation_config.json").read_text())
    assert generation["eos_token_id"] == [tokenizer.eos_token_id, *ends]
    assert lm.generation_config.eos_token_id == tokenizer.eos_token_id  # the live model: unchanged
    assert tokenizer.decode(tokenizer(action)["input_ids"], skip_special_tokens=True) != action
