"""The worker: one job's path through the daemon, in order.

``service`` (the composition root) starts ``lifecycle`` and ``signals``; ``intake`` (with
``queues``, ``notify`` and ``capped_backlog``) claims jobs into the job ``pool``; the
``runner`` runs each handler (``registry``, ``runtimes``, ``http_handlers``) under the
``heartbeat``'s leases; the ``finisher`` commits how it ended. ``control`` is what the admin
API sees of it all."""
