"""Prometheus metrics. Labels are bounded: queue names, registered job types (anything else
is ``unregistered``) and outcomes. Never job ids, tenants' secrets or payloads.

gochatd's own families live in a registry of their own (``Metrics.registry``); ``/metrics``
serves them and, after them, prometheus_client's default ``REGISTRY``: the process and
Python collectors and whatever handler modules and hooks register there (a plain
``Counter(...)``), minus any ``gochatd_*`` family, which is gochatd's name space."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gochatd.model import Outcome, QueueStats
from gochatd.worker.runnable import WaitingJobs

FinishKey = tuple[str, str, Outcome]  # as counters.FinishKey: (queue, job type, outcome)
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
                   5, 10, 30, 60)
#: Distinct job types whose metric label is remembered (the rest are looked up each time).
MAX_CACHED_LABELS = 10_000
DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900)

#: Counter names (``counters.Counters``) exported as Prometheus counters: name -> help
EXPORTED_COUNTERS: dict[str, tuple[str, str]] = {
    "stale_finishes": ("gochatd_stale_finishes", "Finishes refused for a stale fence"),
    "redis_errors": ("gochatd_redis_errors", "Redis operations that failed"),
    "store_errors": ("gochatd_store_errors", "Database operations that failed"),
    "sweep_redispatched": ("gochatd_sweep_redispatched", "Jobs re-dispatched by the sweep"),
    "leases_reaped": ("gochatd_leases_reaped", "Expired leases taken back by the reaper"),
    "malformed_stream_entries": ("gochatd_malformed_stream_entries", "Stream entries dropped as malformed"),
    "reclaimed_stream_entries": ("gochatd_reclaimed_stream_entries", "Entries taken over with XAUTOCLAIM"),
    "stream_entries_without_handler": ("gochatd_stream_entries_without_handler",
                                       "Stream entries acked unclaimed: a job type this daemon cannot run"),
    "jobs_claimed": ("gochatd_jobs_claimed", "Jobs claimed by this worker"),
    "periodic_enqueued": ("gochatd_periodic_enqueued", "Periodic slots this worker enqueued"),
    "periodic_skipped": ("gochatd_periodic_skipped", "Missed periodic slots skipped (catch_up: skip)"),
}


class _WorkerCollector(Collector):
    """Reads the worker's live state at scrape time."""

    def __init__(self, counters: Callable[[], Mapping[str, int]],
                 in_flight: Callable[[], int], mode: Callable[[], str]) -> None:
        self._counters, self._in_flight, self._mode = counters, in_flight, mode

    def collect(self) -> Iterable[Metric]:
        counters = self._counters()
        for key, (name, doc) in EXPORTED_COUNTERS.items():
            family = CounterMetricFamily(name, doc)
            family.add_metric([], float(counters.get(key, 0)))
            yield family
        in_flight = GaugeMetricFamily("gochatd_in_flight", "Handlers running in this process")
        in_flight.add_metric([], float(self._in_flight()))
        yield in_flight
        mode = GaugeMetricFamily("gochatd_dispatch_mode", "1 for the current dispatch mode",
                                 labels=["mode"])
        current = self._mode()
        for name in ("streams", "polling", "starting", "stopped"):
            mode.add_metric([name], 1.0 if name == current else 0.0)
        yield mode


class _FinishedCollector(Collector):
    """``gochatd_jobs_finished_total``: the finisher's one count per finish, read at scrape
    time (a counter per finish on the hot path would count each finish twice)."""

    def __init__(self, finished: Callable[[], Mapping[FinishKey, int]],
                 label: Callable[[str], str]) -> None:
        self._finished, self._label = finished, label

    def collect(self) -> Iterable[Metric]:
        totals: dict[tuple[str, str, str], float] = {}
        for (queue, job_type, outcome), n in list(self._finished().items()):
            key = (queue, self._label(job_type), outcome.value)
            totals[key] = totals.get(key, 0.0) + n
        family = CounterMetricFamily("gochatd_jobs_finished", "Jobs finished by this worker",
                                     labels=["queue", "job_type", "outcome"])
        for key, total in sorted(totals.items()):
            family.add_metric(list(key), total)
        yield family


class _DefaultRegistry(Collector):
    """prometheus_client's default ``REGISTRY`` at scrape time, without ``gochatd_*``."""

    def __init__(self, source: CollectorRegistry) -> None:
        self._source = source

    def describe(self) -> Iterable[Metric]:
        return []  # its families change as modules register theirs: not checked up front

    def collect(self) -> Iterable[Metric]:
        for family in self._source.collect():
            if not family.name.startswith("gochatd_"):
                yield family


