"""Model backends with a real (tiny) model: ``hf:PATH`` loading a save_pretrained folder, and
``openai:`` against a real loopback server backed by the same folder, through the sandbox and the
runner. The model is built here (tiny_model.py; nothing downloaded): its first action is a valid
git_status, after which it babbles, so every rollout has parsed actions and invalid ones.
"""

from __future__ import annotations

import shutil
import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the helper modules beside this file

import tiny_model
from openai_server import ModelServer, serve

from harness.agents import AgentContext, TaskView, from_spec
from harness.agents._model_chat import text_messages, tool_messages
from harness.agents.etai_format import Action, InvalidAction, render_prompt
from harness.suites.load import load_suite

pytestmark = pytest.mark.train
SUITE = load_suite("jest-bugfix")
GEN = {"max_new_tokens": 24}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return tiny_model.build(tmp_path_factory.getbasetemp() / "etai-tiny-model")


@pytest.fixture(scope="module")
def hf(model_dir):
    agent = from_spec(f"hf:{model_dir}", AgentContext(SUITE, {**GEN, "batch_wait_ms": 300}))
    yield agent
    agent.close()


def _task(i: int) -> TaskView:
    return TaskView.of(SUITE.sessions[i], max_steps=3, k=3)


# ------------------------------------------------------------------------------ hf: without Docker
def test_hf_loads_the_folder_and_fingerprints_it(hf, model_dir, tmp_path):
    assert hf.spec == f"hf:{model_dir}" and len(hf.fingerprint) == 16
    assert hf.gen.max_result_chars == tiny_model.MAX_RESULT_CHARS  # from etai.json
    assert hf.marker_ids is not None  # the ETAI markers are single tokens: generation stops on them
    copy = shutil.copytree(model_dir, tmp_path / "copy")
    assert from_spec(f"hf:{copy}", AgentContext(SUITE)).fingerprint == hf.fingerprint
    weights = copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    assert from_spec(f"hf:{copy}", AgentContext(SUITE)).fingerprint != hf.fingerprint


def test_hf_batches_concurrent_episodes_exactly_like_single_ones(hf):
    out: dict[int, object] = {}
    episodes = {i: hf.start(_task(i), 0) for i in range(4)}
    threads = [
        threading.Thread(target=lambda i=i: out.__setitem__(i, episodes[i].act([])))
        for i in range(4)
    ]
    before = len(hf.batch_sizes)
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert max(hf.batch_sizes[before:]) > 1  # they met in one padded generate
    assert all(out[i] == Action("git_status", {}) for i in range(4))
    alone = hf.start(_task(3), 0)
    alone.act([])
    assert alone.outputs == episodes[3].outputs  # left padding changes nothing (greedy)
    # After a result the model was never trained: whatever it says is parsed, never raised.
    later = alone.act(
        [
            {
                "step": 1,
                "tool_called": "git_status",
                "tool_args": {},
                "execution_result": {"status": "ok", "porcelain": ""},
            }
        ]
    )
    assert isinstance(later, (Action, InvalidAction)) or later.text is not None


def test_hf_sampling_and_overlong_prompts(model_dir):
    agent = from_spec(
        f"hf:{model_dir}", AgentContext(SUITE, {**GEN, "temperature": 1.0, "top_p": 0.9})
    )
    try:
        agent.max_context = 96  # far below the prompt: head and tail are kept, nothing raises
        obs = [
            {
                "step": i,
                "tool_called": "file_read",
                "tool_args": {"file": "src/x.js"},
                "execution_result": {"content": "x" * 250},
            }
            for i in range(1, 6)
        ]
        assert len(agent._prompt_ids(render_prompt(SUITE.sessions[0].raw, obs))) == 96 - 24
        decision = agent.start(_task(0), 0).act(obs)
        assert type(decision).__name__ in ("Action", "FinalAnswer", "InvalidAction")
    finally:
        agent.close()


