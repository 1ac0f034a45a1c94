"""The chaos runner's command line: what it accepts and the one line it refuses with."""

from __future__ import annotations

import pytest
from benchmarks.chaos.cli import parse


def test_pg_set_settings_reach_the_options() -> None:
    opts = parse(["--smoke", "--pg-set", "shared_preload_libraries=pg_stat_statements",
                  "--pg-set", "log_min_duration_statement = 50"])
    assert opts.pg_settings == {"shared_preload_libraries": "pg_stat_statements",
                                "log_min_duration_statement": "50"}
    assert parse(["--smoke"]).pg_settings == {}


@pytest.mark.parametrize("bad", ["work_mem", "=64MB"])
def test_a_pg_set_without_name_and_value_is_refused(
    bad: str, capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exc:
        parse(["--pg-set", bad])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--pg-set wants NAME=VALUE" in err and repr(bad) in err
