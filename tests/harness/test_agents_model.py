"""Model backends without a model: specs, options, the micro-batcher, and the openai: client against
small real HTTP servers on 127.0.0.1 (down, 500 then 200, hanging, no tool calling, bad replies,
Retry-After, backoff, the statuses retried and not, the environment's settings).

No assertion here reads a clock: the waits between attempts are recorded instead of slept (the
``sleeps`` fixture), attempts are counted at the server or at request_json, and the batcher's
batches follow from events the test orders.

The parser's fuzz test (200+ malformed outputs, zero exceptions) lives in test_etai_format.py.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the helper modules beside this file

from openai_server import VLLM_NO_TOOLS, ScriptedServer, chat_answer, serve

from harness import tools
from harness.agents import AgentContext, TaskView, from_spec, known
from harness.agents import openai as openai_agent
from harness.agents._model_batcher import BatcherClosed, MicroBatcher
from harness.agents._model_common import Generation
from harness.agents._model_http import RetryPolicy, request_json
from harness.agents.etai_format import Action, FinalAnswer, InvalidAction
from harness.base.errors import InfraError, InputError, ServerUnreachable
from harness.suites.load import load_suite

SUITE = load_suite("jest-bugfix")
FAST = {"timeout_s": 1.0, "max_retries": 2, "backoff_s": 0.05}


def _task(i: int = 0) -> TaskView:
    return TaskView.of(SUITE.sessions[i], max_steps=5, k=3)


def _agent(url: str, **options):
    return from_spec(f"openai:{url}#scripted", AgentContext(SUITE, {**FAST, **options}))


def _call(name: str, args: str, call_id: str = "c1") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


# ------------------------------------------------------------------------------ registry and specs
def test_backends_register_and_import_cheaply():
    code = (
        "import sys; from harness.agents import known; names = known(); "
        "print(sorted(names), sorted({'torch', 'transformers', 'requests'} & set(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "['hf', 'noop', 'openai', 'oracle', 'replay'] []"
    assert "hf:PATH" in known()["hf"] and "BASE_URL" in known()["openai"]


@pytest.mark.parametrize(
    "spec", ["hf", "hf:/no/such/folder", "openai", "openai:ftp://x", "openai:localhost:8000"]
)
def test_bad_specs_are_input_errors(spec, tmp_path):
    with pytest.raises(InputError):
        from_spec(spec, AgentContext(SUITE))


def test_hf_folder_without_config_is_input_error(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(InputError, match="no config.json"):
        from_spec(f"hf:{tmp_path}", AgentContext(SUITE))


def test_generation_options():
    assert Generation.from_options({}) == Generation()
    g = Generation.from_options(
        {"temperature": "0.7", "top_p": 0.9, "max_new_tokens": 16, "other": 1}
    )
    assert (g.temperature, g.top_p, g.max_new_tokens, g.greedy) == (0.7, 0.9, 16, False)
    assert Generation.from_options({"temperature": None}, max_new_tokens=8).max_new_tokens == 8
    for bad in ({"temperature": -1}, {"top_p": 0}, {"max_new_tokens": 0}, {"temperature": "hot"}):
        with pytest.raises(InputError):
            Generation.from_options(bad)
    # one parser for every agent setting: a fraction is no whole number, here as for openai's
    with pytest.raises(InputError, match="max_new_tokens must be a positive integer") as e:
        Generation.from_options({"max_new_tokens": 1.5})
    assert e.value.where == "--max-new-tokens"
    assert Generation.from_options({"max_new_tokens": "16"}).max_new_tokens == 16


def test_openai_spec_and_fingerprint():
    a = from_spec("openai:http://127.0.0.1:9/v1/#m1", AgentContext(SUITE))
    b = from_spec("openai:http://127.0.0.1:9/v1#m2", AgentContext(SUITE))
    assert a.spec == "openai:http://127.0.0.1:9/v1/#m1" and a.base_url == "http://127.0.0.1:9/v1"
    assert a.fingerprint != b.fingerprint and len(a.fingerprint) == 16


# ------------------------------------------------------------------------------ micro-batcher
def _queued(b: MicroBatcher, n: int) -> None:
    """Wait until ``n`` requests wait in the batcher's queue (an event, polled; no time is asserted)."""
    for _ in range(2000):
        if b._queue.qsize() >= n:
            return
        time.sleep(0.005)
    raise AssertionError(f"{n} requests never reached the queue ({b._queue.qsize()} did)")


