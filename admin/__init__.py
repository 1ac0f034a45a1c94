"""The embedded admin HTTP API and dashboard (``gochatd.admin``).

``create_app(daemon)`` builds the Quart (quart-trio) app; ``serve_admin`` runs it with
hypercorn inside the daemon's root nursery, stopped through its ``shutdown_trigger``.
"""
