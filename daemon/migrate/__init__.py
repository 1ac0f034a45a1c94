"""``gochatd move``: move a tenant's rows between backends while the daemons keep serving it
(docs/migrate.md): plan, copy, catch-up, validate, cutover and rollback, with the route
table's writes and the fleet barrier (route_control.py). The daemons' and clients' side, which
database serves which tenant, is the ``routing`` package.
"""
