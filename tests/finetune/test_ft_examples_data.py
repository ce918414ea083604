"""Sessions -> examples (loss mask, head labels at marker positions, truncation) -> MDS / memory batches."""

from __future__ import annotations

import json

import numpy as np
import pytest

from finetune.errors import DataError
from finetune.examples import (
    IGNORE,
    MISSING,
    build_example,
    build_pair,
    cursor_pixels,
    load_sessions,
    step_succeeded,
    synthetic_pairs,
    truncation_report,
)
from harness.agents import etai_format as fmt
from harness.session.intents import ALLOWED_TOOLS, INTENTS
from harness.tools import tool_names

pytestmark = pytest.mark.train


def test_cursor_pixels_by_hand():
    vp = {
        "scroll_top_line": 0,
        "line_height_px": 18,
        "char_width_px": 7.2,
        "gutter_px": 48,
        "zoom": 1.0,
    }
    assert cursor_pixels({"line": 2, "column": 10}, vp) == pytest.approx((48 + 9 * 7.2, 18.0))
    zoomed = {
        "scroll_top_line": 2,
        "line_height_px": 20,
        "char_width_px": 8.0,
        "gutter_px": 40,
        "zoom": 1.25,
    }
    assert cursor_pixels({"line": 5, "column": 3}, zoomed) == pytest.approx(
        (40 + 2 * 8 * 1.25, 2 * 20 * 1.25)
    )


def test_step_succeeded_reads_exit_codes_and_flags():
    assert step_succeeded({"exit_code": 0}) == 1 and step_succeeded({"exit_code": 1}) == 0
    assert step_succeeded({"success": False}) == 0 and step_succeeded({"content": "x"}) == 1
    assert step_succeeded({"error": "ENOENT"}) == 0 and step_succeeded(None) == MISSING


def test_example_masks_only_actions_and_final(sessions, tokenizer):
    session = sessions[0]
    ex = build_example(session, tokenizer, max_seq_len=4096, max_result_chars=300)
    learned = [t for t, lab in zip(ex.input_ids, ex.labels) if lab != IGNORE]
    assert all(lab in (IGNORE, t) for t, lab in zip(ex.input_ids, ex.labels))
    expected = "".join(
        fmt.render_action(s["tool_called"], s["tool_args"]) for s in session["execution_trace"]
    )
    expected += fmt.render_final(session["final_output"])
    assert tokenizer.decode(learned) == expected
    assert ex.truncated == 0


def test_example_head_labels_sit_on_their_markers(sessions, tokenizer):
    session = sessions[4]  # cart-mutation: a failing jest_run in step 4, zoomed viewport
    ex = build_example(session, tokenizer, max_seq_len=4096)
    tok = tokenizer.convert_ids_to_tokens
    assert tok(ex.input_ids[ex.intent_pos]) == "<TRACE_START>"
    assert [tok(ex.input_ids[p]) for p in ex.tool_pos] == ["<TOOL>"] * 6
    assert [tok(ex.input_ids[p]) for p in ex.reward_pos] == ["<RESULT>"] * 6
    assert tok(ex.input_ids[ex.cursor_pos]) == "<OUTPUT>"
    assert ex.intent == INTENTS.index("fix_data_mutation")
    trace = session["execution_trace"]
    assert ex.tool_label == tuple(tool_names().index(s["tool_called"]) for s in trace)
    assert ex.reward_label == (0, 1, 1, 0, 1, 1)  # exit 1, read, edit ok, exit 1, read, exit 0
    assert ex.exit_label == 1 and ex.placement == 0
    assert ex.cursor_xy == pytest.approx((40 + 2 * 8.0 * 1.25, 1 * 20 * 1.25))


