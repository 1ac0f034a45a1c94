"""The gateway: authenticated enqueue over HTTP for tenants.

    keys.py        tenant API keys: only their SHA-256 hashes are configured; constant-time lookup
    settings.py    parsing of ``gateway.*`` and ``tenants`` config values
    ratelimit.py   per-tenant GCRA: one Lua script in Redis (fleet-wide), else per process
    requests.py    a JSON body -> a validated EnqueueRequest (tenant from the key, never the body)

The HTTP routes live in ``gochatd.admin.gateway``.
"""
