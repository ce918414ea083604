"""Small real OpenAI-compatible servers on 127.0.0.1 for the ``openai:`` backend's tests.

Why not ``transformers serve``: it needs the ``transformers[serving]`` extra (fastapi, uvicorn,
pydantic, openai), which the project's venv does not install. ``ModelServer`` is the closest thing
we can run offline: a stdlib ``http.server`` with ``GET /v1/models`` and ``POST /v1/chat/completions``
backed by the same tiny model folder that ``hf:`` loads, rendered through the folder's chat
template. Like vLLM with a tool-call parser, it turns ETAI action text into ``tool_calls`` when the
request sends ``tools``; with ``tool_calling=False`` it answers such a request with vLLM's 400.

``ScriptedServer`` answers from a list of (status, body, delay_s) for the failure cases
(500 then 200, a hang past the client's timeout).

    python tests/harness/openai_server.py MODEL_DIR --port 8011 [--no-tools]   # for `etai run`
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

VLLM_NO_TOOLS = (
    '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # keep test output clean
        pass

    def _send(self, status: int, body: Any) -> None:
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _body(self) -> Any:
        return json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")

    def do_GET(self) -> None:
        self.server.app.get(self)  # type: ignore[attr-defined]

    def do_POST(self) -> None:
        self.server.app.post(self, self._body())  # type: ignore[attr-defined]


@contextmanager
def serve(app: Any, port: int = 0) -> Iterator[str]:
    """Run ``app`` on loopback (a free port by default); yields the base URL (``http://127.0.0.1:PORT/v1``)."""
    server = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
    server.daemon_threads = True
    server.app = app  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


class ScriptedServer:
    """Answers POSTs with ``script`` in order (the last entry repeats); records every request body."""

    def __init__(self, script: list[tuple[int, Any, float]]):
        self.script, self.requests, self.headers = script, [], []

    def get(self, h: _Handler) -> None:
        h._send(200, {"object": "list", "data": [{"id": "scripted"}]})

    def post(self, h: _Handler, body: Any) -> None:
        self.requests.append(body)
        self.headers.append(dict(h.headers))
        status, answer, delay = self.script[min(len(self.requests), len(self.script)) - 1]
        time.sleep(delay)
        try:
            h._send(status, answer)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up first, as it should
            pass


def chat_answer(content: str | None, tool_calls: list[dict] | None = None) -> dict[str, Any]:
    message = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": "scripted",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if tool_calls else "stop",
            }
        ],
    }


class ModelServer:
    """Chat completions from a model folder (tokenizer chat template + generate); requests serialised."""

    def __init__(self, folder: Path, *, name: str = "tiny", tool_calling: bool = True):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.name, self.tool_calling = name, tool_calling
        self.tok = AutoTokenizer.from_pretrained(str(folder))
        self.model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
        self.lock = threading.Lock()
        self.requests: list[dict] = []

    def get(self, h: _Handler) -> None:
        h._send(200, {"object": "list", "data": [{"id": self.name, "object": "model"}]})

    def post(self, h: _Handler, body: dict) -> None:
        from harness.agents.etai_format import STOP_MARKERS, Action, parse_action

        self.requests.append(body)
        if body.get("model") != self.name:
            return h._send(404, {"error": {"message": f"model {body.get('model')!r} not found"}})
        if body.get("tools") and not self.tool_calling:
            return h._send(400, {"error": {"message": VLLM_NO_TOOLS}})
        text = self.generate(body["messages"], int(body.get("max_tokens") or 64), STOP_MARKERS)
        if body.get("tools"):  # what a tool-call parser does: ETAI action text -> tool_calls
            action = parse_action(text)
            if isinstance(action, Action):
                call = {
                    "id": f"call_{len(self.requests)}",
                    "type": "function",
                    "function": {"name": action.tool, "arguments": json.dumps(action.args)},
                }
                return h._send(200, chat_answer(None, [call]))
        for stop in body.get("stop") or ():  # OpenAI semantics: the stop string is not returned
            text = text.split(stop, 1)[0]
        h._send(200, chat_answer(text))

    def generate(self, messages: list[dict], max_tokens: int, stops: tuple[str, ...]) -> str:
        import torch

        prompt = self.tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        # Only the ids: the tokenizer also returns token_type_ids, which GPT-2 would embed as extra
        # input it was never trained with.
        ids = self.tok(prompt, return_tensors="pt")["input_ids"]
        stop_ids = [self.tok.convert_tokens_to_ids(s) for s in stops]
        with self.lock, torch.inference_mode():
            out = self.model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=max_tokens,
                do_sample=False,
                eos_token_id=stop_ids,
                pad_token_id=self.tok.pad_token_id,
            )
        return self.tok.decode(out[0, ids.shape[1] :], skip_special_tokens=False)


if __name__ == "__main__":
    import argparse

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("--port", type=int, default=8011)
    p.add_argument("--name", default="tiny")
    p.add_argument("--no-tools", action="store_true")
    a = p.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", a.port), _Handler)
    server.app = ModelServer(Path(a.model), name=a.name, tool_calling=not a.no_tools)  # type: ignore[attr-defined]
    print(f"serving {a.model} as {a.name!r} on http://127.0.0.1:{a.port}/v1", flush=True)
    server.serve_forever()
