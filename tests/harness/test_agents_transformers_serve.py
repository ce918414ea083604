"""Model agents on the whole bundled suite: `hf:PATH`, and `openai:` against a real `transformers serve`
(the `serve` extra) on loopback, through `etai run` and the Docker sandbox.

`transformers serve --force_model FOLDER` serves the tiny model built here. It strips special
tokens from what it returns, so the ETAI markers never reach the agent and every model step is an
invalid action; the test asserts the protocol (rows complete, each invalid action recorded and
counted), not the model. The richer behaviours (tool calls parsed, 500 then 200, hangs) are tested
against tests/harness/openai_server.py.
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

from harness.sessions import load_suite

pytestmark = [pytest.mark.train, pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def server(tmp_path_factory, free_port):
    model = tiny_model.build(tmp_path_factory.getbasetemp() / "etai-tiny-model")
    port = free_port()
    cli = Path(sys.executable).parent / "transformers"
    proc = subprocess.Popen(
        [
            str(cli),
            "serve",
            "--force_model",
            str(model),
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
        yield url, model
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()


def _check(rows: list[dict], summary: dict, spec: str) -> None:
    assert summary["complete"]
    assert sorted(r["session_id"] for r in rows) == sorted(
        s.session_id for s in load_suite("jest-bugfix").sessions
    )
    for row in rows:
        assert row["status"] in ("failed", "invalid_action", "passed")
        assert row["steps_used"] == len(row["steps"]) == len(row["actions"]) >= 1
        invalid = [s for s in row["steps"] if s["status"] == "invalid_action"]
        assert row["n_invalid"] == len(invalid) and all(s["error"] for s in invalid)
    assert summary["agents"][spec]["invalid_actions"] == sum(r["n_invalid"] for r in rows)


@pytest.mark.parametrize("backend", ["hf", "openai"])
def test_model_agents_complete_the_whole_bundled_suite(backend, server, tmp_path, image, capsys):
    """`etai run --suite jest-bugfix --agent hf:PATH` and `--agent openai:URL#MODEL`: every row, every
    invalid action recorded."""
    import json

    from harness.cli import main
    from harness.results import read_rows

    url, model = server
    spec = (
        f"hf:{model}" if backend == "hf" else f"openai:{url}#{model}"
    )  # serve lists hub names: name it
    assert (
        main(
            [
                "run",
                "--suite",
                "jest-bugfix",
                "--agent",
                spec,
                "-k",
                "2",
                "--max-steps",
                "2",
                "--max-new-tokens",
                "16",
                "--out",
                str(tmp_path / "run"),
                "--json",
                "--no-progress",
            ]
        )
        == 0
    )
    _check(read_rows(tmp_path / "run" / "results.jsonl"), json.loads(capsys.readouterr().out), spec)