def test_micro_batcher_batches_concurrent_calls_and_propagates_errors():
    """Requests that wait while a batch runs go into the next batch together. The first batch holds
    the worker (it blocks on ``gate``) until the test has seen the other three queued, so the batch
    sizes follow from the order of events, not from threads arriving within ``wait_s``."""
    gate, started = threading.Event(), threading.Event()
    calls = []

    def run(items):
        calls.append(list(items))
        started.set()
        assert gate.wait(30), "the test never released the gate"
        if "boom" in items:
            raise RuntimeError("boom")
        return [x.upper() for x in items]

    b = MicroBatcher(run, max_batch=4, wait_s=0.0)  # collects only what is already queued
    out: dict[str, object] = {}

    def call(x):
        try:
            out[x] = b.submit(x)
        except RuntimeError as e:
            out[x] = e

    first = threading.Thread(target=call, args=("a",))
    first.start()
    assert started.wait(30)  # the worker runs ["a"] and holds there
    threads = [threading.Thread(target=call, args=(x,)) for x in "bcd"]
    [t.start() for t in threads]
    _queued(b, 3)
    gate.set()
    [t.join() for t in [first, *threads]]
    assert out == {"a": "A", "b": "B", "c": "C", "d": "D"} and b.batch_sizes == [1, 3]
    assert sorted(calls[1]) == ["b", "c", "d"]
    assert isinstance(_submit_in_thread(b, "boom"), RuntimeError)  # the error, not a hang
    b.close()
    with pytest.raises(BatcherClosed):
        b.submit("late")


def test_micro_batcher_caps_a_batch_at_max_batch():
    gate, started = threading.Event(), threading.Event()

    def run(items):
        started.set()
        gate.wait(30)
        return list(items)

    b = MicroBatcher(run, max_batch=2, wait_s=0.0)
    results = []
    threads = [threading.Thread(target=lambda x=x: results.append(b.submit(x))) for x in range(6)]
    threads[0].start()
    assert started.wait(30)
    [t.start() for t in threads[1:]]
    _queued(b, 5)
    gate.set()
    [t.join() for t in threads]
    assert sorted(results) == list(range(6)) and b.batch_sizes == [1, 2, 2, 1]
    b.close()


def _submit_in_thread(b, x):
    try:
        return b.submit(x)
    except RuntimeError as e:
        return e


