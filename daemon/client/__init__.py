"""The producer side: ``Client`` (Trio or asyncio) and ``SyncClient`` (threads), the group
commit of concurrent enqueues, enqueue validation and the operator's job controls. Both
clients are re-exported as ``gochatd.Client`` and ``gochatd.SyncClient``."""
