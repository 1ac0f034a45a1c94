import gochatd  # noqa: F401, I001  # trio_asyncio before psycopg

import sys

from benchmarks.chaos.cli import main

sys.exit(main())
