"""Serve the admin app with hypercorn inside the daemon's root nursery."""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import os
import socket
import stat
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

import hypercorn.trio.run
import trio
from hypercorn.config import Config
from hypercorn.trio import serve
from hypercorn.trio.tcp_server import TCPServer

from gochatd.admin.app import create_app
from gochatd.errors import ConfigError
from gochatd.obs.logs import get_logger

if TYPE_CHECKING:
    from gochatd.worker.control import Control

#: How long one ASGI send may take once shielded (see ``ShieldedSend``).
SEND_SHIELD_S = 10.0
#: ``admin.listen: unix:/run/gochatd/worker-1.sock``: the socket file's mode (owner and group).
UNIX_SOCKET_MODE = 0o660
UNIX_PREFIX = "unix:"


def split_listen(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    return host.strip("[]"), int(port)


def is_loopback(host: str) -> bool:
    if host in {"localhost", ""}:
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        try:
            return all(
                ipaddress.ip_address(info[4][0]).is_loopback
                for info in socket.getaddrinfo(host, None)
            )
        except OSError:
            return False


def unix_path(listen: str) -> str | None:
    """The socket file of a ``unix:PATH`` listen address; None for host:port."""
    return listen[len(UNIX_PREFIX):] if listen.startswith(UNIX_PREFIX) else None


def check_admin_settings(listen: str, token: str) -> None:
    """Refuse to expose unauthenticated mutations beyond this host (a Unix socket is
    reached on this host only, by its owner and group)."""
    if unix_path(listen) is not None:
        return
    host, _ = split_listen(listen)
    if not token and not is_loopback(host):
        raise ConfigError(
            f"admin.listen {listen!r} is not a loopback address: set admin.token "
            "(GOCHAT_ADMIN_TOKEN), or listen on 127.0.0.1, or use --admin-listen off"
        )


async def serve_admin(
    daemon: Control,
    shutdown_trigger: Callable[[], Awaitable[None]],
    *,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    settings = daemon.settings
    check_admin_settings(settings.admin_listen, settings.admin_token)
    config = Config()
    config.bind = [settings.admin_listen]
    config.accesslog = None
    config.errorlog = None
    config.graceful_timeout = 5.0
    config.keep_alive_timeout = 5.0
    app = ShieldedSend(create_app(daemon))

    with unix_socket_file(config, "admin.listen"):
        async with trio.open_nursery() as nursery:
            binds = await start_listener(nursery, app, config, shutdown_trigger, "admin.listen",
                                         settings.admin_listen)
            address = bound_address(binds, settings.admin_listen)
            daemon.log.info("admin_listening", address=address)
            task_status.started(address)


def bound_address(binds: list[str], listen: str) -> str:
    """What the listener took: ``http://127.0.0.1:41234`` (the port an ephemeral ``:0``
    got) or ``unix:/run/gochatd/worker-1.sock``."""
    if not binds:
        return listen
    return binds[0].removeprefix("http://") if unix_path(listen) is not None else binds[0]


async def start_listener(
    nursery: trio.Nursery,
    app: object,
    config: Config,
    shutdown_trigger: Callable[[], Awaitable[None]],
    setting: str,
    address: str,
) -> list[str]:
    """Start hypercorn on ``config.bind`` (``address`` as configured); an address it cannot
    take is the operator's to change, said in one line (a second daemon on the host takes
    the same default port)."""
    env_name = "GOCHAT_" + setting.upper().replace(".", "_")
    try:
        binds: list[str] = await nursery.start(_serve, app, config, shutdown_trigger)
    except BaseException as exc:  # hypercorn's nurseries wrap the bind error in groups
        error = _only_os_error(exc)
        if error is None:
            raise
        if error.errno == errno.EADDRINUSE:
            unix = "unix:/path/to.sock, " if setting == "admin.listen" else ""
            raise ConfigError(
                f"{setting}: {address} is already in use (another gochatd on this host?); "
                f"set {setting} ({env_name}) to a free port, 127.0.0.1:0 for any, {unix}or off"
            ) from None
        raise ConfigError(
            f"{setting}: cannot listen on {address}: {error.strerror or error}"
        ) from None
    return binds


@contextlib.contextmanager
def unix_socket_file(config: Config, setting: str) -> Iterator[None]:
    """For ``unix:PATH``: bind the socket file here (mode 0660, a stale one from a dead
    daemon replaced, a live one refused) and hand hypercorn the bound socket; the file is
    removed on the way out, unless another process has replaced it meanwhile."""
    listen = config.bind[0]
    path = unix_path(listen)
    if path is None:
        yield
        return
    try:
        sock = _bind_unix(path, setting)
    except OSError as error:
        raise ConfigError(f"{setting}: cannot listen on {listen}: "
                          f"{error.strerror or error}") from None
    inode = os.stat(path).st_ino
    config.bind = [f"fd://{sock.detach()}"]
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            if os.stat(path).st_ino == inode:
                os.unlink(path)


def _bind_unix(path: str, setting: str) -> socket.socket:
    _clear_stale_socket(path, setting)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        # The file is created with the umask's mode: never wider than 0660, not even briefly.
        previous = os.umask(0o777 & ~UNIX_SOCKET_MODE)
        try:
            sock.bind(path)
        finally:
            os.umask(previous)
        os.chmod(path, UNIX_SOCKET_MODE)
    except BaseException:
        sock.close()
        raise
    return sock


def _clear_stale_socket(path: str, setting: str) -> None:
    """A socket file nobody answers on (its daemon died) is removed; one that answers
    belongs to a running daemon, and anything else is not ours to delete."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise ConfigError(f"{setting}: {path} exists and is not a socket; remove it or set "
                          f"{setting} to another path")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(2.0)
    try:
        probe.connect(path)
    except ConnectionRefusedError:
        os.unlink(path)  # stale: left by a daemon that did not exit cleanly
        return
    except FileNotFoundError:
        return
    finally:
        probe.close()
    env_name = "GOCHAT_" + setting.upper().replace(".", "_")
    raise ConfigError(
        f"{setting}: unix:{path} is already in use (another gochatd on this host?); "
        f"set {setting} ({env_name}) to a socket of its own, for example unix:/run/gochatd/"
        "worker-2.sock"
    )


def _only_os_error(exc: BaseException) -> OSError | None:
    """The OSError when ``exc`` is one, alone or as the only leaf of nested groups."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc if isinstance(exc, OSError) else None


class ShieldedSend:
    """ASGI middleware: the app's ``send`` calls run shielded from cancellation (bounded).

    quart-trio cancels a request's task group as soon as hypercorn reports the client side
    done, which lands while the last ``send`` is still inside hypercorn's keep-alive
    bookkeeping (re-arming the idle timer). Cancelled there, the timer is never re-armed:
    the idle connection then never times out, and shutdown waits the whole graceful timeout
    for it (a daemon stop took 5 s longer whenever a client kept a connection open)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def shielded_send(message: Any) -> None:
            with trio.CancelScope(shield=True) as scope_:
                scope_.deadline = trio.current_time() + SEND_SHIELD_S
                await send(message)

        await self.app(scope, receive, shielded_send)


class ContainedTCPServer(TCPServer):
    """One connection must never take the daemon down. hypercorn runs every connection in
    its server nursery, so an exception escaping one cancels the server, and the root
    nursery with it: a chunked body with a bad chunk size, racing the app's response, made
    hypercorn send its 400 while the response was still being sent (trio.BusyResourceError),
    and any client could stop the worker that way."""

    async def run(self) -> None:
        try:
            await super().run()
        except Exception as exc:
            get_logger(component="admin").warning(
                "admin_connection_failed", error_class=type(exc).__name__
            )


# hypercorn's trio server looks its connection class up in this module.
hypercorn.trio.run.TCPServer = ContainedTCPServer  # type: ignore[attr-defined]


async def _serve(
    app: object,
    config: Config,
    shutdown_trigger: Callable[[], Awaitable[None]],
    *,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    await serve(app, config, shutdown_trigger=shutdown_trigger, task_status=task_status)  # type: ignore[arg-type]
