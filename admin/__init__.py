"""The embedded admin HTTP API and dashboard (``gochatd.admin``).

Not built yet: see issue #3 (health, drain, pause, metrics, dashboard, sd_notify). The
daemon's root nursery in ``gochatd.service`` is where its server will run.
"""
