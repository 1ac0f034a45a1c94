"""The reply outbox: rows written with a job's completion, delivered by providers.

``model`` holds the row and its statuses, ``providers`` the provider protocol and registry,
``webhook`` the built-in provider, ``sender`` one delivery attempt end to end. The loop that
drives it is ``gochatd.outbox.loop``.
"""
