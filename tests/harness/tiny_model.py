"""A tiny causal LM folder shaped like a user's: what ``hf:PATH`` and the test servers load.

Nothing is downloaded. A byte-level BPE is trained on the bundled suite's ETAI texts (the same
helper the fine-tuning stack uses), the ETAI markers are added as special tokens, the ETAI chat
template is set, a 2-layer GPT-2 is built from a config and fitted for a few seconds on a
scripted three-step rollout: a well-formed ``git_status``, then a malformed action (broken JSON,
which the harness must record as an invalid action), then a final answer. Everything is written
with ``save_pretrained``. Tests assert the protocol, never the model's quality.

    python tests/harness/tiny_model.py OUT_DIR     # build one by hand (for `etai run --agent hf:OUT_DIR`)
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SESSIONS = ROOT / "suites" / "jest-bugfix" / "sessions.jsonl"
MAX_RESULT_CHARS = 300  # written to etai.json: the hf backend renders prompts the way training did
MAX_POSITIONS = 2048


FIRST_ACTION = "<STEP><TOOL>git_status<ARGS>{}<RESULT>"
MALFORMED = '<STEP><TOOL>file_read<ARGS>{"file": <RESULT>'
FINAL = "<OUTPUT>done<TRACE_END>"


def build(folder: Path, *, steps: int = 80, seed: int = 0) -> Path:
    """Write the model to ``folder`` (reused if it is already there). Returns the folder."""
    if (folder / "config.json").is_file():
        return folder
    import torch

    from finetune.lm import build_tiny
    from finetune.tokenizer import add_etai_tokens, train_tiny_tokenizer
    from harness.agents._model_chat import ETAI_CHAT_TEMPLATE
    from harness.agents.etai_format import render_training_example

    torch.manual_seed(seed)
    sessions = [json.loads(line) for line in SESSIONS.read_text().splitlines() if line.strip()]
    texts = [render_training_example(s, MAX_RESULT_CHARS)[0] for s in sessions]
    tok = train_tiny_tokenizer(texts, vocab_size=1024)
    add_etai_tokens(tok)
    tok.chat_template = ETAI_CHAT_TEMPLATE
    model = build_tiny(
        {"arch": "gpt2", "layers": 2, "heads": 2, "hidden": 64}, len(tok), MAX_POSITIONS
    )
    model.config.pad_token_id, model.config.eos_token_id = tok.pad_token_id, tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    # Full traces would take minutes to fit on two cores; the scripted rollout takes seconds.
    _fit(model, tok, _script(sessions), steps)
    tmp = folder.with_name(folder.name + ".partial")
    model.save_pretrained(str(tmp))
    tok.save_pretrained(str(tmp))
    (tmp / "etai.json").write_text(json.dumps({"max_result_chars": MAX_RESULT_CHARS}))
    tmp.rename(folder)  # whole or absent: a test killed mid-build leaves no half model behind
    return folder


def export(model_folder: Path, folder: Path) -> Path:
    """The model of ``build`` written the way a fine-tuned one is: ``finetune.export.export_hf``
    over an ``AgentModel`` (reused if ``folder`` is already there). Returns the folder."""
    if (folder / "config.json").is_file():
        return folder
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from finetune.export import export_hf
    from finetune.model import AgentModel

    tok = AutoTokenizer.from_pretrained(str(model_folder))
    lm = AutoModelForCausalLM.from_pretrained(str(model_folder))
    export_hf(AgentModel(lm, tok, loss_fn=None), tok, folder, max_result_chars=MAX_RESULT_CHARS)
    return folder


def scripted_ids(n: int = 5) -> list[str]:
    """The sessions whose three scripted steps the model memorised (``_script``)."""
    lines = [line for line in SESSIONS.read_text().splitlines() if line.strip()]
    return [json.loads(line)["session_id"] for line in lines[:n]]


def _script(sessions: list[dict]) -> list[tuple[str, str]]:
    """(prompt, completion) pairs: each session's first step, and the later two for a few of them."""
    from harness.agents.etai_format import parse_action, render_prompt

    ok = {
        "step": 1,
        "tool_called": "git_status",
        "tool_args": {},
        "execution_result": {"output": "", "status": "ok"},
    }
    bad = {
        "step": 2,
        "tool_called": "invalid_action",
        "tool_args": {},
        "execution_result": {"status": "invalid_action", "error": parse_action(MALFORMED).reason},
    }
    pairs = [(render_prompt(s, (), MAX_RESULT_CHARS), FIRST_ACTION) for s in sessions]
    for s in sessions[:5]:
        pairs.append((render_prompt(s, [ok], MAX_RESULT_CHARS), MALFORMED))
        pairs.append((render_prompt(s, [ok, bad], MAX_RESULT_CHARS), FINAL))
    return pairs


def _fit(model, tok, pairs: list[tuple[str, str]], steps: int) -> None:
    """Full-batch Adam steps of next-token loss on each completion given its prompt."""
    import torch

    rows = [(tok(p)["input_ids"], tok(c, add_special_tokens=False)["input_ids"]) for p, c in pairs]
    width = max(len(p) + len(c) for p, c in rows)
    pad = [tok.pad_token_id] * width
    batch = torch.tensor([(p + c + pad)[:width] for p, c in rows])
    labels = torch.tensor([([-100] * len(p) + c + [-100] * width)[:width] for p, c in rows])
    mask = torch.tensor(
        [[1] * (len(p) + len(c)) + [0] * (width - len(p) - len(c)) for p, c in rows]
    )
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(steps):
        loss = model(input_ids=batch, attention_mask=mask, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    t0 = time.monotonic()
    out = build(Path(sys.argv[1]).resolve())
    print(f"{out} ({time.monotonic() - t0:.1f}s)")