# ------------------------------------------------------------------------------ openai: failures
@pytest.fixture
def refused_url() -> Iterator[str]:
    """A loopback URL that refuses connections: a port the OS gave us, held (bound, never
    listening) for the whole test, so no other process can take it and answer."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{s.getsockname()[1]}/v1"


@pytest.fixture
def sleeps(monkeypatch) -> list[float]:
    """The waits the openai agent asks for between attempts, recorded instead of slept."""
    asked: list[float] = []

    def recorded(*args, **kwargs):
        return request_json(*args, **kwargs, sleep=asked.append)

    monkeypatch.setattr(openai_agent, "request_json", recorded)
    return asked


def test_server_down_is_infra_error_naming_the_url(refused_url, sleeps):
    ep = _agent(refused_url).start(_task(), 0)
    with pytest.raises(
        InfraError, match=r"unreachable .*gave up after 3 attempt\(s\).*retried on the next run"
    ):
        ep.act([])
    assert len(sleeps) == 2  # 1 + max_retries attempts, a wait between each two


def test_unreachable_server_is_tried_once_per_run(refused_url, monkeypatch):
    """A circuit breaker: once a server failed every retry unreachable, the agent's later calls fail
    at once: no further request is attempted (counted at request_json)."""
    from harness.agents import check_available

    attempts = []
    real = openai_agent.request_json
    monkeypatch.setattr(
        openai_agent,
        "request_json",
        lambda *a, **kw: attempts.append(a[1]) or real(*a, **kw, sleep=lambda s: None),
    )
    agent = _agent(refused_url)
    check_available(agent)  # nothing known yet
    with pytest.raises(ServerUnreachable, match="gave up after 3 attempt"):
        agent.start(_task(0), 0).act([])
    assert attempts == [f"{refused_url}/chat/completions"]
    for i in (1, 2):
        with pytest.raises(
            ServerUnreachable, match=f"{refused_url} was found unreachable earlier in this run"
        ):
            agent.start(_task(i), 0).act([])
    with pytest.raises(ServerUnreachable):
        check_available(agent)
    assert len(attempts) == 1  # the breaker is open: not one more request
    # a server answering with errors is not unreachable: the breaker stays closed
    server = ScriptedServer([(500, {"error": {"message": "CUDA out of memory"}}, 0)])
    with serve(server) as url2:
        other = _agent(url2, max_retries=0)
        for _ in range(2):
            with pytest.raises(InfraError, match="HTTP 500"):
                other.start(_task(), 0).act([])
        check_available(other)
    assert len(server.requests) == 2


def test_500_then_200_is_retried_and_succeeds():
    server = ScriptedServer(
        [
            (500, {"error": {"message": "overloaded"}}, 0),
            (503, "Service Unavailable", 0),
            (200, chat_answer(None, [_call("git_diff", "{}")]), 0),
        ]
    )
    with serve(server) as url:
        assert _agent(url).start(_task(), 0).act([]) == Action("git_diff", {})
    assert len(server.requests) == 3


def test_server_failing_past_the_retries_is_infra_error():
    server = ScriptedServer([(500, {"error": {"message": "CUDA out of memory"}}, 0)])
    with serve(server) as url, pytest.raises(InfraError, match="HTTP 500: CUDA out of memory"):
        _agent(url, max_retries=1).start(_task(), 0).act([])
    assert len(server.requests) == 2


def test_hanging_server_times_out_as_infra_error(sleeps):
    """The server would answer after 3 s; the client gives up on each attempt after 0.3 s. That it
    gave up (rather than waited) is the error itself: a waited-for answer would have been a reply."""
    server = ScriptedServer([(200, chat_answer("late"), 3.0)])
    with (
        serve(server) as url,
        pytest.raises(
            InfraError, match=r"no answer within 0.3s \(timeout\).*gave up after 2 attempt"
        ),
    ):
        _agent(url, timeout_s=0.3, max_retries=1).start(_task(), 0).act([])
    assert len(server.requests) == 2 and len(sleeps) == 1


def test_429_is_retried_the_key_is_sent_and_401_names_it(monkeypatch):
    server = ScriptedServer(
        [(429, {"error": {"message": "slow down"}}, 0), (200, chat_answer("done"), 0)]
    )
    monkeypatch.setenv("ETAI_OPENAI_API_KEY", "sk-test")
    with serve(server) as url:
        assert _agent(url).start(_task(), 0).act([]) == FinalAnswer("done")
    assert server.headers[0]["Authorization"] == "Bearer sk-test"
    with (
        serve(ScriptedServer([(401, {"error": {"message": "bad key"}}, 0)])) as url,
        pytest.raises(InfraError, match="ETAI_OPENAI_API_KEY"),
    ):
        _agent(url).start(_task(), 0).act([])


class HeaderServer(ScriptedServer):
    """ScriptedServer whose entries may carry response headers: (status, body, headers)."""

    def post(self, h, body):
        self.requests.append(body)
        self.headers.append(dict(h.headers))
        status, answer, headers = self.script[min(len(self.requests), len(self.script)) - 1]
        raw = json.dumps(answer).encode()
        h.send_response(status)
        for k, v in {
            "Content-Type": "application/json",
            "Content-Length": str(len(raw)),
            **headers,
        }.items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(raw)


BUSY = {"error": {"message": "busy"}}


def _within_jitter(asked: float, base: float) -> bool:
    """A wait is its base plus up to 10% jitter (_model_http adds it so clients do not retry in step)."""
    return base <= asked <= base * 1.1 + 1e-9


@pytest.mark.parametrize(
    "retry_after,base",
    [("2", 2.0), ("0.5", 0.5), ("3600", 30.0), ("-5", 0.0)],
    ids=["seconds", "fraction", "capped-at-max-backoff", "negative-is-now"],
)
def test_retry_after_is_honoured(sleeps, retry_after, base):
    server = HeaderServer(
        [(429, BUSY, {"Retry-After": retry_after}), (200, chat_answer("done"), {})]
    )
    with serve(server) as url:
        assert _agent(url, backoff_s=7).start(_task(), 0).act([]) == FinalAnswer("done")
    assert len(server.requests) == 2 and len(sleeps) == 1
    assert _within_jitter(sleeps[0], base), sleeps


def test_retry_after_as_a_date_falls_back_to_our_backoff(sleeps):
    server = HeaderServer(
        [
            (503, BUSY, {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}),
            (200, chat_answer("done"), {}),
        ]
    )
    with serve(server) as url:
        assert _agent(url, backoff_s=7).start(_task(), 0).act([]) == FinalAnswer("done")
    assert len(sleeps) == 1 and _within_jitter(sleeps[0], 7.0), sleeps


def test_backoff_doubles_between_attempts_up_to_the_cap(sleeps):
    server = HeaderServer([(500, BUSY, {})] * 6 + [(200, chat_answer("done"), {})])
    with serve(server) as url:
        assert _agent(url, backoff_s=5, max_retries=6).start(_task(), 0).act([]) == FinalAnswer(
            "done"
        )
    assert len(server.requests) == 7
    bases = [
        5.0,
        10.0,
        20.0,
        30.0,
        30.0,
        30.0,
    ]  # 5 * 2**attempt, capped at RetryPolicy.max_backoff_s
    assert len(sleeps) == 6 and all(_within_jitter(a, b) for a, b in zip(sleeps, bases)), sleeps


@pytest.mark.parametrize("retry_after", ["nan", "inf", "-inf"])
def test_retry_after_that_is_not_a_finite_number_falls_back_to_our_backoff(sleeps, retry_after):
    """float() reads these; a NaN wait made time.sleep raise ValueError (the call ended as an agent
    error, the retry lost), an infinite one was only saved by the cap."""
    server = HeaderServer(
        [(429, BUSY, {"Retry-After": retry_after}), (200, chat_answer("done"), {})]
    )
    with serve(server) as url:
        assert _agent(url, backoff_s=7).start(_task(), 0).act([]) == FinalAnswer("done")
    assert len(sleeps) == 1 and _within_jitter(sleeps[0], 7.0), sleeps


def test_the_last_attempt_is_not_followed_by_a_wait(sleeps):
    server = HeaderServer([(502, BUSY, {"Retry-After": "1"})])
    with (
        serve(server) as url,
        pytest.raises(InfraError, match="HTTP 502: busy .*gave up after 3 attempt"),
    ):
        _agent(url, max_retries=2).start(_task(), 0).act([])
    assert len(server.requests) == 3 and len(sleeps) == 2


def test_408_is_retried_other_4xx_are_not(sleeps):
    server = HeaderServer(
        [(408, {"error": {"message": "request timeout"}}, {}), (200, chat_answer("done"), {})]
    )
    with serve(server) as url:
        assert _agent(url).start(_task(), 0).act([]) == FinalAnswer("done")
    assert len(server.requests) == 2 and len(sleeps) == 1
    for status in (400, 404, 409, 413):
        server = HeaderServer(
            [(status, {"error": {"message": "no"}}, {}), (200, chat_answer("done"), {})]
        )
        with serve(server) as url, pytest.raises(InfraError, match=f"HTTP {status}: no"):
            _agent(url, protocol="tools").start(_task(), 0).act([])
        assert len(server.requests) == 1, status
    assert len(sleeps) == 1  # none more


def test_501_is_not_retried_and_a_server_without_tools_falls_back_to_text(sleeps):
    """501 Not Implemented is permanent (RFC 9110 §15.6.2): it was retried like an overload, so a
    server answering it to ``tools`` never reached the text-protocol fallback that names it."""
    server = HeaderServer(
        [
            (501, {"error": {"message": "tool calling is not implemented"}}, {}),
            (200, chat_answer("<STEP><TOOL>git_diff<ARGS>{}"), {}),
        ]
    )
    with serve(server) as url:
        agent = _agent(url)
        assert agent.start(_task(), 0).act([]) == Action("git_diff", {}) and agent.mode == "text"
    assert (
        len(server.requests) == 2
        and "tools" in server.requests[0]
        and "tools" not in server.requests[1]
    )
    assert sleeps == []
    server = HeaderServer([(501, {"error": {"message": "not implemented"}}, {})])
    with serve(server) as url, pytest.raises(InfraError, match="HTTP 501: not implemented"):
        _agent(url, protocol="text").start(_task(), 0).act([])
    assert len(server.requests) == 1 and sleeps == []


def _env_agent(url: str, **options):
    """An agent with no retry options: its policy comes from the environment (or the defaults)."""
    return from_spec(f"openai:{url}#scripted", AgentContext(SUITE, options))


@pytest.fixture
def clean_env(monkeypatch):
    for name in (
        "ETAI_OPENAI_API_KEY",
        "OPENAI_API_KEY",
        "ETAI_OPENAI_TIMEOUT",
        "ETAI_OPENAI_MAX_RETRIES",
        "ETAI_OPENAI_PROTOCOL",
    ):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_env_settings_defaults(clean_env):
    agent = _env_agent("http://127.0.0.1:9/v1")
    assert agent.policy == RetryPolicy(
        timeout_s=120.0, max_retries=3, backoff_s=1.0, max_backoff_s=30.0
    )
    assert (agent.protocol, agent.mode, agent._headers) == ("auto", "tools", {})


def test_env_max_retries_sets_the_attempts_and_options_override_it(clean_env, sleeps):
    clean_env.setenv("ETAI_OPENAI_MAX_RETRIES", "4")
    server = HeaderServer([(500, BUSY, {})])
    with serve(server) as url:
        with pytest.raises(InfraError, match="gave up after 5 attempt"):
            _env_agent(url).start(_task(), 0).act([])
        assert len(server.requests) == 5
        with pytest.raises(InfraError, match="gave up after 1 attempt"):
            _env_agent(url, max_retries=0).start(_task(), 0).act([])
    assert len(server.requests) == 6 and len(sleeps) == 4
    clean_env.setenv("ETAI_OPENAI_MAX_RETRIES", "0")
    assert _env_agent("http://127.0.0.1:9/v1").policy.max_retries == 0


def test_env_timeout_bounds_each_attempt_and_options_override_it(clean_env, sleeps):
    clean_env.setenv("ETAI_OPENAI_TIMEOUT", "0.3")
    clean_env.setenv("ETAI_OPENAI_MAX_RETRIES", "0")
    assert _env_agent("http://127.0.0.1:9/v1").policy.timeout_s == 0.3
    assert _env_agent("http://127.0.0.1:9/v1", timeout_s=7).policy.timeout_s == 7.0
    with (
        serve(ScriptedServer([(200, chat_answer("late"), 3.0)])) as url,
        pytest.raises(InfraError, match=r"no answer within 0.3s \(timeout\)"),
    ):
        _env_agent(url).start(_task(), 0).act([])


def test_env_protocol_text_sends_no_tools_and_options_override_it(clean_env):
    clean_env.setenv("ETAI_OPENAI_PROTOCOL", "text")
    server = ScriptedServer([(200, chat_answer("<STEP><TOOL>git_diff<ARGS>{}"), 0)])
    with serve(server) as url:
        agent = _env_agent(url, max_retries=0)
        assert agent.mode == "text" and agent.start(_task(), 0).act([]) == Action("git_diff", {})
        assert _env_agent(url, protocol="tools").protocol == "tools"
    assert "tools" not in server.requests[0] and server.requests[0]["stop"] == [
        "<RESULT>",
        "<TRACE_END>",
    ]
    clean_env.setenv("ETAI_OPENAI_PROTOCOL", "tools")
    assert _env_agent("http://127.0.0.1:9/v1").mode == "tools"


def test_api_key_from_the_env_etai_first(clean_env):
    server = ScriptedServer([(200, chat_answer("done"), 0)])
    with serve(server) as url:
        _env_agent(url).start(_task(), 0).act([])
        clean_env.setenv("OPENAI_API_KEY", "sk-openai")
        _env_agent(url).start(_task(), 0).act([])
        clean_env.setenv("ETAI_OPENAI_API_KEY", "sk-etai")
        _env_agent(url).start(_task(), 0).act([])
    assert [h.get("Authorization") for h in server.headers] == [
        None,
        "Bearer sk-openai",
        "Bearer sk-etai",
    ]


@pytest.mark.parametrize(
    "name,value,where",
    [
        ("ETAI_OPENAI_TIMEOUT", "fast", "ETAI_OPENAI_TIMEOUT"),
        ("ETAI_OPENAI_TIMEOUT", "0", "ETAI_OPENAI_TIMEOUT"),
        ("ETAI_OPENAI_TIMEOUT", "inf", "ETAI_OPENAI_TIMEOUT"),
        ("ETAI_OPENAI_TIMEOUT", "nan", "ETAI_OPENAI_TIMEOUT"),
        ("ETAI_OPENAI_MAX_RETRIES", "many", "ETAI_OPENAI_MAX_RETRIES"),
        ("ETAI_OPENAI_MAX_RETRIES", "-1", "ETAI_OPENAI_MAX_RETRIES"),
        ("ETAI_OPENAI_PROTOCOL", "grpc", "ETAI_OPENAI_PROTOCOL"),
    ],
)
def test_bad_env_settings_are_input_errors_naming_the_variable(clean_env, name, value, where):
    """A bad setting is the user's input error (exit 2 naming it), not a traceback from float()."""
    clean_env.setenv(name, value)
    with pytest.raises(InputError, match=f"^{where}: "):
        _env_agent("http://127.0.0.1:9/v1")


