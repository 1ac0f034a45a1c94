"""Periodic jobs: declared schedules, enqueued once per slot across the fleet.

    specs.py     declarations (``@gochatd.periodic`` into ``PERIODIC``, the ``periodic:``
                 config), ``every``, and the plan for one slot (on time, caught up, skipped)
    cron.py      five-field cron expressions, evaluated in UTC
    slots.py     the store operations: slot records and the fenced enqueue of a slot
    loop.py      the loop every daemon runs: enqueue each due slot, sleep until the next
    listing.py   what ``gochatd periodic list`` shows

The folder is not called ``periodic``: ``gochatd.periodic`` is the public decorator.
"""
