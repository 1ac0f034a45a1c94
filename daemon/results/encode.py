"""A handler's return value as the JSON text its completion stores, or why it cannot be.

The bound is ``worker.max_result_bytes`` (UTF-8 bytes of the compact JSON). A result over it,
or one that is not JSON, makes the job dead with a clear ``error_class`` and ``last_error``
that name the problem and never quote the value: a result is never truncated.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

#: The stored error classes (``error_class`` of the dead job).
RESULT_TOO_LARGE = "result_too_large"
RESULT_NOT_JSON = "result_not_json"


@dataclass(frozen=True, slots=True)
class EncodedResult:
    #: JSON text, or None for no result (the handler returned None).
    text: str | None = None
    #: Set when the value cannot be stored: (error_class, last_error).
    problem: tuple[str, str] | None = None


NO_RESULT = EncodedResult()

#: A NUL character in a JSON string (an escape not itself escaped): PostgreSQL's jsonb
#: refuses it, and it would fail the whole finish batch.
_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def encode_result(value: Any, max_bytes: int) -> EncodedResult:
    """``value`` as compact JSON of at most ``max_bytes`` UTF-8 bytes. Floats that JSON has
    no word for (NaN, infinities) and keys that are not strings are refused, not coerced."""
    if value is None:
        return NO_RESULT
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False,
                          default=_refuse)
    except (TypeError, ValueError, RecursionError) as exc:
        return EncodedResult(problem=(RESULT_NOT_JSON, _why(exc)))
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate: neither PostgreSQL nor SQLite stores it
        return EncodedResult(problem=(RESULT_NOT_JSON,
                                      "the handler's result holds a lone surrogate"))
    if _NUL.search(text):
        return EncodedResult(problem=(RESULT_NOT_JSON,
                                      "the handler's result holds a NUL character (\\u0000)"))
    if size > max_bytes:
        return EncodedResult(problem=(
            RESULT_TOO_LARGE,
            f"the handler's result is {size} bytes of JSON, over worker.max_result_bytes "
            f"({max_bytes}); return less, or store it elsewhere and return a reference"))
    return EncodedResult(text=text)


def _refuse(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON (return dict, list, str, int, "
                    "float, bool or None)")


def _why(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "the handler's result is nested too deeply for JSON"
    text = str(exc)
    if isinstance(exc, TypeError) and "keys must be" in text:
        return "the handler's result has a key that is not a string, number, bool or None"
    if isinstance(exc, ValueError) and "Out of range float" in text:
        return f"the handler's result holds a float JSON cannot carry ({_nonfinite()})"
    if isinstance(exc, TypeError) and text.endswith("bool or None)"):
        return f"the handler's result is not JSON: {text}"
    return f"the handler's result is not JSON: {type(exc).__name__}"


def _nonfinite() -> str:
    return ", ".join(repr(x) for x in (math.nan, math.inf, -math.inf))

