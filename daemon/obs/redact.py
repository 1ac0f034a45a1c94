"""Keep secrets and payload contents out of stored errors and logs."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from typing import Any

MAX_ERROR_CHARS = 512

_URL_CREDENTIALS = re.compile(r"([a-zA-Z][a-zA-Z0-9+.\-]*://)([^/\s:@]*)(:[^@\s/]*)?@")
_SECRET_PAIRS = re.compile(
    r"(?i)\b(password|passwd|pwd|secret|token|api[_-]?key)\b(\s*[=:]\s*)"
    r"(\"[^\"]*\"|'[^']*'|[^\s,;&]+)"
)
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]+")
_DSN_PASSWORD = re.compile(r"(?i)\bpassword\s*=\s*\S+")


def mask_url(url: str) -> str:
    """``postgresql://u:secret@h/db`` -> ``postgresql://u:***@h/db``."""
    return _URL_CREDENTIALS.sub(
        lambda m: f"{m.group(1)}{m.group(2)}{':***' if m.group(3) else ''}@", url
    )


def _payload_strings(payload: Any) -> Iterable[str]:
    if isinstance(payload, str):
        yield payload
    elif isinstance(payload, dict):
        for value in payload.values():
            yield from _payload_strings(value)
    elif isinstance(payload, list):
        for value in payload:
            yield from _payload_strings(value)


def redact_error(message: str, payload: Any = None, limit: int = MAX_ERROR_CHARS, *,
                 keep: Collection[str] = ()) -> str:
    """Strip credentials, secret-looking pairs and the job's own payload strings (but those
    in ``keep``: a payload field whose text is meant as the error); cap length."""
    text = mask_url(message)
    text = _BEARER.sub(lambda m: f"{m.group(1)} ***", text)
    text = _DSN_PASSWORD.sub("password=***", text)
    text = _SECRET_PAIRS.sub(lambda m: f"{m.group(1)}{m.group(2)}***", text)
    for value in sorted(set(_payload_strings(payload)) - set(keep), key=len, reverse=True):
        if len(value) >= 4:
            text = text.replace(value, "[payload]")
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text