@pytest.mark.parametrize(
    "options",
    [
        {"timeout_s": "soon"},
        {"timeout_s": -1},
        {"max_retries": 1.5},
        {"max_retries": -2},
        {"backoff_s": "x"},
        {"backoff_s": -0.5},
        {"backoff_s": float("nan")},
        {"timeout_s": float("inf")},
        {"protocol": "grpc"},
    ],
)
def test_bad_retry_options_are_input_errors(clean_env, options):
    with pytest.raises(InputError, match=f"{next(iter(options))}"):
        _env_agent("http://127.0.0.1:9/v1", **options)


@pytest.mark.parametrize(
    "answer", [{"choices": []}, "not json at all", {"object": "chat.completion"}]
)
def test_malformed_server_answers_are_infra_errors(answer):
    with serve(ScriptedServer([(200, answer, 0)])) as url, pytest.raises(InfraError):
        _agent(url, max_retries=0).start(_task(), 0).act([])


def test_prompt_too_long_is_an_invalid_action_not_an_infra_error():
    msg = "This model's maximum context length is 2048 tokens. However, you requested 4000 tokens"
    with serve(ScriptedServer([(400, {"error": {"message": msg}}, 0)])) as url:
        got = _agent(url).start(_task(), 0).act([])
    assert isinstance(got, InvalidAction) and "maximum context length" in got.reason


