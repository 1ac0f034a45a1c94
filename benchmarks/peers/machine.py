"""Facts about the machine and the servers, for the report's header."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess


def _sh(argv: list[str]) -> str:
    if shutil.which(argv[0]) is None:
        return f"({argv[0]} not found)"
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return done.stdout.strip()


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def _ram_gib() -> str:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    return "?"


def _redis_info(field: str) -> str:
    for line in _sh(["redis-cli", "-h", "127.0.0.1", "info", "server"]).splitlines():
        if line.startswith(field + ":"):
            return line.split(":", 1)[1].strip()
    return "?"


def _redis_config(key: str) -> str:
    # `config get save` answers two lines, the name and the value; an empty value is "".
    out = _sh(["redis-cli", "-h", "127.0.0.1", "config", "get", key]).split("\n")
    return out[1].strip() if len(out) > 1 else ""


def _pg(sql: str) -> str:
    return _sh(["psql", "-h", "127.0.0.1", "-U", "root", "-d", "postgres", "-Atc", sql])


def load_average() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def machine_facts(peers_python: str) -> dict[str, str]:
    return {
        "cores": str(os.cpu_count()),
        "cpu": _cpu_model(),
        "ram": _ram_gib(),
        "kernel": f"{platform.system()} {platform.release()}",
        "python": _sh([peers_python, "-c", "import sys; print(sys.version.split()[0])"]),
        "postgresql": _pg("show server_version"),
        "postgresql_settings": _pg(
            "select string_agg(name || '=' || setting, ', ' order by name) from pg_settings where name in "
            "('fsync', 'synchronous_commit', 'wal_level', 'full_page_writes', 'shared_buffers', "
            "'max_connections')"),
        "redis": _redis_info("redis_version"),
        "redis_persistence": f"save '{_redis_config('save')}', appendonly {_redis_config('appendonly')}",
        "load average at the end (1/5/15 min)": load_average(),
    }
