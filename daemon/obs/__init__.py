"""Observability: logs, metrics, counters, redaction, systemd's notify protocol, and
OpenTelemetry traces (``otel``, only when the extra is installed)."""