# ------------------------------------------------------------------------------ openai: protocol
def test_tools_protocol_sends_schemas_and_replays_the_conversation():
    server = ScriptedServer(
        [
            (200, chat_answer(None, [_call("file_read", '{"file": "src/a.js"}', "abc")]), 0),
            (200, chat_answer(None, [_call("rm_rf", "{}")]), 0),
            (200, chat_answer(None, [_call("file_read", '{"file": ')]), 0),
            (200, chat_answer("Fixed the null check."), 0),
        ]
    )
    obs = []
    with serve(server) as url:
        ep = _agent(url, temperature=0.5, max_new_tokens=32).start(_task(), 1)
        got = [ep.act(obs)]
        obs.append(
            {
                "step": 1,
                "tool_called": "file_read",
                "tool_args": {"file": "src/a.js"},
                "execution_result": {"content": "x", "status": "ok"},
            }
        )
        for _ in range(3):
            got.append(ep.act(obs))
            reason = getattr(got[-1], "reason", "")
            obs.append(
                {
                    "step": len(obs) + 1,
                    "tool_called": "invalid_action",
                    "tool_args": {},
                    "execution_result": {"status": "invalid_action", "error": reason},
                }
            )
    assert got[0] == Action("file_read", {"file": "src/a.js"})
    assert isinstance(got[1], InvalidAction) and "unknown tool 'rm_rf'" in got[1].reason
    assert isinstance(got[2], InvalidAction) and "malformed JSON arguments" in got[2].reason
    assert got[3] == FinalAnswer("Fixed the null check.")
    first, last = server.requests[0], server.requests[-1]
    assert first["tools"] == tools.schemas() and first["tool_choice"] == "auto"
    assert (first["model"], first["max_tokens"], first["temperature"]) == ("scripted", 32, 0.5)
    assert "seed" in first  # sampled: seeded per (session, sample, step)
    roles = [m["role"] for m in last["messages"]]
    assert roles == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    assert last["messages"][3] == {
        "role": "tool",
        "tool_call_id": "abc",
        "content": '{"content": "x", "status": "ok"}',
    }
    assert (
        last["messages"][6]["tool_calls"][0]["function"]["arguments"] == "{}"
    )  # bad JSON not replayed
    assert "malformed JSON" in last["messages"][7]["content"]


