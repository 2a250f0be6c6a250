"""`rag serve` as a user runs it: a real process on a real port, stopped with Ctrl-C."""

from __future__ import annotations

import signal
import time

import httpx

from ..support.api_support import build_home
from ..support.processes import LEAVE_DOC, free_port
from ..support.processes import rag_process as rag


def test_rag_serve_serves_until_interrupted_and_a_second_one_is_refused(tmp_path):
    home = tmp_path / "home"
    pages = build_home(tmp_path)
    assert rag(home, "ingest", str(pages)).wait(600) == 0
    made = rag(home, "token", "create", "--workspace", "default", "--role", "viewer")
    secret = made.communicate(timeout=120)[0].strip()
    port = free_port()
    server = rag(home, "serve", "--port", str(port))
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, server.communicate()[1]
            try:
                if httpx.get(f"{url}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "rag serve did not start"
                time.sleep(0.2)
        found = httpx.post(f"{url}/v1/search", json={"query": "annual leave", "limit": 1},
                           headers={"Authorization": f"Bearer {secret}"}, timeout=60)
        assert found.json()["results"][0]["document_id"] == LEAVE_DOC
        # A token in the URL is refused, and neither it nor a name search's words reach the access log.
        leaked = httpx.post(f"{url}/v1/search?token={secret}", json={"query": "annual leave"}, timeout=60)
        assert leaked.status_code == 422  # docs/api.md: a token goes in the Authorization header only
        named = httpx.get(f"{url}/v1/nodes/search", params={"query": "zanzibarquery"},
                          headers={"Authorization": f"Bearer {secret}"}, timeout=60)
        assert named.status_code in (200, 403)
        second = rag(home, "serve", "--port", str(free_port()))
        out, err = second.communicate(timeout=120)
        assert second.returncode == 3 and f"in use by process {server.pid}" in err and "Traceback" not in err
    finally:
        server.send_signal(signal.SIGINT)
        out, err = server.communicate(timeout=120)
    assert server.returncode == 0, err
    assert f"serving {home} on http://127.0.0.1:{port}" in err and "Traceback" not in err
    logged = out + err
    assert '"POST /v1/search?… HTTP/1.1" 422' in logged and '"GET /v1/nodes/search?… HTTP/1.1"' in logged
    assert secret not in logged and secret[4:] not in logged and "zanzibarquery" not in logged
