"""The dashboard's files: the page and everything under /static/ are served without the
admin token (they hold no data), only for reads, with a Content-Security-Policy on the page
that keeps it to its own files and this API; nothing outside admin/static/ is reachable."""

from __future__ import annotations

import re

from tests.admin.helpers import Stack, admin_worker, assert_json_error

TOKEN = "adm1n-T0ken-for-tests"


async def test_the_page_and_its_files_are_served_without_the_token(sqlite_stack: Stack) -> None:
    async with admin_worker(sqlite_stack, admin_token=TOKEN) as admin:
        page = await admin.http.get("/")
        assert page.status_code == 200
        csp = page.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "connect-src 'self'" in csp
        assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
        assert "<script" not in re.sub(r'<script type="module" src="static/[a-z/]+\.js">', "",
                                       page.text), "no inline script: the CSP would block it"
        files = re.findall(r'(?:src|href)="(static/[^"]+)"', page.text)
        assert "static/js/app.js" in files and "static/style.css" in files
        for path in [*files, "static/js/core.js", "static/js/lists.js", "static/js/charts.js"]:
            response = await admin.http.get("/" + path)
            assert response.status_code == 200, (path, response.text[:200])
            kind = "javascript" if path.endswith(".js") else "css"
            assert kind in response.headers["content-type"], path

        assert (await admin.http.get("/static/js/missing.js")).status_code == 404
        for escape in ("/static/../app.py", "/static/..%2fapp.py", "/static/%2e%2e/api.py"):
            response = await admin.http.get(escape)
            assert response.status_code == 404 or "Bearer" in response.headers.get(
                "www-authenticate", ""), (escape, response.status_code)
            assert "def " not in response.text
        # Only reads are open: anything else there needs the token like every route.
        refused = await admin.http.post("/static/js/app.js")
        assert assert_json_error(refused, 401, "POST /static") == "unauthorized"
