"""The eval-share estimate (#34): the pure model by hand, and scripts/eval_share.py --estimate
end to end on tiny-cpu with the bundled split (its inputs measured from the config's pipeline,
the held-out sessions in its tokenizer and the rows of a real oracle run)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from finetune.eval_budget import Inputs, estimate

pytestmark = pytest.mark.train
PROJECT = Path(__file__).resolve().parents[2]
SCRIPT = PROJECT / "scripts" / "eval_share.py"
TINY_CONFIG = PROJECT / "finetune" / "configs" / "tiny-cpu.yaml"

BASE = Inputs(
    ranks=8,
    global_batch=64,
    interval_steps=200,
    tokens_per_example=1000,
    params=1e9,
    peak_flops=1e14,
    mfu=0.5,
    eval_sessions=20,
    max_steps=4,
    workers=2,
    gen_batch=4,
    action_tokens=100,
    prompt_tokens=500,
    decode_s_per_token=0.01,
    prefill_tokens_per_s=1000,
    acquire_s=0.5,
    tool_s=1.0,
    verify_s=3.0,
    gather_s=2.0,
    write_s=10.0,
)


def test_the_estimate_by_hand():
    e = estimate(BASE)
    assert e.train_step_s == pytest.approx(6 * 1e9 * 1000 * 64 / (8 * 1e14 * 0.5))  # 0.96 s
    assert e.train_interval_s == pytest.approx(192.0)
    # 3 episodes a rank (ceil 20/8), 2 at a time: 2 waves of batch 2.
    assert (e.episodes_per_rank, e.waves) == (3, 2)
    assert e.step_s == pytest.approx(100 * 0.01 + 2 * 500 / 1000 + 1.0)  # 3 s
    assert e.episode_s == pytest.approx(0.5 + 4 * 3.0 + 3.0)
    assert e.sync_eval_s == pytest.approx(2.0 + 2 * 15.5)
    assert e.sync_share == pytest.approx(33 / (192 + 33))
    # async: training waits for the snapshot (the gather) only; the write runs beside it
    assert e.async_wait_s == 2.0 and e.async_share == pytest.approx(2 / 194) and e.async_keeps_up


def test_more_sessions_or_slower_decoding_cost_more_and_bad_counts_are_refused():
    e = estimate(BASE)
    assert estimate(dataclasses.replace(BASE, eval_sessions=40)).sync_share > e.sync_share
    assert estimate(dataclasses.replace(BASE, decode_s_per_token=0.1)).sync_share > e.sync_share
    slow = estimate(dataclasses.replace(BASE, decode_s_per_token=1.0))
    assert not slow.async_keeps_up  # the evaluation outlasts the interval it runs beside
    # the write is off the training thread: it costs no share, but it must end within the interval
    long_write = estimate(dataclasses.replace(BASE, write_s=170.0))
    assert long_write.async_share == e.async_share and not long_write.async_keeps_up
    with pytest.raises(ValueError, match="at least 1"):
        estimate(dataclasses.replace(BASE, workers=0))


@pytest.mark.docker
@pytest.mark.slow
def test_the_script_measures_what_it_can_and_names_every_source(tmp_path):
    from harness import run

    held_out = ["price-formatter-lost-this", "retry-default-attempts"]
    run("jest-bugfix", ["oracle"], out=tmp_path / "oracle", session_ids=held_out, workers=2)
    assumed = json.loads((PROJECT / "bench" / "eval_share_a100.json").read_text())
    spec = f"{{interval: 4ba, sessions: [{', '.join(held_out)}], max_steps: 3, workers: 2}}"
    sets = [
        "train.max_duration=8ba",
        f"train.save_folder={tmp_path / 'ckpt'}",
        f"callbacks.harness_eval={spec}",
        "data.split=finetune/splits/jest-bugfix.yaml",
    ]
    cmd = [sys.executable, str(SCRIPT), "--estimate", str(TINY_CONFIG), "--ranks", "2"]
    cmd += ["--rows", str(tmp_path / "oracle"), *(x for s in sets for x in ("--set", s))]
    proc = subprocess.run(cmd, cwd=PROJECT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = dict(
        (cells[0], cells[1:])
        for line in proc.stdout.splitlines()
        if (cells := [c.strip() for c in line.strip("|").split("|")]) and len(cells) >= 2
    )
    assert table["eval_sessions"][0] == "2" and table["max_steps"][0] == "3"
    assert table["interval_steps"][0] == "4"
    assert float(table["verify_s"][0]) > 0 and "mean over 2 oracle rows" in table["verify_s"][1]
    assert float(table["action_tokens"][0]) > 5  # a tool call is more than a few tokens
    for key in assumed:
        if not key.startswith("_"):
            assert table[key][1].startswith("assumed: "), key
    assert 0 < float(table["sync_share"][0].rstrip("%")) < 100


def test_no_rows_of_the_evaluated_sessions_is_an_error(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "results.jsonl").write_text("")
    sets = ["callbacks.harness_eval={interval: 4ba}", f"train.save_folder={tmp_path}"]
    cmd = [sys.executable, str(SCRIPT), "--estimate", str(TINY_CONFIG)]
    cmd += ["--rows", str(tmp_path / "empty"), *(x for s in sets for x in ("--set", s))]
    cmd += ["--set", "callbacks.harness_eval.allow_overlap=true"]
    proc = subprocess.run(cmd, cwd=PROJECT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2 and "--rows: no row of an evaluated session" in proc.stderr