def test_chat_template_renders_exactly_the_etai_prompt(hf):
    session = SUITE.sessions[0].raw
    obs = [dict(s) for s in session["execution_trace"][:2]]
    obs.append(
        {
            "step": 3,
            "tool_called": "invalid_action",
            "tool_args": {},
            "execution_result": {"status": "invalid_action", "error": "unknown tool 'x'"},
        }
    )
    expected = render_prompt(session, obs, 300)
    tok = hf.tokenizer
    chat = tok.apply_chat_template(tool_messages(session, obs, [], 300), tokenize=False)
    text = tok.apply_chat_template(text_messages(session, obs, _task(0).tools, 300), tokenize=False)
    assert chat.replace("(invalid action)", "") == expected.replace(
        "<STEP><TOOL>invalid_action<ARGS>{}<RESULT>", ""
    )
    assert text == expected


# ------------------------------------------------------------------------------ through the sandbox
def _check_rows(rows: list[dict]) -> None:
    """Every row complete; each invalid step recorded as a step, an action and an observation."""
    for row in rows:
        assert row["status"] in ("failed", "invalid_action", "passed"), row.get("reason")
        assert (
            row["steps_used"] == len(row["steps"]) == len(row["actions"]) and row["steps_used"] >= 1
        )
        invalid = [s for s in row["steps"] if s["status"] == "invalid_action"]
        assert row["n_invalid"] == len(invalid) == sum("invalid" in a for a in row["actions"])
        assert all(s["error"] for s in invalid)
        assert (
            row["actions"][0] == {"tool": "git_status", "args": {}}
            and row["steps"][0]["status"] == "ok"
        )
        assert "verification" in row and row["duration_s"] > 0


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("backend", ["hf", "openai-tools", "openai-text"])
def test_backend_episodes_through_the_sandbox(backend, hf, model_dir, image):
    from harness import sandbox
    from harness.runs.loop import run_episode

    def start(session):
        return sandbox.start("docker", session.workspace, image=image)

    sessions = SUITE.sessions[:2]
    if backend == "hf":
        rows = [run_episode(s, hf, 0, start_sandbox=start, k=3, max_steps=3) for s in sessions]
    else:
        server = ModelServer(model_dir, tool_calling=backend == "openai-tools")
        with serve(server) as url:
            agent = from_spec(f"openai:{url}#tiny", AgentContext(SUITE, {**GEN, "timeout_s": 30}))
            rows = [
                run_episode(s, agent, 0, start_sandbox=start, k=3, max_steps=3) for s in sessions
            ]
        assert ("tools" in server.requests[0]) and agent.mode == (
            "tools" if backend == "openai-tools" else "text"
        )
    _check_rows(rows)
    assert sum(r["n_invalid"] for r in rows) >= 1


@pytest.mark.docker
@pytest.mark.slow
def test_runner_end_to_end_resumes_after_the_server_was_down(model_dir, tmp_path, image, free_port):
    """harness.run (what `etai run` calls) with both backends. While the server is down its rows are
    infra_error and the run is incomplete; the rerun fills exactly those, the hf rows come from cache."""
    import harness
    from harness.runs.results import read_rows

    port = free_port()  # nobody listens there until the server starts there
    specs = [f"hf:{model_dir}", f"openai:http://127.0.0.1:{port}/v1#tiny"]
    kw = {
        "k": 2,
        "max_steps": 3,
        "workers": 2,
        "out": tmp_path / "run",
        "progress": False,
        "session_ids": [s.session_id for s in SUITE.sessions[:2]],
        "options": {**GEN, "timeout_s": 10, "max_retries": 1, "backoff_s": 0.1},
    }
    down = harness.run(SUITE, specs, **kw)
    assert not down["complete"]
    rows = read_rows(tmp_path / "run" / "results.jsonl")
    by_agent = {a: sorted(r["status"] for r in rows if r["agent"] == a) for a in specs}
    assert by_agent[specs[1]] == ["infra_error"] * 2
    assert all("unreachable" in r["reason"] for r in rows if r["agent"] == specs[1])
    _check_rows([r for r in rows if r["agent"] == specs[0]])

    with serve(ModelServer(model_dir), port=port):
        up = harness.run(SUITE, specs, **kw)
    assert up["complete"]
    rows = read_rows(tmp_path / "run" / "results.jsonl")
    assert (
        len(rows) == 4
    )  # one terminal row per (agent, session): the infra_error rows were replaced
    _check_rows(rows)
