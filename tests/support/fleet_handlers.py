"""Handler modules for a fleet whose daemons carry different handlers
(tests/e2e/test_mixed_handlers.py): ``--handlers tests.support.fleet_handlers:a`` is not a
thing, so each set is its own module below, built from these names."""

from __future__ import annotations

#: Only the daemons started with tests.support.fleet_handlers_a run these.
ONLY_A = "fleet:a"
TICK = "fleet:tick"  # a periodic job's type; its handler is only in A
#: Only the daemons started with tests.support.fleet_handlers_b run this.
ONLY_B = "fleet:b"
#: Only tests.support.fleet_handlers_late runs this: a type no daemon has at first.
LATE = "fleet:late"