def test_server_without_tool_calling_falls_back_to_the_text_protocol():
    server = ScriptedServer(
        [
            (400, {"error": {"message": VLLM_NO_TOOLS}}, 0),
            (200, chat_answer("<STEP><TOOL>git_diff<ARGS>{}"), 0),
            (200, chat_answer("I think the bug is in line 3"), 0),
        ]
    )
    with serve(server) as url:
        agent = _agent(url)
        ep = agent.start(_task(), 0)
        assert ep.act([]) == Action("git_diff", {}) and agent.mode == "text"
        got = ep.act(
            [
                {
                    "step": 1,
                    "tool_called": "git_diff",
                    "tool_args": {},
                    "execution_result": {"diff": ""},
                }
            ]
        )
    assert isinstance(got, InvalidAction) and "must start with <STEP> or <OUTPUT>" in got.reason
    text_req = server.requests[1]
    assert "tools" not in text_req and text_req["stop"] == ["<RESULT>", "<TRACE_END>"]
    assert text_req["messages"][1]["content"].startswith("<INST>")
    assert server.requests[2]["messages"][1]["content"].endswith(
        '<STEP><TOOL>git_diff<ARGS>{}<RESULT>{"diff": ""}\n'
    )


def test_forced_tools_protocol_does_not_fall_back():
    with (
        serve(ScriptedServer([(400, {"error": {"message": VLLM_NO_TOOLS}}, 0)])) as url,
        pytest.raises(InfraError, match="HTTP 400"),
    ):
        _agent(url, protocol="tools").start(_task(), 0).act([])


