"""The ``gochatd`` subcommands' implementations, one module per command group; ``cli.py``
builds the parser and dispatches to them."""
