"""Issue 6's "done when", tried as a new user would from the docs (docs/gateway.md,
docs/http-handlers.md, docs/replies.md, docs/periodic.md): one real daemon on PostgreSQL +
Redis, configured with a YAML file in the docs' shapes.

- A tenant key made with ``gochatd gateway hash-key`` (only its hash in the config), and
  docs/gateway.md's ``curl`` line enqueues a job for that key's tenant.
- ``handlers.http`` maps ``demo:*`` to a tiny local web server (docs/http-handlers.md's ``hook.py``),
  which runs the job and answers with a reply.
- The reply goes through the outbox's ``webhook`` channel to a local receiver that fails its
  first two attempts: it sees the reply once (one Idempotency-Key accepted), signed.
- A periodic job (``every: 1s``) of a ``demo:`` type fires slot after slot, each slot once.
- SIGTERM stops the daemon with exit 0 and a clean log.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import shlex
import shutil
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.admin.helpers import daemon_admin_url
from tests.support.daemon_process import REPO_ROOT, DaemonFactory, poll_until, run_cli
from tests.support.e2e_jobs import query
from tests.support.webhook_receiver import Answer, WebhookReceiver

TENANT = "acme"
HOOK_SECRET = "walkthrough-hook-secret"  # GOCHAT_HOOK_SECRET, as in docs/http-handlers.md
WA_SECRET = "walkthrough-wa-secret"  # WA_HOOK_SECRET, as in docs/replies.md
TICK = "demo:tick"
RECIPIENT = "+15550100"


def readme_verify(secret: bytes, raw_body: bytes, header: str) -> bool:
    """The receiver-side check exactly as docs/replies.md prints it."""
    t, v1 = dict(p.split("=", 1) for p in header.split(",")).values()
    return abs(time.time() - int(t)) < 300 and hmac.compare_digest(
        hmac.new(secret, f"{t}.".encode() + raw_body, hashlib.sha256).hexdigest(), v1)


class Hook:
    """docs/http-handlers.md's ``hook.py``: a standard-library web server that runs ``demo:*`` jobs.
    A ``demo:hello`` job answers with one reply built from its payload; others with none.
    Every request is recorded with whether its signature verifies."""

    def __init__(self) -> None:
        self.jobs: list[dict[str, Any]] = []
        self.signed: list[bool] = []
        self._lock = threading.Lock()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server's naming
                raw = self.rfile.read(int(self.headers["Content-Length"]))
                job = json.loads(raw)
                ok = readme_verify(HOOK_SECRET.encode(), raw,
                                   self.headers.get("X-Gochatd-Signature", "t=0,v1="))
                with hook._lock:
                    hook.jobs.append(job)
                    hook.signed.append(ok)
                replies = []
                if job["job_type"] == "demo:hello":
                    replies.append({"channel": "whatsapp", "to": RECIPIENT,
                                    "body": {"text": f"hello, message {job['payload']['message_id']}"},
                                    "dedupe_key": f"reply:{job['payload']['message_id']}"})
                answer = json.dumps({"replies": replies}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/"

    def seen(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.jobs)

    def start(self) -> Hook:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)


@pytest.fixture
def hook() -> Iterator[Hook]:
    server = Hook().start()
    yield server
    server.stop()


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    server = WebhookReceiver(WA_SECRET.encode()).start()
    yield server
    server.stop()


def _make_key() -> tuple[str, str]:
    """``gochatd gateway hash-key --generate --tenant acme``: the key, and the config lines."""
    done = run_cli(["gateway", "hash-key", "--generate", "--tenant", TENANT])
    assert done.returncode == 0, done.stderr
    key_line, hash_line, config_lines = done.stdout.split("\n", 2)
    assert key_line.startswith("key:") and hash_line.startswith("hash:"), done.stdout
    key = key_line.split(":", 1)[1].strip()
    assert key.startswith("gck_") and key not in config_lines
    assert hash_line.split(":", 1)[1].strip() in config_lines
    return key, config_lines


def readme_curl(curl: str, base_url: str, key: str, job_type: str) -> list[str]:
    """The gateway page's curl command, read from docs/gateway.md, for this daemon and key and
    with ``job_type`` in its body; ``-w`` and ``-D -`` added to print the status and headers
    the page annotates."""
    readme = (REPO_ROOT / "docs" / "gateway.md").read_text(encoding="utf-8")
    start = readme.index("curl -sS -X POST http://127.0.0.1:8410/v1/jobs")
    command = shlex.split(readme[start:readme.index("\n# 201", start)].replace("\\\n", " "))
    assert command[0] == "curl" and "gck_Jx3…" in " ".join(command), command
    body = json.loads(command[command.index("-d") + 1])
    assert set(body) == {"job_type", "payload", "queue"}, body
    args = [a.replace("http://127.0.0.1:8410", base_url).replace("gck_Jx3…", key)
            for a in command[1:]]
    args[args.index("-d") + 1] = json.dumps({**body, "job_type": job_type})
    return [curl, *args, "-D", "-", "-w", "\n%{http_code}"]


def run_curl(command: list[str]) -> tuple[int, dict[str, str], Any]:
    """Run curl: the status, the response headers (lower-case names) and the JSON answer."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    head, _, rest = done.stdout.replace("\r\n", "\n").partition("\n\n")
    answer, _, status = rest.rpartition("\n")
    headers = dict(line.split(": ", 1) for line in head.splitlines()[1:])
    return int(status), {k.lower(): v for k, v in headers.items()}, json.loads(answer)


