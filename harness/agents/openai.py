"""``openai:BASE_URL[#MODEL]`` — an OpenAI-compatible chat-completions server (vLLM, TGI,
``transformers serve``, llama.cpp, hosted APIs).

The tool registry's JSON schemas are sent as function-calling ``tools``; each step replays the
conversation so far (see ``_model_chat``). A server without tool calling (it rejects ``tools`` with
a 4xx that mentions them) switches this agent to the ETAI text protocol for good: the prompt is the
ETAI text, generation stops at its markers, ``parse_action`` reads the reply.

Without ``#MODEL`` the first id of ``GET BASE_URL/models`` is used (``transformers serve`` lists hub
models there, not the one it serves: name it). A streamed answer (server-sent events) is folded
into one (``transformers serve`` 4.57 streams regardless).

Special tokens: servers decode with ``skip_special_tokens=True`` by default, which would delete an
ETAI model's markers. Every request asks to keep them (``skip_special_tokens: false``,
``spaces_between_special_tokens: false``: vLLM honours both); a server that refuses the fields
(``transformers serve`` 4.57 answers 422 to any field it does not know, and has no option for
this) gets the request again without them, and is not sent them again in this run. A folder
exported by ``finetune`` (``export_hf``) does not depend on them: its markers are added tokens
that are not special, which every server's decoding keeps. A reply in ETAI text to a tools
request (a served ETAI model without a tool-call parser) is parsed as ETAI text and replayed as
the trained text. ``transformers serve`` 4.57 hangs on ``stop`` (its ``generate`` is not given
the tokenizer stop strings need): the text protocol, which sends it, does not work there.

The fingerprint is the URL and the model name: a remote server's weights cannot be hashed, so
name a model for caching you trust.

Environment (options from the API override them: timeout_s, max_retries, backoff_s, protocol):
  ETAI_OPENAI_API_KEY, then OPENAI_API_KEY   bearer token, if set
  ETAI_OPENAI_TIMEOUT                        seconds per request attempt (default 120)
  ETAI_OPENAI_MAX_RETRIES                    retries on 408/429/5xx (not 501)/timeouts/refused (default 3)
  ETAI_OPENAI_PROTOCOL                       auto (default) | tools | text

An unreachable or failing server raises InfraError from ``act`` after the retries: the row is
``infra_error`` and the next run retries the session. A server found unreachable (no connection at
all through every retry) is not tried again in this run: the agent's later calls and
``check_available`` raise ServerUnreachable at once, so the rest of its rows take seconds, not
minutes of retries each (a circuit breaker; the next run tries again). Requests run concurrently from the runner's
worker threads; the server batches them (vLLM and TGI do so continuously).
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.agents import AgentContext, TaskView, register
from harness.agents._model_chat import (
    decide_tools,
    message_of,
    text_decision,
    text_messages,
    tool_messages,
)
from harness.agents._model_common import Generation, env_first, option, step_seed, tool_names_of
from harness.agents._model_http import HttpStatus, RetryPolicy, request_json
from harness.agents.etai_format import STOP_MARKERS, InvalidAction
from harness.base.errors import InfraError, InputError, ServerUnreachable

PROTOCOLS = ("auto", "tools", "text")
# Decoding options that keep special tokens in the returned text (vLLM's sampling parameters; an
# ETAI model whose markers are special tokens is unparseable without them). Servers that refuse
# unknown fields answer 4xx naming them (transformers serve 4.57: 422 "Unexpected keys in the
# request"; OpenAI: 400 "Unrecognized request argument"): the agent then stops sending them.
KEEP_SPECIAL_TOKENS = {"skip_special_tokens": False, "spaces_between_special_tokens": False}
_CONTEXT_WORDS = (
    "context length",
    "context window",
    "maximum context",
    "too long",
    "too many tokens",
)


class OpenAIAgent:
    def __init__(self, base_url: str, model: str | None, ctx: AgentContext):
        if not base_url.startswith(("http://", "https://")) or len(base_url) <= len("https://"):
            raise InputError(
                f"expected openai:http(s)://HOST[:PORT]/v1[#MODEL], got openai:{base_url}",
                where="--agent",
            )
        opts = dict(ctx.options)
        self.base_url = base_url.rstrip("/")
        self.spec = f"openai:{base_url}" + (f"#{model}" if model else "")
        self.fingerprint = hashlib.sha256(f"{self.base_url}#{model or ''}".encode()).hexdigest()[
            :16
        ]
        self.gen = Generation.from_options(opts)
        self.protocol = option(
            opts,
            "protocol",
            str,
            "auto",
            PROTOCOLS.__contains__,
            f"one of {', '.join(PROTOCOLS)}",
            env="ETAI_OPENAI_PROTOCOL",
            where="option protocol",
        )
        self.policy = RetryPolicy(
            timeout_s=option(
                opts,
                "timeout_s",
                float,
                RetryPolicy.timeout_s,
                lambda v: 0 < v < math.inf,
                "a positive number of seconds",
                env="ETAI_OPENAI_TIMEOUT",
                where="option timeout_s",
            ),
            max_retries=option(
                opts,
                "max_retries",
                int,
                RetryPolicy.max_retries,
                lambda v: v >= 0,
                "a non-negative integer",
                env="ETAI_OPENAI_MAX_RETRIES",
                where="option max_retries",
            ),
            backoff_s=option(
                opts,
                "backoff_s",
                float,
                RetryPolicy.backoff_s,
                lambda v: 0 <= v < math.inf,
                "a non-negative number of seconds",
                where="option backoff_s",
            ),
        )
        key = env_first("ETAI_OPENAI_API_KEY", "OPENAI_API_KEY")
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._model = model
        self._lock = threading.Lock()
        self._unreachable: ServerUnreachable | None = None  # the breaker: open once set
        self.keep_special = True  # send KEEP_SPECIAL_TOKENS until the server refuses them

    # --------------------------------------------------------------------------- Agent
    def start(self, task: TaskView, sample: int) -> ChatEpisode:
        return ChatEpisode(self, task, sample)

    def close(self) -> None:
        pass

    @property
    def mode(self) -> str:
        return "text" if self.protocol == "text" else "tools"

    # --------------------------------------------------------------------------- HTTP
    def model(self) -> str:
        with self._lock:
            if self._model is None:
                listing = self._call("GET", "/models", None)
                try:
                    self._model = str(listing["data"][0]["id"])
                except (KeyError, IndexError, TypeError):
                    raise InfraError(
                        f"{self.base_url}/models lists no model; name one: {self.spec}#MODEL"
                    ) from None
            return self._model

    def check_available(self) -> None:
        if self._unreachable is not None:
            raise ServerUnreachable(
                f"{self.base_url} was found unreachable earlier in this run "
                f"({self._unreachable}); not tried again until the next run"
            )

    def _call(self, method: str, path: str, body: Any) -> Any:
        self.check_available()
        try:
            return request_json(
                method, self.base_url + path, body, headers=self._headers, policy=self.policy
            )
        except ServerUnreachable as e:
            self._unreachable = self._unreachable or e
            raise
        except HttpStatus as e:
            if e.status in (401, 403):
                raise InfraError(
                    f"{self.base_url}{path}: {e} (set ETAI_OPENAI_API_KEY or OPENAI_API_KEY)"
                ) from None
            raise

    def chat(self, body: dict[str, Any]) -> Mapping[str, Any]:
        """POST /chat/completions; HttpStatus (4xx) is left to the caller, everything else is InfraError."""
        response = self._call("POST", "/chat/completions", body)
        try:
            return message_of(response)
        except ValueError as e:
            raise InfraError(f"{self.base_url}/chat/completions: {e}") from None

    def drop_keep_special(self, error: HttpStatus) -> bool:
        """Whether ``error`` refuses KEEP_SPECIAL_TOKENS; if so they are not sent again. True
        also when another episode dropped them first (its request was in flight with them)."""
        if error.status in (400, 422) and any(key in error.message for key in KEEP_SPECIAL_TOKENS):
            self.keep_special = False
            return True
        return False

    def drop_tools(self, error: HttpStatus) -> bool:
        """Switch to the text protocol if ``error`` says the server cannot call tools (auto mode only)."""
        if (
            self.protocol == "auto"
            and error.status in (400, 404, 422, 501)
            and "tool" in error.message.lower()
        ):
            self.protocol = "text"
            return True
        return False


@dataclass
class ChatEpisode:
    agent: OpenAIAgent
    task: TaskView
    sample: int
    sent: list[dict[str, Any]] = field(
        default_factory=list
    )  # assistant message per step (tools protocol)

    def __post_init__(self) -> None:
        self.tools = tool_names_of(self.task.tools)
        self.record = self.task.record()

    def act(self, observations: Sequence[Mapping[str, Any]]):
        step = len(observations) + 1
        del self.sent[len(observations) :]  # a step the loop never saw (an earlier act that raised)
        gen = self.agent.gen
        body: dict[str, Any] = {
            "model": self.agent.model(),
            "max_tokens": gen.max_new_tokens,
            "temperature": gen.temperature,
            "top_p": gen.top_p,
            "stream": False,
        }
        if not gen.greedy:
            body["seed"] = step_seed(self.task.session_id, self.sample, step)
        try:
            try:
                return self._step(body, observations, step)
            except HttpStatus as e:
                if not self.agent.drop_keep_special(e):
                    raise
            return self._step(body, observations, step)  # without the refused options
        except HttpStatus as e:
            if any(w in e.message.lower() for w in _CONTEXT_WORDS):
                # The prompt outgrew the model: the agent's problem, not the server's; retrying won't help.
                return InvalidAction(f"the server rejected the prompt: {e}", e.message[:200])
            raise InfraError(f"{self.agent.base_url}/chat/completions: {e}") from None

    def _step(self, body: dict[str, Any], observations: Sequence[Mapping[str, Any]], step: int):
        if self.agent.keep_special:
            body = {**body, **KEEP_SPECIAL_TOKENS}
        if self.agent.mode == "tools":
            try:
                return self._tools_step(body, observations, step)
            except HttpStatus as e:
                if not self.agent.drop_tools(e):
                    raise
        return self._text_step(body, observations)

    def _tools_step(
        self, body: dict[str, Any], observations: Sequence[Mapping[str, Any]], step: int
    ):
        body = dict(
            body,
            tools=self.task.tools,
            tool_choice="auto",
            messages=tool_messages(
                self.record, observations, self.sent, self.agent.gen.max_result_chars
            ),
        )
        decision, said = decide_tools(self.agent.chat(body), self.tools, step)
        self.sent.append(said)
        return decision

    def _text_step(self, body: dict[str, Any], observations: Sequence[Mapping[str, Any]]):
        body = dict(
            body,
            stop=list(STOP_MARKERS),
            messages=text_messages(
                self.record, observations, self.task.tools, self.agent.gen.max_result_chars
            ),
        )
        message = self.agent.chat(body)
        content = message.get("content")
        return text_decision(content if isinstance(content, str) else "", self.tools)[0]


def _factory(arg: str | None, ctx: AgentContext) -> OpenAIAgent:
    if not arg:
        raise InputError(
            "openai needs a server: openai:BASE_URL[#MODEL], e.g. openai:http://127.0.0.1:8000/v1#my-model",
            where="--agent",
        )
    base_url, sep, model = arg.partition("#")
    return OpenAIAgent(base_url, model if sep and model else None, ctx)


register(
    "openai", _factory, "an OpenAI-compatible chat-completions server (openai:BASE_URL[#MODEL])"
)
