"""``python -m benchmarks.peers``: see :mod:`benchmarks.peers.cli`."""

from benchmarks.peers.cli import main

raise SystemExit(main())
