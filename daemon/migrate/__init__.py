"""``gochatd migrate``: copy and validate a tenant's rows between backends.

This is the first increment of backend migration: plan, copy, validate and status, for a
tenant whose writers are stopped. The dual-write barrier, catch-up, cutover/rollback and
the daemon's per-tenant routing come later and build on these modules.
"""
