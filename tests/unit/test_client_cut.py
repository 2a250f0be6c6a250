"""The local CLI's relay (rag/client.py): a command's stream that ends without its end marker or
an error was cut (the server stopped in the middle), and the CLI says so instead of failing on
a missing result."""

from __future__ import annotations

import http.server
import threading

import pytest

from rag.client import CUT, ServerError, call


def served(body: bytes):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-ndjson")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.mark.parametrize(("body", "events"), [
    (b'{"progress": ["reading", 1, 4]}\n{"summary": {}}\n{"end": true}\n', [{"progress": ["reading", 1, 4]},
                                                                            {"summary": {}}]),
    (b'{"progress": ["reading", 1, 4]}\n', None),  # cut after a progress report
    (b"", None),
])
def test_a_stream_without_its_end_is_a_clear_error(body: bytes, events) -> None:
    server, url = served(body)
    try:
        if events is not None:
            assert list(call(url, "secret", "ingest", {})) == events
        else:
            with pytest.raises(ServerError) as cut:
                list(call(url, "secret", "ingest", {}))
            assert (cut.value.message, cut.value.exit_code) == (CUT, 3)
    finally:
        server.shutdown()