# transformers serve 4.57's answer to a field it does not know (FastAPI's {"detail": ...} body)
SERVE_UNEXPECTED = {
    "detail": "Unexpected keys in the request: {'skip_special_tokens', "
    "'spaces_between_special_tokens'}"
}


def test_requests_ask_to_keep_special_tokens_and_stop_when_refused():
    """vLLM keeps an ETAI model's markers only when asked; a server that refuses the fields gets
    the request again without them, once per run."""
    action = chat_answer("<STEP><TOOL>git_status<ARGS>{}<RESULT>")
    server = ScriptedServer([(422, SERVE_UNEXPECTED, 0), (200, action, 0)])
    observation = {
        "step": 1,
        "tool_called": "git_status",
        "tool_args": {},
        "execution_result": {"output": "", "status": "ok"},
    }
    with serve(server) as url:
        agent = _agent(url)
        ep = agent.start(_task(), 0)
        assert ep.act([]) == Action("git_status", {})
        assert ep.act([observation]) == Action("git_status", {})
    first, retried, later = server.requests
    assert first["skip_special_tokens"] is False
    assert first["spaces_between_special_tokens"] is False
    for body in (retried, later):
        assert "skip_special_tokens" not in body and "spaces_between_special_tokens" not in body
    assert retried["messages"] == first["messages"] and "tools" in retried  # still tools
    accepted = ScriptedServer([(200, action, 0)])
    with serve(accepted) as url:
        agent = _agent(url)
        agent.start(_task(), 0).act([])
        agent.start(_task(1), 0).act([])
    assert all(b["skip_special_tokens"] is False for b in accepted.requests)  # vLLM: kept asking


def test_a_refusal_that_names_no_decoding_field_is_not_retried():
    server = ScriptedServer([(422, {"detail": "Unexpected keys in the request: {'foo'}"}, 0)])
    with serve(server) as url, pytest.raises(InfraError, match="HTTP 422"):
        _agent(url).start(_task(), 0).act([])
    assert len(server.requests) == 1


