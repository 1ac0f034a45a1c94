"""Outbox metrics, on the worker's private registry. Labels are configured channel names and
error classes (``http_<status>``, ``timeout``, exception class names): never recipients,
bodies, URLs or secrets."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from gochatd.outbox.model import OutboxStats, OutboxStatus

DELIVERY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900,
                    3600)


class OutboxMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.sent = Counter(
            "gochatd_outbox_sent", "Replies delivered by this worker", ["channel"],
            registry=registry,
        )
        self.failed = Counter(
            "gochatd_outbox_failed", "Failed delivery attempts by this worker",
            ["channel", "error_class"], registry=registry,
        )
        self.latency = Histogram(
            "gochatd_outbox_delivery_latency_seconds",
            "From the reply's commit to its delivery (database clock)", ["channel"],
            buckets=DELIVERY_BUCKETS, registry=registry,
        )
        self.rows = Gauge(
            "gochatd_outbox_rows", "Outbox rows not yet sent, by status (fleet-wide)", ["state"],
            registry=registry,
        )
        self.oldest_pending = Gauge(
            "gochatd_outbox_oldest_pending_age_seconds", "Age of the oldest pending reply",
            registry=registry,
        )

    def set_stats(self, stats: OutboxStats) -> None:
        for status in (OutboxStatus.PENDING, OutboxStatus.SENDING, OutboxStatus.DEAD):
            self.rows.labels(status.value).set(stats.counts.get(status, 0))
        self.oldest_pending.set(stats.oldest_pending_age_s or 0.0)
