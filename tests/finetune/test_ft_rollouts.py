"""Run-folder rows as data: prompts re-render to the agent's bytes, rejection sampling keeps only
verified-green rollouts, execution pairs never cross sessions or prefixes."""

from __future__ import annotations

import json

import pytest

from finetune.errors import DataError
from finetune.examples import IGNORE, build_example, build_pair
from finetune.rewards import build_reward
from finetune.rollouts import (
    check_prompts,
    execution_pairs,
    prompt_sha256,
    read_run,
    rollout_text,
    select_green,
    trajectory,
)
from harness.agents import etai_format as fmt
from harness.agents._model_common import Generation, TextEpisode

pytestmark = pytest.mark.train

READ = {"tool_called": "file_read", "tool_args": {"file": "src/a.js"}}
EDIT = {"tool_called": "file_edit", "tool_args": {"file": "src/a.js", "old": "1", "new": "2"}}
# Results with keys out of order: a stored row sorts them, the agent's prompt did not.
BAD_EDIT = {"tool_called": "file_edit", "tool_args": {"file": "src/a.js", "old": "1", "new": "3"}}
RUN = {"tool_called": "jest_run", "tool_args": {}}


def _task(sid):
    return {
        "user_instruction": f"fix {sid}",
        "ide_context": {"open_files": ["src/a.js"], "git_status": "clean"},
    }


def _row(sid, sample, actions, status, *, green_at=None, invalid=(), final=None, tamper=()):
    """A row as the loop writes it; the transcript comes from a real TextEpisode whose
    completion function answers with the rendered actions (raw text for invalid steps)."""
    observations, outputs = [], []
    for i, action in enumerate(actions, 1):
        if i in invalid:
            outputs.append("<STEP><STEP><STEP>")
            action = {"tool_called": "invalid_action", "tool_args": {}}
            result = {"status": "invalid_action", "error": "missing <TOOL> after <STEP>"}
        else:
            outputs.append(fmt.render_action(action["tool_called"], action["tool_args"]))
            result = {"stdout": f"{action['tool_called']} ok", "status": "passed", "exit_code": 0}
        observations.append({"step": i, **action, "execution_result": result})
    if final is not None:
        outputs.append(fmt.render_final(final))
    replies = iter(outputs)
    episode = TextEpisode(
        {"session_id": sid, **_task(sid)},
        sample,
        ("file_read", "file_edit", "jest_run"),
        Generation(max_result_chars=300, temperature=1.0),
        lambda prompt, seed: next(replies),
    )
    for i in range(len(outputs)):
        episode.act(observations[:i])
    row = {
        "cache_key": f"{sid}-{sample}",
        "session_id": sid,
        "sample": sample,
        "status": status,
        "green": status == "passed",
        "steps_to_green": green_at,
        "steps_used": len(actions),
        "n_invalid": len(invalid),
        "tamper": list(tamper),
        "final_output": final,
        "task": {**_task(sid), "context_text": fmt.render_context(_task(sid))},
        "observations": observations,
        "observation_texts": [
            [
                fmt.render_action(o["tool_called"], o["tool_args"]),
                fmt.result_json(o["execution_result"]),
            ]
            for o in observations
        ],
        "transcript": episode.transcript(),
    }
    return json.loads(json.dumps(row, sort_keys=True))  # as stored: JSON objects key-sorted


def test_prompts_re_render_to_the_agents_bytes():
    row = _row("s1", 0, [READ, EDIT], "passed", green_at=2, final="done")
    assert check_prompts(row) == 3  # two actions and the answer
    changed = json.loads(json.dumps(row))
    changed["observation_texts"][0][1] = changed["observation_texts"][0][1].replace("ok", "KO")
    with pytest.raises(DataError, match="step 2"):
        check_prompts(changed)
    # the stored observations alone are key-sorted: rendering them is not what the agent saw
    sorted_text = fmt.render_prompt(trajectory(row), trajectory(row)["execution_trace"][:1], 300)
    assert prompt_sha256(sorted_text) != row["transcript"]["prompt_sha256"][1]
    older = {k: v for k, v in row.items() if k != "observation_texts"}
    with pytest.raises(DataError, match="older etai"):
        trajectory(older)


