"""The chaos runner: a fleet of real ``gochatd`` processes, a private PostgreSQL cluster and
redis-server, a TCP fault proxy in front of every daemon's connections, scenarios that
inject faults, and invariants checked from the database afterwards.

Run it with ``python -m benchmarks.chaos --scenario all [--smoke]``. Modules, one job each:

- ``cli``          options, signals, exit code
- ``settings``     run options and the timing every daemon gets
- ``runner``       services up once, then per scenario: database, fleet, run, check, report
- ``proxy``        the TCP fault proxy (pass, refuse, black-hole, delay)
- ``postgres``     the private PostgreSQL cluster (initdb, pg_ctl start/restart/stop)
- ``redis_server`` the private redis-server (start, kill, restart on the same port)
- ``fleet``        the daemon processes, their logs, deaths and restarts
- ``database``     one scenario's database: create, migrate, instrument, enqueue, read back
- ``recorder``     the handlers' side channel: one row per execution
- ``handlers``     ``chaos:work`` and ``chaos:exit`` (loaded by the daemons)
- ``invariants``   the checks and figures computed from a finished scenario
- ``report``       the table and the JSON report
- ``scenarios/``   the scenarios, grouped by what they break
- ``wait``         conditions with deadlines
"""
