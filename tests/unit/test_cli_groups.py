"""The command line's registration seam (issue 24 item 3): ``cli/program.py`` only lists the
command groups; each group's module adds its own parser and names the handler that runs it.
Building the parser (``gochatd --help``) imports each group's small cli module, not the work
behind it."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import subprocess
import sys

import pytest

from gochatd.cli.parsing import Parser
from gochatd.cli.program import GROUPS, build_parser, main

#: One command line per group, and the group module whose handler must run it.
SAMPLES = [
    ([], "gochatd.cli.serve"),
    (["serve", "--worker-only"], "gochatd.cli.serve"),
    (["enqueue", "t"], "gochatd.cli.enqueue"),
    (["jobs", "bulk", "retry", "--ids", "1"], "gochatd.cli.jobs"),
    (["batches", "show", "1"], "gochatd.cli.batches"),
    (["db", "upgrade"], "gochatd.cli.db"),
    (["config", "check"], "gochatd.cli.config"),
    (["gateway", "hash-key", "--generate"], "gochatd.gateway.cli"),
    (["periodic", "list"], "gochatd.periodic_jobs.cli"),
    (["outbox", "show", "3"], "gochatd.outbox.cli"),
    (["move", "status", "--from", "sqlite:///x"], "gochatd.migrate.cli"),
    (["migrate", "plan", "--from", "sqlite:///x", "--to", "sqlite:///y"], "gochatd.migrate.cli"),
    (["bench", "--smoke"], "gochatd.cli.bench"),
]


@pytest.mark.parametrize("name", GROUPS)
def test_each_group_registers_its_commands_with_its_own_handler(name: str) -> None:
    sub = Parser(prog="gochatd").add_subparsers(dest="command", parser_class=Parser)
    importlib.import_module(name).add_parser(sub)
    assert sub.choices, f"{name} added no command"
    for command, parser in sub.choices.items():
        handler = parser.get_default("handler")
        assert callable(handler), f"{name}: 'gochatd {command}' has no handler"
        assert handler.__module__ == name, (command, handler.__module__)


@pytest.mark.parametrize(("argv", "group"), SAMPLES)
def test_a_command_line_reaches_its_groups_handler(argv: list[str], group: str) -> None:
    args = build_parser().parse_args(argv or ["serve"])
    assert args.handler.__module__ == group


def test_the_help_lists_the_groups_in_their_order() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    assert ("{serve,enqueue,jobs,batches,db,config,gateway,periodic,outbox,move,migrate,bench}"
            in out.getvalue())


def test_the_handler_is_not_left_in_the_arguments() -> None:
    """A handler sees the same namespace as before the seam (bench hands it on as is)."""
    seen: list[argparse.Namespace] = []
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    probe = sub.add_parser("probe")
    probe.set_defaults(handler=lambda args: seen.append(args) or 0)
    from gochatd.cli import program

    assert program._dispatch(parser, ["probe"]) == 0
    assert len(seen) == 1 and not hasattr(seen[0], "handler")
    assert vars(seen[0]) == {"command": "probe"}


def test_building_the_parser_loads_no_command_work() -> None:
    script = ("import json, sys\nfrom gochatd.cli.program import build_parser\nbuild_parser()\n"
              "print(json.dumps(sorted(sys.modules)))")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=60, check=True)
    loaded = set(json.loads(result.stdout))
    assert {"gochatd.gateway.cli", "gochatd.outbox.cli", "gochatd.migrate.cli"} <= loaded
    work = {"httpx", "quart", "hypercorn", "gochatd.worker.service", "gochatd.testing",
            "gochatd.gateway.hash_key_cmd", "gochatd.periodic_jobs.listing", "benchmarks.bench"}
    assert sorted(loaded & work) == []
