"""A small TCP fault proxy. Every daemon reaches PostgreSQL and Redis through its own
listener here, so a fault can hit one daemon's connections or all of them.

Modes, per listener:

- ``pass``       forward both ways.
- ``refuse``     close every existing connection at once; new ones are accepted and closed
                 straight away (the client sees the server hang up).
- ``blackhole``  accept, but forward nothing: existing connections hang, new ones are never
                 connected upstream. Bytes are held, not dropped, so when the partition heals
                 what was sent arrives late, like a real network that comes back (a worker's
                 late commit really reaches the database).
- ``delay``      forward every chunk after ``delay_s``.

The proxy runs its own Trio loop in a background thread; the runner changes modes from the
main thread.
"""

from __future__ import annotations

import contextlib
import enum
import threading
from dataclasses import dataclass, field

import trio

CHUNK = 65536


class Mode(enum.StrEnum):
    PASS = "pass"
    REFUSE = "refuse"
    BLACKHOLE = "blackhole"
    DELAY = "delay"


@dataclass
class ListenerStats:
    accepted: int = 0
    refused: int = 0
    cut: int = 0  # existing connections closed by a switch to refuse
    upstream_failed: int = 0
    held_chunks: int = 0  # chunks that waited for a black-hole to heal


@dataclass(eq=False)
class Listener:
    name: str
    upstream_host: str
    upstream_port: int
    port: int = 0
    mode: Mode = Mode.PASS
    delay_s: float = 0.0
    stats: ListenerStats = field(default_factory=ListenerStats)
    conns: set[trio.CancelScope] = field(default_factory=set)
    changed: trio.Event = field(default_factory=trio.Event)

    def set_mode(self, mode: Mode, delay_s: float = 0.0) -> None:
        self.mode = mode
        self.delay_s = delay_s
        if mode is Mode.REFUSE:
            for scope in list(self.conns):
                self.stats.cut += 1
                scope.cancel()
        self.changed.set()
        self.changed = trio.Event()

    def current(self) -> Mode:
        """The mode now (another task may have changed it while we waited)."""
        return self.mode

    async def gate(self) -> None:
        """Return when a chunk may be forwarded."""
        held = False
        while self.mode is Mode.BLACKHOLE:
            if not held:
                held = True
                self.stats.held_chunks += 1
            await self.changed.wait()
        if self.mode is Mode.DELAY and self.delay_s > 0:
            await trio.sleep(self.delay_s)


class FaultProxy:
    """Listeners on 127.0.0.1, one per (daemon, upstream), served from one Trio thread."""

    def __init__(self) -> None:
        self._listeners: dict[str, Listener] = {}
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    # -- main-thread API -------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._thread_main, name="chaos-proxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(10) or self._token is None:
            raise RuntimeError(f"the fault proxy did not start: {self._error!r}")

    def stop(self) -> None:
        if self._thread is None or self._token is None:
            return
        nursery = self._nursery
        if nursery is not None:
            with contextlib.suppress(trio.RunFinishedError):
                trio.from_thread.run_sync(nursery.cancel_scope.cancel, trio_token=self._token)
        self._thread.join(10)
        self._thread = None

    def add(self, name: str, host: str, port: int) -> int:
        """Open a listener that forwards to ``host:port``; returns its local port."""
        assert self._token is not None
        listener = Listener(name, host, port)
        self._listeners[name] = listener
        local: int = trio.from_thread.run(self._serve, listener, trio_token=self._token)
        return local

    def set_mode(self, names: str | list[str], mode: Mode, delay_s: float = 0.0) -> None:
        assert self._token is not None
        targets = [names] if isinstance(names, str) else list(names)

        def apply() -> None:
            for name in targets:
                self._listeners[name].set_mode(mode, delay_s)

        trio.from_thread.run_sync(apply, trio_token=self._token)

    def reset(self) -> None:
        """Every listener back to pass, with no connection left over from before."""
        names = list(self._listeners)
        self.set_mode(names, Mode.REFUSE)
        self.set_mode(names, Mode.PASS)

    def stats(self, name: str) -> ListenerStats:
        return self._listeners[name].stats

    # -- proxy thread ----------------------------------------------------------------------

    def _thread_main(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:  # reported to start() or ignored after stop()
            self._error = exc
            self._ready.set()

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._ready.set()
            await trio.sleep_forever()

    async def _serve(self, listener: Listener) -> int:
        assert self._nursery is not None
        [sock_listener] = await trio.open_tcp_listeners(0, host="127.0.0.1")
        listener.port = int(sock_listener.socket.getsockname()[1])

        async def handler(stream: trio.SocketStream) -> None:
            try:
                await self._handle(listener, stream)
            except Exception:  # a broken socket ends one connection, never the proxy
                pass
            finally:
                await trio.aclose_forcefully(stream)

        self._nursery.start_soon(trio.serve_listeners, handler, [sock_listener])
        return listener.port

    async def _handle(self, listener: Listener, client: trio.SocketStream) -> None:
        listener.stats.accepted += 1
        if listener.mode is Mode.REFUSE:
            listener.stats.refused += 1
            return
        with trio.CancelScope() as scope:
            listener.conns.add(scope)
            try:
                # A black-holed listener accepts but never connects upstream.
                while listener.current() is Mode.BLACKHOLE:
                    await listener.changed.wait()
                if listener.current() is Mode.REFUSE:
                    listener.stats.refused += 1
                    return
                try:
                    upstream = await trio.open_tcp_stream(
                        listener.upstream_host, listener.upstream_port
                    )
                except OSError:
                    listener.stats.upstream_failed += 1
                    return
                async with upstream, trio.open_nursery() as pumps:
                    pumps.start_soon(self._pump, listener, client, upstream, pumps.cancel_scope)
                    pumps.start_soon(self._pump, listener, upstream, client, pumps.cancel_scope)
            finally:
                listener.conns.discard(scope)

    async def _pump(
        self,
        listener: Listener,
        src: trio.SocketStream,
        dst: trio.SocketStream,
        both: trio.CancelScope,
    ) -> None:
        try:
            while True:
                data = await src.receive_some(CHUNK)
                if not data:
                    break
                await listener.gate()
                await dst.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        finally:
            both.cancel()  # either side gone: close the pair
