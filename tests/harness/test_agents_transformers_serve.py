"""The openai: agent against a real `transformers serve` (the `serve` extra) on loopback, end to end.

`transformers serve --force_model FOLDER` serves the tiny model built here. It strips special
tokens from what it returns, so the ETAI markers never reach the agent and every model step is an
invalid action; the test asserts the protocol (rows complete, each invalid action recorded and
counted), not the model. The richer behaviours (tool calls parsed, 500 then 200, hangs) are tested
against tests/harness/openai_server.py.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the helper modules beside this file

import tiny_model

pytestmark = [pytest.mark.train, pytest.mark.docker, pytest.mark.slow]
SESSIONS = ["duration-seconds-padding", "semver-unescaped-dot"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    model = tiny_model.build(tmp_path_factory.getbasetemp() / "etai-tiny-model")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cli = Path(sys.executable).parent / "transformers"
    proc = subprocess.Popen([str(cli), "serve", "--force_model", str(model), "--host", "127.0.0.1",
                             "--port", str(port), "--device", "cpu"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"}, start_new_session=True)
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
        yield url, model
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()


def test_openai_agent_against_transformers_serve(server, tmp_path, image):
    import harness
    from harness.results import read_rows

    url, model = server
    spec = f"openai:{url}#{model}"  # its /v1/models lists hub names, so the model is named
    summary = harness.run("jest-bugfix", [spec], k=3, max_steps=3, out=tmp_path / "run", progress=False,
                          session_ids=SESSIONS, options={"max_new_tokens": 16, "timeout_s": 60})
    assert summary["complete"]
    rows = read_rows(tmp_path / "run" / "results.jsonl")
    assert sorted(r["session_id"] for r in rows) == sorted(SESSIONS)
    for row in rows:
        assert row["status"] in ("failed", "invalid_action", "passed")
        assert row["steps_used"] == len(row["steps"]) == len(row["actions"]) >= 1
        invalid = [s for s in row["steps"] if s["status"] == "invalid_action"]
        assert row["n_invalid"] == len(invalid) and all(s["error"] for s in invalid)
    assert summary["agents"][spec]["invalid_actions"] == sum(r["n_invalid"] for r in rows)
