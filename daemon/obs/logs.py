"""structlog set-up: JSON lines when stderr is not a TTY (journald), console on a TTY.

Logs go to stderr: stdout carries only a command's output (``gochatd enqueue`` prints one
JSON document there, whatever went wrong on the way).

Only the command line's entry points call ``configure_logging``. gochatd used as a library
(``gochatd.Client`` in someone's program) never configures structlog or logging: if the
host program configured structlog, gochatd's events go through that configuration; if it
configured nothing, warnings and errors go to stderr and nothing else is printed (the way
the standard library's ``logging`` treats a library without handlers).

In gochatd's own process the libraries' records (psycopg, psycopg_pool, redis-py, hypercorn,
asyncio; ``logging`` at WARNING and above) and Python warnings (``warnings.warn``) come out
as structlog events too (``library_log``), so in JSON mode every stderr line is one JSON
object. Their text is redacted (``redact.redact_error``): no DSN or password gets through.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

from gochatd.obs.redact import redact_error

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR}


#: The bound root logger, built on first use after each configure_logging(): binding per
#: job context onto it skips structlog's lazy-proxy resolution on the hot path.
_root: structlog.typing.FilteringBoundLogger | None = None
#: Whether a gochatd entry point configured logging (``reconfigure_logging`` acts only then).
_configured = False
#: The libraries' records below this level are dropped (httpx logs every request at INFO).
LIBRARY_LEVEL = logging.WARNING


class _CurrentStderr:
    """Whatever ``sys.stderr`` is when a line is written, not when logging was set up (a
    test harness or an embedding program may swap it, and close the one it replaced)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


_STDERR: Any = _CurrentStderr()


def configure_logging(level: str = "info", fmt: str = "auto") -> None:
    """For the command line's entry points only: the process is gochatd's own."""
    global _root, _configured
    _root = None
    _configured = True
    use_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if use_json
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info if use_json else structlog.dev.set_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS.get(level, logging.INFO)),
        logger_factory=structlog.PrintLoggerFactory(file=_STDERR),
        cache_logger_on_first_use=False,
    )
    _route_library_records()


class LibraryRecords(logging.Handler):
    """Forwards the standard library's log records (and, through ``captureWarnings``,
    warnings) to structlog: one ``library_log`` event each, its text redacted."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # a library's bad format arguments must not lose the record
            message = str(record.msg)
        fields: dict[str, Any] = {"logger": record.name, "message": redact_error(message)}
        if record.exc_info and record.exc_info[1] is not None:
            fields["error_class"] = type(record.exc_info[1]).__name__
        get_logger().log(record.levelno, "library_log", **fields)


def _route_library_records() -> None:
    """The root logger's only handler is ours (replacing Python's last-resort handler,
    which printed plain text on stderr)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if isinstance(handler, LibraryRecords):
            root.removeHandler(handler)
    root.addHandler(LibraryRecords(LIBRARY_LEVEL))
    root.setLevel(LIBRARY_LEVEL)
    logging.captureWarnings(True)


def reconfigure_logging(level: str, fmt: str) -> None:
    """A config reload's new log settings; nothing when gochatd does not own the logging
    (a ``Worker`` embedded in someone else's program)."""
    if _configured:
        configure_logging(level, fmt)


def _unconfigured_logger() -> structlog.typing.FilteringBoundLogger:
    """Nobody configured structlog: warnings and errors on stderr, as one key=value line."""
    logger: structlog.typing.FilteringBoundLogger = structlog.wrap_logger(
        structlog.PrintLogger(_STDERR),
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.KeyValueRenderer(key_order=["level", "event"]),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        context_class=dict,
        cache_logger_on_first_use=True,
    )
    return logger


def get_logger(**bind: Any) -> structlog.typing.FilteringBoundLogger:
    global _root
    if _root is None:
        if _configured or structlog.is_configured():
            _root = structlog.get_logger("gochatd").bind()
        else:
            return _unconfigured_logger().bind(logger="gochatd", **bind)
    return _root.bind(**bind)
