"""Tenant routing: every daemon and client serves a tenant from the one database that holds
it while ``gochatd migrate`` moves tenants between databases (docs/migrate.md).

- ``view.py``: the route table seen as tenant scopes (which database serves which tenant),
  and the merging of what each database returns;
- ``core.py``: ``RouterBase``, the routed store's destinations, route re-reads and the one
  call path, with its no-route fast path, hold and retry;
- ``store.py``: ``RoutedStore``, the job store's operations routed by tenant;
- ``controls.py``, ``outbox.py``, ``fleet.py``: the routed job controls, reply outbox and
  fleet dashboard operations;
- ``sync.py``: the same rules for ``SyncClient``, on the calling thread;
- ``follower.py``: the daemon loop that follows the route table and acknowledges versions.

The route table's rows and their SQL stay in the store (store/route_table.py): the store's
protocol returns a ``RouteTable``, and the store does not import its features.
"""
