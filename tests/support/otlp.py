"""A loopback OTLP/HTTP trace receiver: what `rag serve` exports, decoded with the OTLP protobufs
(or, for a benchmark, only counted, so the receiver's own work stays small)."""

from __future__ import annotations

import http.server
import threading


class OtlpReceiver:
    def __init__(self, decode: bool = True) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        self.spans: list[tuple[str, dict]] = []
        self.posts = 0
        self.bytes = 0
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.posts += 1
                receiver.bytes += len(body)
                if decode:
                    request = ExportTraceServiceRequest.FromString(body)
                    for resource in request.resource_spans:
                        for scope in resource.scope_spans:
                            for span in scope.spans:
                                receiver.spans.append((span.name, {a.key: str(a.value) for a in span.attributes}))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def __enter__(self) -> "OtlpReceiver":
        return self

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __exit__(self, *exc: object) -> None:
        self.close()
