"""A real local HTTP server that plays an IM provider's webhook endpoint for outbox tests.

It runs ``http.server.ThreadingHTTPServer`` on 127.0.0.1 in a thread and can fail on
demand: ``script`` is a list of answers (status, headers) given in order, one per request,
after which it answers ``default``. ``hold()`` makes the next requests wait (the daemon
sees a delivery in flight) until ``release()``. Every request is recorded with its
Idempotency-Key and whether its signature verifies; ``accepted`` dedupes 2xx answers by
key, the way a careful receiver would.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from gochatd.signing import SIGNATURE_HEADER, verify


@dataclass(frozen=True)
class Answer:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


@dataclass(frozen=True)
class Received:
    at: float  # time.monotonic()
    key: str
    body: dict[str, Any]
    raw: bytes
    signature_ok: bool
    status: int  # what we answered
    signature: str = ""  # the X-Gochatd-Signature header as received


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A sender that was killed or cancelled mid-request leaves a broken pipe: expected.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class WebhookReceiver:
    def __init__(self, secret: bytes | None = None) -> None:
        self.secret = secret
        self.script: list[Answer] = []
        self.default = Answer(200, {"Content-Type": "application/json"}, b'{"message_id": "pm-1"}')
        self.received: list[Received] = []
        #: Requests that reached the handler, including ones still held.
        self.arrived = 0
        self.accepted: dict[str, dict[str, Any]] = {}
        #: Each request's ``traceparent`` header ("" without one), in arrival order.
        self.traceparents: list[str] = []
        self._lock = threading.Lock()
        self._hold = threading.Event()
        self._hold.set()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/hook"

    def start(self) -> WebhookReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length)
                with receiver._lock:
                    receiver.arrived += 1
                    receiver.traceparents.append(self.headers.get("traceparent", ""))
                receiver._hold.wait(60)
                answer = receiver._record(raw, self.headers.get("Idempotency-Key", ""),
                                          self.headers.get(SIGNATURE_HEADER, ""))
                self.send_response(answer.status)
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._hold.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def hold(self) -> None:
        self._hold.clear()

    def release(self) -> None:
        self._hold.set()

    def _record(self, raw: bytes, key: str, sig: str) -> Answer:
        with self._lock:
            answer = self.script.pop(0) if self.script else self.default
            ok = self.secret is not None and verify(self.secret, raw, sig)
            body = json.loads(raw)
            self.received.append(Received(time.monotonic(), key, body, raw, ok, answer.status, sig))
            if 200 <= answer.status < 300:
                self.accepted.setdefault(key, body)
            return answer

    def snapshot(self) -> list[Received]:
        with self._lock:
            return list(self.received)

    def keys(self) -> list[str]:
        return [r.key for r in self.snapshot()]