def test_truncation_counts_what_was_cut(sessions, tokenizer):
    full = build_example(sessions[7], tokenizer, max_seq_len=100_000)
    short = build_example(sessions[7], tokenizer, max_seq_len=120)
    assert len(short.input_ids) == 120 and short.truncated == len(full.input_ids) - 120
    assert len(short.tool_pos) < len(full.tool_pos) and short.cursor_pos == MISSING
    assert len(short.tool_label) == len(short.tool_pos)
    report = truncation_report([full, short])
    assert (report.examples, report.truncated_examples, report.tokens_cut) == (
        2,
        1,
        short.truncated,
    )
    assert str(report) == f"1 of 2 examples truncated, {short.truncated} tokens cut"


def test_load_sessions_names_file_line_and_field(tmp_path):
    bad = tmp_path / "s.jsonl"
    bad.write_text('{"session_id": "a", "user_instruction": "x", "execution_trace": []}\n')
    with pytest.raises(DataError, match=r"s.jsonl:1: session 'a' lacks 'final_output'"):
        load_sessions(bad)
    bad.write_text("{not json\n")
    with pytest.raises(DataError, match="s.jsonl:1: not JSON"):
        load_sessions(bad)


def test_synthetic_pairs_reject_a_tool_the_intent_forbids(sessions, tokenizer):
    pairs = synthetic_pairs(sessions[:2], seed=0)
    assert len(pairs) == sum(len(s["execution_trace"]) for s in sessions[:2])
    for p in pairs:
        intent = next(s["intent"] for s in sessions if s["session_id"] == p["session_id"])
        assert p["rejected"]["tool_called"] not in ALLOWED_TOOLS[intent]
    pair = build_pair(pairs[1], {s["session_id"]: s for s in sessions}, tokenizer, max_seq_len=4096)
    chosen = [t for t, lab in zip(pair.chosen_ids, pair.chosen_labels) if lab != IGNORE]
    assert tokenizer.decode(chosen) == fmt.render_action("file_read", {"file": "src/date.js"})
    n_prompt = pair.chosen_labels.index(next(lab for lab in pair.chosen_labels if lab != IGNORE))
    assert pair.chosen_ids[:n_prompt] == pair.rejected_ids[:n_prompt]  # shared prompt


def test_mds_round_trip_matches_memory_records(sessions, tokenizer, tmp_path):
    from finetune.data import collate_examples, read_mds, to_record, write_mds

    examples = [build_example(s, tokenizer, max_seq_len=4096) for s in sessions]
    out = write_mds(examples, tmp_path / "mds")
    dataset = read_mds(out, batch_size=4, shuffle=False)
    assert len(dataset) == len(examples)
    for i, ex in enumerate(examples):
        got, want = dataset[i], to_record(ex)
        for key, value in want.items():
            np.testing.assert_array_equal(np.asarray(got[key]), np.asarray(value), err_msg=key)
    batch = collate_examples([dataset[i] for i in range(3)], pad_id=tokenizer.pad_token_id)
    width = max(len(examples[i].input_ids) for i in range(3))
    assert (
        batch["input_ids"].shape
        == batch["labels"].shape
        == batch["attention_mask"].shape
        == (3, width)
    )
    assert batch["tool_pos"].shape == (3, 5) and batch["intent"].shape == (3,)
    assert batch["attention_mask"][0].sum().item() == len(examples[0].input_ids)
    assert (batch["labels"][0, len(examples[0].input_ids) :] == IGNORE).all()


def test_pairs_collate_into_one_row_each(sessions, tokenizer):
    from finetune.data import collate_pairs, to_record

    by_id = {s["session_id"]: s for s in sessions}
    records = [
        to_record(build_pair(p, by_id, tokenizer, 512)) for p in synthetic_pairs(sessions[:1])[:3]
    ]
    batch = collate_pairs(records, pad_id=tokenizer.pad_token_id)
    assert (
        batch["input_ids"].shape[:2] == (3, 2) and batch["labels"].shape == batch["input_ids"].shape
    )
    assert batch["uid"].shape == (3,)
    # micro-batching splits dim 0, so a pair can never be separated
    assert json.dumps(batch["input_ids"][1, 0].tolist()) != json.dumps(
        batch["input_ids"][1, 1].tolist()
    )
