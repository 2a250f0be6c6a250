"""A loopback OpenAI-compatible chat server for the tests: the model path through litellm's real
provider code, HTTP client and SSE parsing, against scripted replies.

`LLMServer` serves ``POST /v1/chat/completions`` (and ``/chat/completions``) on 127.0.0.1, on a
port the OS picks, from a thread of the test process. Each request takes the next reply of its
script (the queue for its model, else the shared queue; an exhausted script answers 500) and is
recorded (path, headers, JSON body) so a test can assert what litellm sent and wait for a request
instead of sleeping. The replies:

- ``Text(content)``: a whole ``chat.completion`` with ``usage``;
- ``Stream(deltas)``: ``text/event-stream``, one ``chat.completion.chunk`` per delta, a last chunk
  with ``finish_reason``, a usage-only chunk, then ``data: [DONE]``;
- ``Status(code, retry_after)``: an OpenAI error body with that status (429 with ``Retry-After``);
- ``Slow(seconds, then)``: waits before answering ``then``, so the client's timeout fires first;
  the wait ends at once when the server stops;
- ``Cut(deltas)``: a stream that sends its deltas, then closes the connection without the
  terminating chunk or ``[DONE]``, as a dropped connection does;
- ``Drip(deltas, every)``: a stream that waits `every` seconds before each delta, as a slow model
  does; when the client closes the connection first, the deltas sent until then are noted in
  ``abandoned`` (a test waits for that instead of sleeping).

Streams use chunked transfer encoding, so a cut is a broken body to the client, not a short one.
Every response closes its connection: no handler thread outlives its request.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Sequence, Union

PATHS = ("/v1/chat/completions", "/chat/completions")


@dataclass(frozen=True)
class Text:
    content: str


@dataclass(frozen=True)
class Stream:
    deltas: Sequence[str]
    finish_reason: str = "stop"


@dataclass(frozen=True)
class Status:
    code: int
    retry_after: str | None = None
    message: str = "scripted failure"


@dataclass(frozen=True)
class Slow:
    seconds: float
    then: "Reply" = Text("This answer came too late.")


@dataclass(frozen=True)
class Cut:
    deltas: Sequence[str]


@dataclass(frozen=True)
class Drip:
    deltas: Sequence[str]
    every: float


Reply = Union[Text, Stream, Status, Slow, Cut, Drip]


@dataclass(frozen=True)
class Recorded:
    """One request as the server received it."""

    path: str
    headers: dict[str, str]  # names in lower case
    body: dict[str, Any]
    at: float = field(default_factory=time.monotonic)

    @property
    def model(self) -> str | None:
        return self.body.get("model")

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.get("messages", [])

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))


def _words(text: str) -> int:
    return len(text.split())


def _usage(messages: list[dict[str, Any]], content: str) -> dict[str, int]:
    prompt = sum(_words(str(m.get("content", ""))) for m in messages)
    completion = _words(content)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # chunked streams need it
    server: "_Server"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass  # quiet: pytest shows what a test asserts, not an access log

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self.close_connection = True
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"_unparsed": raw.decode("utf-8", "replace")}
        path = self.path.split("?", 1)[0]
        if path not in PATHS:
            self._json(404, {"error": {"message": f"no route {path}", "type": "invalid_request_error", "code": None}})
            return
        owner = self.server.owner
        reply = owner._next(body.get("model"))
        owner._record(Recorded(path, {k.lower(): v for k, v in self.headers.items()}, body))
        try:
            self._reply(reply, body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its timeout fired): nothing to tell it

    def _reply(self, reply: Reply, body: dict[str, Any]) -> None:
        if isinstance(reply, Slow):
            if self.server.owner.stopping.wait(reply.seconds):
                return  # stopping: close without an answer
            self._reply(reply.then, body)
        elif isinstance(reply, Text):
            self._json(200, self._completion(body, reply.content))
        elif isinstance(reply, Status):
            headers = {"Retry-After": reply.retry_after} if reply.retry_after is not None else {}
            kind = "rate_limit_error" if reply.code == 429 else "server_error"
            self._json(reply.code, {"error": {"message": reply.message, "type": kind, "code": None}}, headers)
        elif isinstance(reply, Stream):
            self._stream(body, reply.deltas, reply.finish_reason)
        elif isinstance(reply, Cut):
            self._stream(body, reply.deltas, None)
        elif isinstance(reply, Drip):
            sent: list[str] = []
            try:
                self._stream(body, reply.deltas, "stop", every=reply.every, sent=sent)
            except (BrokenPipeError, ConnectionResetError):
                self.server.owner._abandon(len(sent))
        else:  # pragma: no cover - a test wrote a wrong script
            raise TypeError(f"not a reply: {reply!r}")

    def _head(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"id": f"chatcmpl-test{self.server.owner.count()}", "created": int(time.time()),
                "model": body.get("model", "unknown"), "system_fingerprint": None}

    def _completion(self, body: dict[str, Any], content: str) -> dict[str, Any]:
        return self._head(body) | {
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": "stop", "logprobs": None}],
            "usage": _usage(body.get("messages", []), content),
        }

    def _json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _stream(self, body: dict[str, Any], deltas: Sequence[str], finish_reason: str | None,
                every: float = 0.0, sent: list[str] | None = None) -> None:
        """SSE in chunked encoding; `finish_reason` None: cut the connection after the deltas;
        `every`: seconds to wait before each delta (each one sent is added to `sent`)."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        head = self._head(body) | {"object": "chat.completion.chunk"}

        def chunk(delta: dict[str, Any], finish: str | None = None) -> None:
            choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
            self._event(json.dumps(head | {"choices": [choice]}))

        chunk({"role": "assistant", "content": ""})
        for text in deltas:
            if every and self.server.owner.stopping.wait(every):
                return
            chunk({"content": text})
            if sent is not None:
                sent.append(text)
        if finish_reason is None:
            return  # the cut: no last chunk, no [DONE], no terminating chunk; the connection closes
        chunk({}, finish_reason)
        usage = _usage(body.get("messages", []), "".join(deltas))
        self._event(json.dumps(head | {"choices": [], "usage": usage}))
        self._event("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _event(self, data: str) -> None:
        payload = f"data: {data}\n\n".encode()
        self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: "LLMServer"


class LLMServer:
    """The server, its script and what it received. Use as a context manager (or start/stop)."""

    def __init__(self) -> None:
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self.stopping = threading.Event()
        self._lock = threading.Condition()
        self._shared: deque[Reply] = deque()
        self._by_model: dict[str, deque[Reply]] = {}
        self._requests: list[Recorded] = []
        self.abandoned: list[int] = []  # per Drip stream the client closed: the deltas it had been sent
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="llm-server", daemon=True)

    def start(self) -> "LLMServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()  # ends every Slow wait at once
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(10)

    def __enter__(self) -> "LLMServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def script(self, *replies: Reply, model: str | None = None) -> None:
        """Queue replies, for requests naming `model` (as the server sees it: litellm sends
        ``openai/x`` as ``x``) or, without one, for any request."""
        with self._lock:
            queue = self._shared if model is None else self._by_model.setdefault(model, deque())
            queue.extend(replies)

    def reset(self) -> None:
        with self._lock:
            self._shared.clear()
            self._by_model.clear()
            self._requests.clear()
            self.abandoned.clear()

    @property
    def requests(self) -> list[Recorded]:
        with self._lock:
            return list(self._requests)

    def _abandon(self, sent: int) -> None:
        with self._lock:
            self.abandoned.append(sent)
            self._lock.notify_all()

    def wait_abandoned(self, n: int, timeout: float = 10.0) -> list[int]:
        """The deltas sent on each abandoned Drip, once `n` were abandoned (AssertionError after `timeout`)."""
        with self._lock:
            assert self._lock.wait_for(lambda: len(self.abandoned) >= n, timeout), \
                f"{len(self.abandoned)} of {n} streams were abandoned"
            return list(self.abandoned)

    def count(self) -> int:
        with self._lock:
            return len(self._requests)

    def wait_for(self, n: int, timeout: float = 10.0) -> list[Recorded]:
        """The requests once there are at least `n` of them (AssertionError after `timeout`)."""
        with self._lock:
            if not self._lock.wait_for(lambda: len(self._requests) >= n, timeout):
                raise AssertionError(f"the model server saw {len(self._requests)} requests, not {n}")
            return list(self._requests)

    def _next(self, model: str | None) -> Reply:
        with self._lock:
            for queue in (self._by_model.get(model or ""), self._shared):
                if queue:
                    return queue.popleft()
        return Status(500, message="the test script has no reply left")

    def _record(self, request: Recorded) -> None:
        with self._lock:
            self._requests.append(request)
            self._lock.notify_all()
