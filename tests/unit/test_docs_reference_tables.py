"""The reference tables of the docs agree with the code: docs/configuration.md has one row per
setting of ``FIELDS`` (its environment variable and whether SIGHUP applies it), and the
metrics table of docs/operations.md names exactly the families /metrics can serve."""

from __future__ import annotations

import os
import re

from prometheus_client import CollectorRegistry

from gochatd.config.settings import FIELDS, load_settings
from gochatd.gateway.gateway import Gateway
from gochatd.obs.metrics import Metrics
from gochatd.outbox.metrics import OutboxMetrics
from tests.support.daemon_process import REPO_ROOT

CELL = re.compile(r"`([^`]+)`")


def _table_rows(page: str, first_header: str) -> list[list[str]]:
    """The cells of the table whose first header cell is ``first_header``."""
    lines = (REPO_ROOT / "docs" / page).read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]])
    return rows


def test_every_setting_has_one_row_in_the_configuration_page() -> None:
    rows = _table_rows("configuration.md", "key")
    documented = {}
    for key_cell, env_cell, _default, _range, reload_cell, *_ in rows:
        key = CELL.fullmatch(key_cell)
        env = CELL.fullmatch(env_cell)
        assert key is not None and env is not None, (key_cell, env_cell)
        assert key.group(1) not in documented, f"{key.group(1)} has two rows"
        documented[key.group(1)] = (env.group(1), reload_cell)
    expected = {f.key: (f.env, "yes" if f.reloadable else "restart") for f in FIELDS}
    assert documented == expected


def _served_families() -> dict[str, str]:
    """name -> type of every family a daemon running the gateway registers."""
    registry_metrics = Metrics(lambda: [])
    registry_metrics.watch(lambda: {}, lambda: 0, lambda: "streams")
    OutboxMetrics(registry_metrics.registry)
    Gateway(load_settings(env={}, config_file=os.devnull), registry_metrics.registry)
    registry: CollectorRegistry = registry_metrics.registry
    return {family.name: family.type for family in registry.collect()}


def test_the_metrics_table_names_every_served_family() -> None:
    documented: set[str] = set()
    for cells in _table_rows("operations.md", "metric"):
        documented.update(CELL.findall(cells[0]))
    served = {name + ("_total" if kind == "counter" else ""): kind
              for name, kind in _served_families().items()}
    assert len(served) >= 25, served
    assert documented == set(served)
