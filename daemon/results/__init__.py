"""Job results (docs/results.md): what a handler returned, stored by the fenced finish that
completes the job (encode.py bounds and encodes it), and waiting for a job to finish
(wait.py; PostgreSQL wakes waiters with LISTEN/NOTIFY, watch.py)."""