def test_rft_keeps_only_verified_green_shortest_first_deduplicated():
    rows = [
        _row("s1", 0, [READ, RUN, EDIT], "passed", green_at=3),
        _row("s1", 1, [EDIT], "passed", green_at=1),
        _row("s1", 2, [EDIT], "passed", green_at=1),  # the same path again
        _row("s1", 3, [BAD_EDIT], "failed"),
        _row("s1", 4, [EDIT], "tampered", tamper=["jest config"]),
        _row("s2", 0, [READ, EDIT], "passed", green_at=2, invalid=(1,)),
        _row("s2", 1, [RUN], "timeout"),
        _row("s3", 0, [EDIT], "infra_error"),
    ]
    kept = select_green(rows, per_session=2)
    assert [(r["session_id"], r["sample"]) for r in kept] == [("s1", 1), ("s1", 0)]
    assert all(r["status"] == "passed" and not r["tamper"] for r in kept)
    assert [r["sample"] for r in select_green(rows, per_session=1)] == [1]
    with_invalid = select_green(rows, per_session=1, allow_invalid=True)
    assert [(r["session_id"], r["sample"]) for r in with_invalid] == [("s1", 1), ("s2", 0)]


def test_rollout_example_learns_the_agents_actions_with_sft_masking(tokenizer):
    row = _row("s1", 0, [READ, EDIT], "passed", green_at=2)  # no final answer
    rendered = rollout_text(row, 300)
    ex = build_example(trajectory(row), tokenizer, 4096, 300, rendered=rendered)
    learned = tokenizer.decode([t for t, lab in zip(ex.input_ids, ex.labels) if lab != IGNORE])
    want = "".join(fmt.render_action(a["tool_called"], a["tool_args"]) for a in (READ, EDIT))
    assert learned == want  # actions only: results are given, no answer was emitted
    text = tokenizer.decode(list(ex.input_ids))
    hashes = row["transcript"]["prompt_sha256"]
    for i, action in enumerate((READ, EDIT)):  # every prompt the agent got is a prefix
        start = text.index(fmt.render_action(action["tool_called"], action["tool_args"]))
        assert prompt_sha256(text[:start]) == hashes[i]
    assert fmt.OUTPUT not in text


def test_execution_pairs_share_session_and_prefix():
    rows = [
        _row("s1", 0, [READ, EDIT], "passed", green_at=2),
        _row("s1", 1, [READ, BAD_EDIT], "failed"),
        _row("s1", 2, [RUN, EDIT], "passed", green_at=2),  # same reward as sample 0: no pair
        _row("s2", 0, [EDIT], "passed", green_at=1),
        _row("s2", 1, [READ], "invalid_action", invalid=(1,)),
        _row("s3", 0, [EDIT], "failed"),  # no green rollout: no pair
    ]
    pairs = execution_pairs(rows, build_reward(None))
    by_session = {}
    for p in pairs:
        by_session.setdefault(p["session_id"], []).append(p)
    assert set(by_session) == {"s1", "s2"}
    (s1,) = by_session["s1"]  # step 0 is the same action: the pair is at the divergence
    assert s1["step"] == 1
    assert s1["chosen"] == {"text": fmt.render_action(EDIT["tool_called"], EDIT["tool_args"])}
    assert '"new": "3"' in s1["rejected"]["text"]
    (s2,) = by_session["s2"]
    assert s2["step"] == 0 and s2["rejected"] == {"text": "<STEP><STEP><STEP>"}
    for p in pairs:  # both sides were emitted after the same prompt, the one each agent got
        assert prompt_sha256(p["prompt"]) == p["prompt_sha256"]
        session_rows = [r for r in rows if r["session_id"] == p["session_id"]]
        hashes = [r["transcript"]["prompt_sha256"][p["step"]] for r in session_rows]
        assert hashes.count(p["prompt_sha256"]) >= 2


def test_pairs_stop_where_the_prompts_diverge(tokenizer):
    a = _row("s1", 0, [READ, EDIT], "passed", green_at=2)
    b = _row("s1", 1, [READ, BAD_EDIT], "failed")
    b["observation_texts"][0][1] = b["observation_texts"][0][1].replace(
        "ok", "KO"
    )  # another result
    pairs = execution_pairs([a, b], build_reward(None))
    assert pairs == []  # step 0 is the same action; after it the prompts differ
    ok = execution_pairs([a, _row("s1", 1, [READ, BAD_EDIT], "failed")], build_reward({}))
    pair = build_pair(ok[0], {}, tokenizer, 4096, 300)  # the record brings its prompt
    n = next(i for i, lab in enumerate(pair.chosen_labels) if lab != IGNORE)
    assert pair.chosen_ids[:n] == pair.rejected_ids[:n]
    assert (
        prompt_sha256(tokenizer.decode(list(pair.chosen_ids[:n])))
        == (a["transcript"]["prompt_sha256"][1])
    )


def test_read_run_names_what_is_missing(tmp_path):
    with pytest.raises(DataError, match="results.jsonl"):
        read_run(tmp_path)
    row = _row("s1", 0, [EDIT], "passed", green_at=1)
    (tmp_path / "results.jsonl").write_text(json.dumps(row) + "\n")
    (got,) = read_run(tmp_path)
    assert got["transcript"] == row["transcript"]
