"""What a daemon can run (daemon/worker/runnable.py): exact types and ``prefix:*`` routes, the
fleet row's JSON (a row of an older release or a garbled one reads as None), and the
comparison a streams daemon makes with its peers."""

from __future__ import annotations

import pytest

from gochatd.worker.runnable import ANY_TYPE, DaemonHandlers, RunnableTypes, WaitingJobs, without_handler

SET = RunnableTypes.of(["app:a", "sys:noop"], ["hook:*", "exact:route"])


@pytest.mark.parametrize(("job_type", "runs"), [
    ("app:a", True), ("sys:noop", True), ("exact:route", True), ("hook:x", True),
    ("hook:x:y", True), ("hook", False), ("hookx:y", False), ("exact:route:more", False),
    ("app:b", False), ("APP:A", False),
])
def test_exact_types_and_prefix_routes(job_type: str, runs: bool) -> None:
    assert SET.can_run(job_type) is runs
    assert ANY_TYPE.can_run(job_type)


def test_the_claim_parameters_per_dialect() -> None:
    assert SET.params["postgres"] == {
        "runnable_any": False, "runnable_types": ["app:a", "exact:route", "sys:noop"],
        "runnable_prefixes": ["hook:"]}
    assert SET.params["sqlite"]["runnable_prefixes"] == '["hook:"]'
    assert ANY_TYPE.params["postgres"]["runnable_any"] is True


@pytest.mark.parametrize("text", [None, "", "not json", "[]", '{"types": []}',
                                  '{"types": "a", "prefixes": [], "queues": []}'])
def test_a_row_without_a_readable_set_is_none(text: str | None) -> None:
    assert DaemonHandlers.from_json(text) is None


def test_the_row_round_trips_and_peers_compare() -> None:
    mine = DaemonHandlers(SET, frozenset({"default"}))
    assert DaemonHandlers.from_json(mine.to_json()) == mine
    fewer = DaemonHandlers(RunnableTypes.of(["app:a"]), frozenset({"default", "low"}))
    assert fewer.lacks_some_of(mine) and not mine.lacks_some_of(fewer)
    elsewhere = DaemonHandlers(RunnableTypes(), frozenset({"low"}))
    assert not elsewhere.lacks_some_of(mine)  # it reads none of mine's queues


def test_without_handler_needs_a_live_daemon_serving_the_queue_with_the_type() -> None:
    waiting = [WaitingJobs("app:a", "default", 2, 5.0), WaitingJobs("app:a", "low", 1, 1.0),
               WaitingJobs("app:z", "default", 3, 9.0)]
    live = [DaemonHandlers(SET, frozenset({"default"}))]
    assert [(w.job_type, w.queue) for w in without_handler(waiting, live)] == [
        ("app:z", "default"), ("app:a", "low")]
    assert without_handler(waiting, [*live, None]) == []  # an older release claims anything
    assert len(without_handler(waiting, [])) == 3
