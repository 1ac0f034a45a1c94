"""``import gochatd`` is a producer's import: it loads neither the HTTP client (httpx) nor
the YAML parser, nor the test helpers or a feature's config parser, until one is used
(issue 24 item 4). Each case runs in a fresh interpreter: this process has long loaded them."""

from __future__ import annotations

import json
import subprocess
import sys

#: Loaded only when used: by an HTTP handler or the webhook provider, a config file, a test,
#: a periodic declaration, the daemon.
NOT_ON_IMPORT = (
    "httpx", "yaml", "quart", "hypercorn", "trio_asyncio", "prometheus_client",
    "gochatd.testing", "gochatd.config.settings", "gochatd.periodic_jobs.specs",
    "gochatd.worker.http_handlers", "gochatd.outbox.channels", "gochatd.gateway.settings",
    "gochatd.worker.service",
)


def _loaded_after(code: str) -> set[str]:
    script = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=60, check=True)
    return set(json.loads(result.stdout))


def test_import_gochatd_loads_none_of_them() -> None:
    loaded = _loaded_after("import gochatd")
    assert "gochatd.client.client" in loaded  # the probe sees what the import loads
    assert sorted(loaded & set(NOT_ON_IMPORT)) == []


def test_the_lazy_names_load_on_first_use() -> None:
    loaded = _loaded_after(
        "import gochatd\n"
        "assert gochatd.testing.run_job is not None\n"
        "assert callable(gochatd.periodic)\n"
        "from gochatd import periodic, testing\n"
        "assert testing is gochatd.testing and periodic is gochatd.periodic\n")
    assert {"gochatd.testing", "gochatd.periodic_jobs.specs"} <= loaded


def test_a_feature_key_is_parsed_by_its_feature() -> None:
    loaded = _loaded_after(
        "from gochatd.config.fields import FIELDS_BY_KEY\n"
        "value = FIELDS_BY_KEY['handlers.http'].coerce('{\"a:b\": {\"url\": \"http://127.0.0.1:1/\"}}')\n"
        "assert list(value) == ['a:b'], value\n")
    assert "gochatd.worker.http_handlers" in loaded


def test_an_unknown_name_is_an_attribute_error() -> None:
    loaded = _loaded_after(
        "import gochatd\n"
        "try:\n    gochatd.no_such_name\nexcept AttributeError as exc:\n"
        "    assert 'no_such_name' in str(exc)\nelse:\n    raise SystemExit('no error')\n")
    assert "gochatd.testing" not in loaded
