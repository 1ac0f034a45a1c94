"""Dispatch: how a worker learns that a job is ready. Redis Streams when configured and up;
otherwise the database is polled (``gochatd.worker.intake``). Neither is the truth: the
database claim decides."""