def test_etai_text_in_a_tools_reply_is_replayed_as_the_trained_text():
    """A served ETAI model without a tool-call parser answers in ETAI text, past its end marker
    when the server does not stop there: the next prompt must hold what render_prompt writes."""
    from harness.agents.etai_format import DEFAULT_MAX_RESULT_CHARS, render_prompt

    bad = '<STEP><TOOL>file_read<ARGS>{"file": <RESULT>{"content": "made up"}\n<STEP>'
    server = ScriptedServer(
        [(200, chat_answer(bad), 0), (200, chat_answer("<OUTPUT>done<TRACE_END>"), 0)]
    )
    with serve(server) as url:
        ep = _agent(url).start(_task(), 0)
        first = ep.act([])
        assert isinstance(first, InvalidAction) and "malformed JSON" in first.reason
        observation = {
            "step": 1,
            "tool_called": "invalid_action",
            "tool_args": {},
            "execution_result": {"status": "invalid_action", "error": first.reason},
        }
        assert ep.act([observation]) == FinalAnswer("done")
    record = _task().record()
    rendered = server.requests[1]["messages"]
    assert rendered[2] == {
        "role": "assistant",
        "content": "<STEP><TOOL>invalid_action<ARGS>{}<RESULT>",
    }
    # the ETAI chat template concatenates user, assistant and user texts: render_prompt's bytes
    text = "".join(m["content"] for m in rendered[1:])
    assert text == render_prompt(record, [observation], DEFAULT_MAX_RESULT_CHARS)


def test_model_is_resolved_from_the_server_when_not_named():
    server = ScriptedServer([(200, chat_answer("<OUTPUT>nothing to do<TRACE_END>"), 0)])
    with serve(server) as url:
        agent = from_spec(f"openai:{url}", AgentContext(SUITE, FAST))
        assert agent.start(_task(), 0).act([]) == FinalAnswer("nothing to do")
    assert server.requests[0]["model"] == "scripted"


def test_concurrent_episodes_do_not_share_state():
    server = ScriptedServer([(200, chat_answer(None, [_call("git_status", "{}")]), 0.05)])
    with serve(server) as url:
        agent = _agent(url)
        results = []
        threads = [
            threading.Thread(target=lambda i=i: results.append(agent.start(_task(i), 0).act([])))
            for i in range(6)
        ]
        [t.start() for t in threads]
        [t.join() for t in threads]
    assert results == [Action("git_status", {})] * 6
    assert (
        sorted(json.loads(json.dumps(r["messages"][1]["content"]))[:6] for r in server.requests)
        == ["<INST>"] * 6
    )


def test_streamed_answers_are_folded_into_one():
    """Servers that stream regardless of ``stream: false`` (transformers serve 4.57) still work."""

    class Streaming(ScriptedServer):
        def post(self, h, body):
            self.requests.append(body)
            chunks = [
                {"choices": [{"delta": {"role": "assistant"}, "index": 0}]},
                {
                    "choices": [
                        {
                            "delta": {
                                "tool_calls": [
                                    {
                                        "index": 0,
                                        "id": "c9",
                                        "function": {"name": "file_read", "arguments": '{"fi'},
                                    }
                                ]
                            }
                        }
                    ]
                },
                {
                    "choices": [
                        {
                            "delta": {
                                "tool_calls": [
                                    {"index": 0, "function": {"arguments": 'le": "a.js"}'}}
                                ]
                            }
                        }
                    ]
                },
                {"choices": [{"delta": {}, "index": 0, "finish_reason": "tool_calls"}]},
            ]
            raw = (
                "".join(f"data: {json.dumps(c)}\n\n" for c in chunks).encode() + b"data: [DONE]\n\n"
            )
            h.send_response(200)
            h.send_header("Content-Type", "text/event-stream")
            h.send_header("Content-Length", str(len(raw)))
            h.end_headers()
            h.wfile.write(raw)

    server = Streaming([])
    with serve(server) as url:
        assert _agent(url).start(_task(), 0).act([]) == Action("file_read", {"file": "a.js"})
    assert server.requests[0]["stream"] is False