def _slot(idempotency_key: str) -> datetime:
    assert idempotency_key.startswith(f"{TICK}:"), idempotency_key
    return datetime.fromisoformat(idempotency_key.removeprefix(f"{TICK}:"))


def test_readme_walkthrough_gateway_http_handler_outbox_periodic(
    tmp_path: Path, pg_clean: str, redis_url: str, daemons: DaemonFactory, hook: Hook,
    receiver: WebhookReceiver,
) -> None:
    curl = shutil.which("curl")
    if curl is None:
        pytest.fail("curl is required on PATH for the docs walkthrough (apt-get install -y curl)")

    key, gateway_lines = _make_key()
    config = tmp_path / "gochatd.yaml"
    config.write_text(
        gateway_lines
        + f"database_url: {pg_clean}\n"
        f"redis_url: {redis_url}\n"
        "handlers:\n"
        "  http:\n"
        f'    "demo:*": {{url: "{hook.url}", timeout_s: 5, secret_env: GOCHAT_HOOK_SECRET}}\n'
        "outbox:\n"
        "  poll_s: 0.1\n"
        "  channels:\n"
        f'    whatsapp: {{provider: webhook, url: "{receiver.url}", secret_env: WA_HOOK_SECRET,\n'
        "               timeout_s: 5, retry_base_s: 0.05, retry_cap_s: 0.2}\n"
        "periodic:\n"
        f'  "{TICK}": {{every: 1s, queue: scheduled_jobs}}\n'
    )
    receiver.script = [Answer(503), Answer(503)]  # the receiver's first two attempts fail
    env = {"GOCHAT_HOOK_SECRET": HOOK_SECRET, "WA_HOOK_SECRET": WA_SECRET}
    daemon = daemons.start("gochatd", ["--config", str(config), "--migrate"], env=env,
                           mode="streams")
    base_url = daemon_admin_url(daemon)

    # A curl with the tenant key enqueues a job, for the key's tenant.
    command = readme_curl(curl, base_url, key, "demo:hello")
    status, _, answer = run_curl(command)
    assert status == 201, answer
    job = answer["job"]
    assert (job["tenant_id"], job["job_type"], job["queue"], job["payload"], job["status"]) == (
        TENANT, "demo:hello", "high", {"message_id": 42}, "queued")
    job_id = int(job["id"])
    # The same IM delivery again (same Idempotency-Key and body) is the same job.
    status, headers, again = run_curl(command)
    assert (status, headers.get("idempotent-replay"), again["job"]["id"]) == (200, "true", job_id)

    # The HTTP handler runs it; its reply reaches the receiver on the third attempt.
    def outbox_sent() -> list[tuple[Any, ...]] | None:
        rows = query(pg_clean, "SELECT status, attempts, tenant_id, job_id, channel, recipient,"
                               " dedupe_key FROM reply_outbox")
        return rows if rows and rows[0][0] == "sent" else None

    [row] = poll_until(outbox_sent, timeout_s=10, what="the reply to be sent")
    assert row == ("sent", 3, TENANT, job_id, "whatsapp", RECIPIENT, "reply:42")
    got = receiver.snapshot()
    assert [r.status for r in got] == [503, 503, 200]
    assert {r.key for r in got} == {"reply:42"}  # every attempt carries the same key
    assert len({r.key for r in got if 200 <= r.status < 300}) == 1
    assert list(receiver.accepted) == ["reply:42"]
    # Signed with WA_HOOK_SECRET's value: checked by gochatd.signing and by docs/replies.md's code.
    assert all(r.signature_ok for r in got)
    assert all(readme_verify(WA_SECRET.encode(), r.raw, r.signature) for r in got)
    delivered = receiver.accepted["reply:42"]
    assert (delivered["tenant_id"], delivered["channel"], delivered["recipient"],
            delivered["body"], delivered["job_id"]) == (
        TENANT, "whatsapp", RECIPIENT, {"text": "hello, message 42"}, job_id)
    # The job ran once, on the first attempt: the receiver's outage never re-ran it.
    assert [j["id"] for j in hook.seen() if j["job_type"] == "demo:hello"] == [job_id]
    assert query(pg_clean, "SELECT status, attempts FROM background_jobs WHERE id = %s",
                 [job_id]) == [("completed", 1)]

    # The periodic job fires on schedule: two consecutive slots, each run once.
    def consecutive_slots() -> list[datetime] | None:
        ran = Counter(j["id"] for j in hook.seen() if j["job_type"] == TICK)
        if not ran:
            return None
        rows = query(pg_clean, "SELECT id, idempotency_key, scheduled_at FROM background_jobs"
                               " WHERE job_type = %s AND id = ANY(%s)", [TICK, list(ran)])
        slots = sorted(_slot(str(k)) for _, k, _ in rows)
        assert all(_slot(str(k)) == at for _, k, at in rows), rows  # scheduled at its slot
        assert all(n == 1 for n in ran.values()), ran  # each slot reaches the handler once
        assert len(slots) == len(set(slots)) == len(ran), rows  # one job per slot
        pairs = [b for a, b in itertools.pairwise(slots) if b - a == timedelta(seconds=1)]
        return slots if pairs else None

    poll_until(consecutive_slots, timeout_s=10, what="two consecutive periodic slots")
    assert all(hook.signed), hook.signed
    assert {j["tenant_id"] for j in hook.seen() if j["job_type"] == "demo:hello"} == {TENANT}

    daemon.send(signal.SIGTERM)
    assert daemon.wait(15) == 0, daemon.output()[-4000:]
    daemon.assert_clean_output()
    output = daemon.log_text() + daemon.err_text()
    for secret in (key, HOOK_SECRET, WA_SECRET):
        assert secret not in output
