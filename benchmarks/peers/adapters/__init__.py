"""One module per system under test. Each runs inside ``benchmarks/peers/.venv`` and speaks
the command-line contract in :mod:`benchmarks.peers.adapters.contract`."""
