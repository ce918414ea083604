"""Model agents on bundled sessions: `hf:PATH`, and `openai:` against a real `transformers serve`
(the `serve` extra) on loopback, through `harness.run` and the Docker sandbox.

The tiny model (tests/harness/tiny_model.py: its first step, then two more on five sessions,
memorised) is written through finetune's own export (``export_hf``), as a fine-tuned ETAI model is,
and `transformers serve --force_model FOLDER` serves that folder. transformers serve 4.57 decodes
with ``skip_special_tokens=True`` and has no request field to change it (it answers 422 to
``skip_special_tokens``): the export keeps the ETAI markers as added tokens that are not special,
so they reach the agent, and the actions parse. The same memorised model then takes the same
actions through ``hf:`` and ``openai:``. The richer behaviours (tool calls parsed, 500 then 200,
hangs) are tested against tests/harness/openai_server.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the helper modules beside this file

import tiny_model

from harness.suites.load import load_suite

pytestmark = [pytest.mark.train, pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    base = tmp_path_factory.getbasetemp()
    return tiny_model.export(tiny_model.build(base / "etai-tiny-model"), base / "etai-tiny-export")


@pytest.fixture(scope="module")
def server(exported, free_port):
    port = free_port()
    cli = Path(sys.executable).parent / "transformers"
    proc = subprocess.Popen(
        [
            str(cli),
            "serve",
            "--force_model",
            str(exported),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--device",
            "cpu",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"{url}/models", timeout=2).read()
                break
            except OSError:
                assert proc.poll() is None, "transformers serve exited"
                assert time.monotonic() < deadline, "transformers serve did not answer in 120 s"
                time.sleep(0.5)
        yield url
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()


@pytest.fixture(scope="module")
def runs(exported, server, tmp_path_factory, image):
    """Bundled sessions with `hf:EXPORT` and with `openai:URL#EXPORT` (serve lists hub names:
    name it). The openai agent cannot read the folder's etai.json: it is given the same
    max_result_chars, so both render the same prompts. One worker for the server: transformers
    serve keeps one KV cache and reuses it for whichever request continues the last conversation,
    which concurrent episodes would race on."""
    import harness
    from harness.runs.results import read_rows

    out = tmp_path_factory.mktemp("serve-runs")
    done = {}
    # The scripted sessions and one more (the whole suite took over 10 min on two busy cores).
    sessions = [*tiny_model.scripted_ids(), load_suite("jest-bugfix").sessions[-1].session_id]
    for backend, spec, workers, options in (
        ("hf", f"hf:{exported}", 2, {"device": "cpu"}),
        (
            "openai",
            f"openai:{server}#{exported}",
            1,
            {"max_result_chars": tiny_model.MAX_RESULT_CHARS},
        ),
    ):
        summary = harness.run(
            "jest-bugfix",
            [spec],
            k=2,
            max_steps=3,
            workers=workers,
            out=out / backend,
            options={"max_new_tokens": 24, **options},
            progress=False,
            session_ids=sessions,
        )
        done[backend] = (spec, read_rows(out / backend / "results.jsonl"), summary)
    return done


def _check(rows: list[dict], summary: dict, spec: str) -> None:
    assert summary["complete"]
    assert len({r["session_id"] for r in rows}) == len(rows) == 6
    for row in rows:
        assert row["status"] in ("failed", "invalid_action", "passed")
        assert row["steps_used"] == len(row["steps"]) == len(row["actions"]) >= 1
        invalid = [s for s in row["steps"] if s["status"] == "invalid_action"]
        assert row["n_invalid"] == len(invalid) and all(s["error"] for s in invalid)
    assert summary["agents"][spec]["invalid_actions"] == sum(r["n_invalid"] for r in rows)


@pytest.mark.parametrize("backend", ["hf", "openai"])
def test_model_agents_complete_the_bundled_sessions(backend, runs):
    """Every row, every invalid action recorded."""
    spec, rows, summary = runs[backend]
    _check(rows, summary, spec)


def _decisions(row: dict) -> list:
    """What the agent decided at each step: the tool call, the parser's reason for an invalid
    output, and the final answer."""
    steps = [
        (o["tool_called"], o["tool_args"], (o.get("execution_result") or {}).get("error"))
        if o["tool_called"] == "invalid_action"
        else (o["tool_called"], o["tool_args"])
        for o in row["observations"]
    ]
    return [*steps, row.get("final_output")]


def _through_first_invalid(decisions: list) -> list:
    """The decisions up to and including the first invalid one. transformers serve 4.57 reuses
    its KV cache for a request that continues the last conversation, and the cache holds what
    the model generated: after an invalid output (replayed as the trained ``invalid_action``
    step, not as generated) the served model reads a context that is not the prompt."""
    for i, d in enumerate(decisions):
        if isinstance(d, tuple) and d[0] == "invalid_action":
            return decisions[: i + 1]
    return decisions


def test_a_served_etai_model_acts_as_it_does_through_hf(runs):
    """Through transformers serve the markers survive, so actions parse: the memorised model's
    decisions through `openai:` are those through `hf:` (each session's first step; the scripted
    sessions' steps through their first invalid one). Before the export kept the markers, every
    `openai:` reply came back as bare text (`git_status{}...`) and no step was a tool call."""
    hf = {r["session_id"]: r for r in runs["hf"][1]}
    served = {r["session_id"]: r for r in runs["openai"][1]}
    valid = [
        sum(o["tool_called"] != "invalid_action" for o in r["observations"])
        for r in served.values()
    ]
    assert sum(valid) >= len(served), "the served model's first steps did not parse as actions"
    for sid, row in served.items():
        assert _decisions(row)[:1] == _decisions(hf[sid])[:1], sid
    for sid in tiny_model.scripted_ids():
        want = _through_first_invalid(_decisions(hf[sid]))
        assert _decisions(served[sid])[: len(want)] == want, sid
