"""JSON over HTTP with a deadline and bounded retries (stdlib only: urllib).

Retried: connection refused or reset, timeouts, HTTP 408, 429 and 5xx but 501, and a 2xx body that
is not JSON; the wait doubles from ``backoff_s`` (``Retry-After`` is honoured, capped at ``max_backoff_s``).
When the attempts run out the call raises InfraError naming the URL and the last problem
(ServerUnreachable when that was a failure to connect at all): the loop records an ``infra_error``
row and the next run retries the session. Other 4xx answers and 501 Not Implemented are not
retried (the same request would fail the same way): they raise HttpStatus for the caller to judge
(a 501 that mentions tools switches the openai agent to the text protocol).
"""

from __future__ import annotations

import json
import math
import random
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from http.client import HTTPException
from typing import Any

from harness.base.errors import InfraError, ServerUnreachable

_MAX_BODY = 64 << 20  # a chat completion is kilobytes; a runaway proxy must not fill memory


@dataclass(frozen=True)
class RetryPolicy:
    timeout_s: float = 120.0  # per attempt; a hung server is abandoned after about this long
    max_retries: int = 3  # attempts = 1 + max_retries
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0


class HttpStatus(Exception):
    """A non-retryable HTTP error answer (a 4xx other than 408/429, or 501)."""

    def __init__(self, status: int, message: str):
        self.status, self.message = status, message
        super().__init__(f"HTTP {status}: {message}")


class _Retryable(Exception):
    def __init__(
        self, problem: str, retry_after: float | None = None, *, unreachable: bool = False
    ):
        self.retry_after, self.unreachable = retry_after, unreachable
        super().__init__(problem)


def request_json(
    method: str,
    url: str,
    body: Any | None,
    *,
    headers: dict[str, str],
    policy: RetryPolicy,
    sleep: Callable[[float], None] = time.sleep,
) -> Any:
    data = None if body is None else json.dumps(body).encode()
    attempts = 1 + max(policy.max_retries, 0)
    t0 = time.monotonic()
    for attempt in range(attempts):
        try:
            return _once(method, url, data, headers, policy.timeout_s)
        except _Retryable as e:
            if attempt + 1 == attempts:
                raise (ServerUnreachable if e.unreachable else InfraError)(
                    f"{url}: {e} (gave up after {attempts} attempt(s) in "
                    f"{time.monotonic() - t0:.1f}s; the session is retried on the next run)"
                ) from None
            wait = e.retry_after if e.retry_after is not None else policy.backoff_s * 2**attempt
            sleep(
                min(wait, policy.max_backoff_s) * (1 + 0.1 * random.random())
            )  # jitter: no lockstep herd
    raise AssertionError("unreachable")


def _once(
    method: str, url: str, data: bytes | None, headers: dict[str, str], timeout_s: float
) -> Any:
    req = urllib.request.Request(
        url,
        data=data,
        method=method,
        headers={"Content-Type": "application/json", "Accept": "application/json", **headers},
    )
    deadline = time.monotonic() + timeout_s
    try:
        # ``timeout`` bounds the connect and each read; the deadline bounds a server that trickles.
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            raw = _read(resp, deadline)
    except urllib.error.HTTPError as e:
        message = _error_message(e)
        if e.code in (408, 429) or (
            e.code >= 500 and e.code != 501
        ):  # 501 Not Implemented is permanent
            raise _Retryable(
                f"HTTP {e.code}: {message}", _retry_after(e.headers.get("Retry-After"))
            ) from None
        raise HttpStatus(e.code, message) from None
    except urllib.error.URLError as e:
        reason = e.reason
        if isinstance(reason, (socket.timeout, TimeoutError)):
            raise _Retryable(f"no answer within {timeout_s:g}s (timeout)") from None
        raise _Retryable(f"unreachable ({reason})", unreachable=True) from None
    except TimeoutError:
        raise _Retryable(f"no answer within {timeout_s:g}s (timeout)") from None
    except (ConnectionError, HTTPException, OSError) as e:
        raise _Retryable(
            f"connection failed ({type(e).__name__}: {e})",
            unreachable=not isinstance(e, HTTPException),
        ) from None
    try:
        return _from_sse(raw) if raw.lstrip().startswith(b"data:") else json.loads(raw)
    except ValueError:
        raise _Retryable(f"answer is not JSON: {raw[:200]!r}") from None


def _from_sse(raw: bytes) -> dict[str, Any]:
    """A streamed chat completion (server-sent events) folded into one response object.

    Some servers stream whatever the request says (``transformers serve`` 4.57 does).
    """
    content, calls, finish = [], {}, None
    for line in raw.decode("utf-8", "replace").splitlines():
        if not line.startswith("data:") or line[5:].strip() == "[DONE]":
            continue
        for choice in json.loads(line[5:]).get("choices") or ():
            delta = choice.get("delta") or {}
            finish = choice.get("finish_reason") or finish
            if isinstance(delta.get("content"), str):
                content.append(delta["content"])
            for c in delta.get("tool_calls") or ():  # arguments arrive in pieces, keyed by index
                call = calls.setdefault(
                    c.get("index", 0),
                    {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
                )
                call["id"] = c.get("id") or call["id"]
                fn = c.get("function") or {}
                call["function"]["name"] += fn.get("name") or ""
                call["function"]["arguments"] += fn.get("arguments") or ""
    message: dict[str, Any] = {"role": "assistant", "content": "".join(content)}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return {"choices": [{"index": 0, "message": message, "finish_reason": finish}]}


def _read(resp: Any, deadline: float) -> bytes:
    chunks, size = [], 0
    while True:
        if time.monotonic() > deadline:
            raise TimeoutError
        chunk = resp.read1(65536)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > _MAX_BODY:
            raise _Retryable(f"answer larger than {_MAX_BODY} bytes")
        chunks.append(chunk)


def _error_message(e: urllib.error.HTTPError) -> str:
    try:
        raw = e.read(65536).decode("utf-8", "replace")
    except (OSError, HTTPException):
        return e.reason if isinstance(e.reason, str) else ""
    try:  # OpenAI's shape: {"error": {"message": ...}}; vLLM and TGI use it or a plain "message"
        body = json.loads(raw)
        err = body.get("error", body) if isinstance(body, dict) else body
        msg = err.get("message") if isinstance(err, dict) else err
        return str(msg if msg is not None else raw)[:500]
    except ValueError:
        return raw[:500]


def _retry_after(value: str | None) -> float | None:
    try:
        seconds = float(value) if value is not None else None
    except ValueError:  # the HTTP-date form: use our own backoff
        return None
    # float() also reads "nan" and "inf": no wait to sleep (time.sleep(nan) raises); our own backoff
    return max(seconds, 0.0) if seconds is not None and math.isfinite(seconds) else None
