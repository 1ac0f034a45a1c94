"""Schema migrations and named queries, shipped inside the package as ``gochatd.sql``."""
