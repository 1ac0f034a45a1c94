"""Parsing helpers for config values, shared by the modules that own a config section
(they cannot import ``gochatd.config``, which imports their parsers)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def mapping_value(raw: Any, expected: str) -> Mapping[str, Any]:
    """A mapping-valued config key: YAML gives a mapping, its environment variable holds the
    same as YAML/JSON text. Empty or null is an empty mapping."""
    if isinstance(raw, str):
        import yaml

        try:
            raw = yaml.safe_load(raw) if raw.strip() else {}
        except yaml.YAMLError:
            raise ValueError("expected a YAML or JSON mapping") from None
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ValueError(f"expected {expected}")
    return raw