def default_registry_view(source: CollectorRegistry = REGISTRY) -> CollectorRegistry:
    """A registry that serves ``source`` (the default one) minus gochatd's name space."""
    view = CollectorRegistry(auto_describe=False)
    view.register(_DefaultRegistry(source))
    return view


class Metrics:
    def __init__(self, known_job_types: Callable[[], Iterable[str]]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._default_view = default_registry_view()
        self._known = known_job_types
        self._labels: dict[str, str] = {}
        self._job_children: dict[tuple[str, str], tuple[Any, Any]] = {}
        self.duration = Histogram(
            "gochatd_job_duration_seconds", "Handler run time", ["queue", "job_type"],
            buckets=DURATION_BUCKETS, registry=self.registry,
        )
        self.claim_latency = Histogram(
            "gochatd_claim_latency_seconds", "Due time to claim (database clock)", ["queue"],
            buckets=LATENCY_BUCKETS, registry=self.registry,
        )
        self.queue_depth = Gauge(
            "gochatd_queue_depth", "Jobs per queue and state", ["queue", "state"],
            registry=self.registry,
        )
        self.queue_oldest = Gauge(
            "gochatd_queue_oldest_due_age_seconds", "Age of the oldest due job", ["queue"],
            registry=self.registry,
        )
        self.pruned = Counter(
            "gochatd_jobs_pruned", "Finished jobs deleted by retention", ["status"],
            registry=self.registry,
        )
        self.without_handler = Gauge(
            "gochatd_jobs_without_handler", "Due waiting jobs that no live daemon can run "
            "(no handler for their type in their queue), per queue", ["queue"],
            registry=self.registry,
        )
        self.tenant_running = Gauge(
            "gochatd_tenant_running", "Running jobs (fleet-wide) of each tenant named in "
            "the tenants config", ["tenant"], registry=self.registry,
        )

    def exposition(self) -> bytes:
        """What ``/metrics`` serves: gochatd's families, then the default registry's."""
        return generate_latest(self.registry) + generate_latest(self._default_view)

    def watch(self, counters: Callable[[], Mapping[str, int]], in_flight: Callable[[], int],
              mode: Callable[[], str],
              finished: Callable[[], Mapping[FinishKey, int]] | None = None) -> None:
        """Read at scrape time: the counters, the handlers running, the dispatch mode and
        the finish counts (``counters.FinishedCounts``: gochatd_jobs_finished_total)."""
        self.registry.register(_WorkerCollector(counters, in_flight, mode))
        self.registry.register(_FinishedCollector(finished or dict, self.job_type_label))

    def job_type_label(self, job_type: str) -> str:
        # Per job on the hot path: remember the answer (job types are a bounded set of
        # registered names; anything else is "unregistered").
        label = self._labels.get(job_type)
        if label is None:
            label = job_type if job_type in set(self._known()) else "unregistered"
            if len(self._labels) < MAX_CACHED_LABELS:
                self._labels[job_type] = label
        return label

    def observe_job(self, queue: str, job_type: str, duration_s: float,
                    claim_latency_s: float | None) -> None:
        key = (queue, self.job_type_label(job_type))
        children = self._job_children.get(key)
        if children is None:
            children = (self.duration.labels(*key), self.claim_latency.labels(queue))
            self._job_children[key] = children
        children[0].observe(duration_s)
        if claim_latency_s is not None:
            children[1].observe(claim_latency_s)

    def set_tenant_running(self, tenants: Iterable[str], running: Mapping[str, int]) -> None:
        """Only configured tenants become labels: the set stays bounded."""
        self.tenant_running.clear()
        for tenant in tenants:
            self.tenant_running.labels(tenant).set(running.get(tenant, 0))

    def set_without_handler(self, waiting: Iterable[WaitingJobs]) -> None:
        """Per queue (as bounded as gochatd_queue_depth); the types are named in
        GET /v1/job-types."""
        per_queue: dict[str, int] = {}
        for w in waiting:
            per_queue[w.queue] = per_queue.get(w.queue, 0) + w.jobs
        self.without_handler.clear()
        for queue, jobs in per_queue.items():
            self.without_handler.labels(queue).set(jobs)

    def set_queue_stats(self, stats: Iterable[QueueStats]) -> None:
        self.queue_depth.clear()
        self.queue_oldest.clear()
        for s in stats:
            for state in ("queued", "delayed", "running", "retrying", "dead"):
                self.queue_depth.labels(s.queue, state).set(getattr(s, state))
            self.queue_oldest.labels(s.queue).set(s.oldest_due_age_s or 0.0)
