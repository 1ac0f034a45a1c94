"""The gateway: authenticated enqueue over HTTP for tenants.

    keys.py        tenant API keys: only their SHA-256 hashes are configured; constant-time lookup
    settings.py    parsing of ``gateway.*`` and ``tenants`` config values
    ratelimit.py   per-tenant GCRA: one Lua script in Redis (fleet-wide), else per process
    requests.py    a JSON body -> a validated EnqueueRequest (tenant from the key, never the body)
    gateway.py     the Gateway the daemon holds: keys, limits and counters, reloaded in place
    api.py         the HTTP routes (on the admin app, or on the gateway's own listener)
    server.py      the gateway's own listener (``gateway.listen``)
    openapi.py     the gateway's part of the admin OpenAPI document and ``GET /v1/tenants``
    hash_key_cmd.py  ``gochatd gateway hash-key``
"""
