"""Side-by-side comparison of gochatd with other Python job queues (issue 5).

``python -m benchmarks.peers`` installs the peers into their own virtualenv
(``benchmarks/peers/.venv``), then measures every system with the same phases, the same
producer shapes and the same no-op handler, alternating systems within each repetition,
and writes ``docs/benchmarks.md`` plus the raw figures as JSON.

Layout:

- ``cli.py``       the command: options, the run loop, where the outputs go
- ``venv.py``      creates and fills the peers' virtualenv
- ``systems.py``   the systems under test and the adapter that drives each
- ``phases.py``    one repetition of one system: enqueue, drain, end-to-end, idle latency
- ``records.py``   reads the handler-start record file; percentiles
- ``machine.py``   machine facts and server versions for the report
- ``report.py``    medians across reps, ratios vs gochatd, the Markdown and JSON outputs
- ``adapters/``    one module per system, run inside the peers' venv
  (``adapters/contract.py`` is the contract every adapter implements)
"""
