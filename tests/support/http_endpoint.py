"""A real local HTTP server that answers from a script, for HTTP job handler tests.

It runs ``http.server.ThreadingHTTPServer`` on 127.0.0.1 in a thread. Each POST is recorded
(path, headers, body) and answered by the next scripted ``Answer`` (then ``default``), so a
test makes it fail on demand: any status, any headers, or ``hold`` (answer only once the test
calls ``release``, to provoke a client timeout).
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Answer:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    hold: bool = False

    @classmethod
    def json(cls, status: int, doc: Any, **headers: str) -> Answer:
        return cls(status, json.dumps(doc).encode(), {"Content-Type": "application/json", **headers})


@dataclass(frozen=True)
class Recorded:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class ScriptedEndpoint:
    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.default = Answer(200)
        self._script: deque[Answer] = deque()
        self._lock = threading.Lock()
        self._released = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._server.block_on_close = False  # idle keep-alive threads end with the process
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def script(self, *answers: Answer) -> None:
        with self._lock:
            self._script.extend(answers)

    def release(self) -> None:
        self._released.set()

    def paths(self) -> list[str]:
        with self._lock:
            return [r.path for r in self.requests]

    def _next(self, recorded: Recorded) -> Answer:
        with self._lock:
            self.requests.append(recorded)
            return self._script.popleft() if self._script else self.default

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server's naming
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                answer = endpoint._next(Recorded(self.path, dict(self.headers.items()), body))
                if answer.hold:
                    endpoint._released.wait(30)
                try:
                    self.send_response(answer.status)
                    for name, value in answer.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(answer.body)))
                    self.end_headers()
                    self.wfile.write(answer.body)
                except OSError:
                    pass  # the client gave up (a timeout test)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._released.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)


@contextmanager
def scripted_endpoint() -> Iterator[ScriptedEndpoint]:
    endpoint = ScriptedEndpoint()
    endpoint.start()
    try:
        yield endpoint
    finally:
        endpoint.stop()
