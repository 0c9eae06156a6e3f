"""A local stand-in of the Anthropic Messages API that plays a fixed script to the real Claude Code.

Claude Code talks to `ANTHROPIC_BASE_URL` with `ANTHROPIC_API_KEY` (in `-p` mode it asks no approval for
the key). The stub answers the agent's main loop with the next step of a script written by the test — a
batch of `tool_use` calls, or a final text that ends the turn — and records everything the agent sends, so a
test can check what the tools really returned inside (or outside) the sandbox.

What Claude Code 2.1.197 sends, logged against this stub (`claude -p … --allowedTools …`, with the quiet
variables of tests/agents/conftest.py): a `HEAD /` connectivity probe, then `POST /v1/messages?beta=true`
with `"stream": true`, the full tool list and the conversation so far — one request per turn of the loop.
It also sends side requests that are not turns of the loop. With non-essential traffic on, one came
before the first turn: session title generation, a `/v1/messages` with no `tools` whose only user message
quotes the prompt (`<session>\ndo the task\n</session>\n\nWrite the title…`) — so "the prompt is in the
last user message" alone would mistake it for step 0. Others may come in other versions or modes:
`POST /v1/messages/count_tokens`, summaries, forked helpers (session memory, compaction) that reuse the
main conversation and tools but append a prompt of their own. None may consume or skip a step, so:

- Why steps are found from the conversation, not from a counter of requests: the tool_use ids the stub
  hands out name their step (`toolu_stub_s<step>_<n>`), so the step a request asks for is one past the
  newest step whose ids appear in its messages. A retried request (Claude Code retries on a dropped
  connection) gets the same step again instead of the next one.
- Why a request counts as a step only when its last message answers the previous step: a turn of the loop
  offers tools and its last user message is either the test's prompt (step 0) or carries a `tool_result`
  for every id of the step before. A side request either offers no tools (title, summary) or ends with a
  prompt of its own (a fork), so it matches neither and gets a short text answer without touching the
  script. `count_tokens` gets a count; `HEAD`/`GET` anything gets an empty 200 or a 404 JSON error.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SIDE_ANSWER = "stub side answer"


@dataclass
class ToolCall:
    name: str
    input: dict[str, Any]


# A step is a batch of tool calls the agent runs before its next request, or the final text.
Step = list[ToolCall] | str


@dataclass
class Recorded:
    method: str
    path: str
    raw: str  # the body as received, for "this secret never left the agent" checks
    body: Any  # parsed JSON when it is JSON
    kind: str  # "step <n>", "side", "count_tokens", "other"


def tool_id(step: int, n: int) -> str:
    return f"toolu_stub_s{step}_{n}"


def _step_of(tool_use_id: str) -> int | None:
    if not tool_use_id.startswith("toolu_stub_s"):
        return None
    head = tool_use_id.removeprefix("toolu_stub_s").split("_", 1)[0]
    return int(head) if head.isdigit() else None


def _blocks(message: dict) -> list[dict]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def result_text(block: dict) -> str:
    """The text of a tool_result block (a string, or a list of text/image blocks)."""
    content = block.get("content")
    if isinstance(content, str):
        return content
    parts = []
    for part in content or []:
        if isinstance(part, dict):
            parts.append(part.get("text", "") if part.get("type") == "text" else json.dumps(part))
    return "\n".join(parts)


class AnthropicStub:
    """Serve `script` to the Claude Code whose prompt is `prompt`; see the module docstring."""

    def __init__(self, prompt: str, script: list[Step], model: str = "claude-stub") -> None:
        self.prompt = prompt
        self.script = script
        self.model = model
        self.requests: list[Recorded] = []
        self.tool_calls: dict[str, ToolCall] = {}  # every tool_use id handed out
        self.tool_results: dict[str, str] = {}  # tool_use id -> the text Claude Code sent back
        self.tool_errors: dict[str, bool] = {}  # tool_use id -> is_error
        self.steps_served: list[int] = []
        self.problems: list[str] = []  # requests the stub could not place: tests should assert it stays empty
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, name="anthropic-stub", daemon=True)

    # -- lifecycle

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> AnthropicStub:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> AnthropicStub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what the test asks

    def results_of(self, name: str) -> list[str]:
        """The tool results of every call to the tool `name`, in the order of the script."""
        return [
            self.tool_results[i] for i, call in self.tool_calls.items() if call.name == name and i in self.tool_results
        ]

    def result(self, step: int, n: int = 0) -> str:
        return self.tool_results.get(tool_id(step, n), f"<no tool_result for {tool_id(step, n)}>")

    def all_traffic(self) -> str:
        """Every request body received, as sent."""
        return "\n".join(r.raw for r in self.requests)

    def report(self) -> str:
        """A readable account of the exchange, for assertion messages."""
        lines = [f"steps served: {self.steps_served}; problems: {self.problems}"]
        for i, call in self.tool_calls.items():
            err = " (is_error)" if self.tool_errors.get(i) else ""
            lines.append(
                f"--- {i} {call.name} {json.dumps(call.input)}{err}\n{self.tool_results.get(i, '<no result>')}"
            )
        return "\n".join(lines)

    # -- deciding

    def _classify(self, body: dict) -> tuple[str, int | None]:
        """("step", n) for a turn of the main loop, ("side", None) for anything else."""
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        if not body.get("tools") or not messages:
            return "side", None
        newest = -1
        for m in messages:
            if m.get("role") == "assistant":
                for b in _blocks(m):
                    if b.get("type") == "tool_use" and (s := _step_of(str(b.get("id")))) is not None:
                        newest = max(newest, s)
        last_user = next((m for m in reversed(messages) if m.get("role") == "user"), None)
        if last_user is None or messages[-1].get("role") == "assistant":
            return "side", None
        blocks = _blocks(last_user)
        if newest < 0:
            texts = "\n".join(b.get("text", "") for b in blocks if b.get("type") == "text")
            return ("step", 0) if self.prompt in texts else ("side", None)
        answered = {b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"}
        wanted = {tool_id(newest, n) for n in range(len(self.script[newest]))} if newest < len(self.script) else set()
        if wanted and wanted <= answered:
            return "step", newest + 1
        return "side", None

    def _record_results(self, body: dict) -> None:
        for m in body.get("messages") or []:
            if isinstance(m, dict) and m.get("role") == "user":
                for b in _blocks(m):
                    if b.get("type") == "tool_result" and b.get("tool_use_id"):
                        self.tool_results[b["tool_use_id"]] = result_text(b)
                        self.tool_errors[b["tool_use_id"]] = bool(b.get("is_error"))

    def _answer(self, body: dict) -> tuple[str, list[dict], str]:
        """(kind, content blocks, stop_reason) for a POST /v1/messages."""
        kind, step = self._classify(body)
        with self._lock:
            self._record_results(body)
            if kind == "side":
                return "side", [{"type": "text", "text": SIDE_ANSWER}], "end_turn"
            assert step is not None
            self.steps_served.append(step)
            if step >= len(self.script):
                self.problems.append(f"step {step} asked for, the script has {len(self.script)}")
                return f"step {step}", [{"type": "text", "text": "The script is over."}], "end_turn"
            planned = self.script[step]
            if isinstance(planned, str):
                return f"step {step}", [{"type": "text", "text": planned}], "end_turn"
            blocks = []
            for n, call in enumerate(planned):
                self.tool_calls[tool_id(step, n)] = call
                blocks.append({"type": "tool_use", "id": tool_id(step, n), "name": call.name, "input": call.input})
            return f"step {step}", blocks, "tool_use"

    # -- HTTP

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet: pytest shows the report instead
                pass

            def _read(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    data = b""
                    while size := int(self.rfile.readline().strip().split(b";")[0] or b"0", 16):
                        data += self.rfile.read(size)
                        self.rfile.readline()
                    self.rfile.readline()
                    return data
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _send(self, status: int, payload: bytes, ctype: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(payload)))
                self.send_header("request-id", "req_stub")
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

            def _json(self, status: int, obj: Any) -> None:
                self._send(status, json.dumps(obj).encode())

            def do_HEAD(self) -> None:
                stub._keep(self.command, self.path, "", None, "other")
                self._send(200, b"")

            def do_GET(self) -> None:
                stub._keep(self.command, self.path, "", None, "other")
                self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": "stub"}})

            def do_POST(self) -> None:
                raw = self._read().decode("utf-8", "surrogateescape")
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                route = self.path.split("?", 1)[0].rstrip("/")
                if route == "/v1/messages/count_tokens":
                    stub._keep(self.command, self.path, raw, body, "count_tokens")
                    return self._json(200, {"input_tokens": max(1, len(raw) // 4)})
                if route != "/v1/messages" or not isinstance(body, dict):
                    stub._keep(self.command, self.path, raw, body, "other")
                    return self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": "stub"}})
                kind, content, stop = stub._answer(body)
                stub._keep(self.command, self.path, raw, body, kind)
                message = {
                    "id": f"msg_stub_{len(stub.requests)}",
                    "type": "message",
                    "role": "assistant",
                    "model": body.get("model") or stub.model,
                    "content": content,
                    "stop_reason": stop,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": 10},
                }
                if body.get("stream"):
                    return self._send(200, _sse(message), "text/event-stream")
                return self._json(200, message)

        return Handler

    def _keep(self, method: str, path: str, raw: str, body: Any, kind: str) -> None:
        with self._lock:
            self.requests.append(Recorded(method, path, raw, body, kind))


def _sse(message: dict) -> bytes:
    """The message as the event stream of the Messages API: start, one start/delta/stop per block, end."""
    events: list[tuple[str, dict]] = []
    head = {**message, "content": [], "stop_reason": None, "usage": {"input_tokens": 10, "output_tokens": 1}}
    events.append(("message_start", {"type": "message_start", "message": head}))
    for i, block in enumerate(message["content"]):
        if block["type"] == "tool_use":
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        events.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": start}))
        events.append(("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    end = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    events.append(("message_delta", {"type": "message_delta", "delta": end, "usage": {"output_tokens": 10}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events).encode()
