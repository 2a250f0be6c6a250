"""/metrics and traces (rag/telemetry.py) over a real socket: what a scrape shows after searches, an
answer and a bad path, who may scrape, and the spans of one search (the SDK's in-memory exporter)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client.parser import text_string_to_metric_families

from rag import telemetry
from rag.api import create_app
from rag.service import KnowledgeService
from rag.settings import Settings

from ..support.api_support import STARTER_QUESTION, LiveServer, one_page_store
from ..support.otlp import OtlpReceiver

QUESTION = STARTER_QUESTION


class World:
    def __init__(self, url: str, svc: KnowledgeService, token: str, node_id: str) -> None:
        self.url, self.svc, self.token, self.node_id = url, svc, token, node_id

    def post(self, path: str, body: dict, **headers: str) -> httpx.Response:
        return httpx.post(f"{self.url}{path}", json=body, timeout=120,
                          headers={"Authorization": f"Bearer {self.token}", **headers})


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[World]:
    home = tmp_path_factory.mktemp("telemetry") / "home"
    with KnowledgeService(Settings(home=home)) as svc:
        node_id, token = one_page_store(svc)
        with LiveServer(svc) as server:
            yield World(server.url, svc, token, node_id)


def samples(text: str) -> dict[tuple[str, tuple], float]:
    """Prometheus' text format read with its own parser: (name, sorted labels) to value."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def scrape(world: World) -> dict[tuple[str, tuple], float]:
    response = httpx.get(f"{world.url}/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    return samples(response.text)


def test_a_scrape_counts_requests_by_route_stages_and_answers_by_outcome(world: World) -> None:
    before = scrape(world)
    for _ in range(3):
        assert world.post("/v1/search", {"query": QUESTION}).status_code == 200
    assert world.post("/v1/ask", {"query": QUESTION}).status_code == 200
    assert world.post("/v1/ask", {"query": "What is the boiling point of mercury on Venus?"}).status_code == 200
    assert httpx.get(f"{world.url}/v1/documents/{world.node_id}/nope").status_code == 404
    raw = httpx.get(f"{world.url}/metrics").text
    after = samples(raw)

    def grew(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0.0) - before.get(key, 0.0)

    assert grew("rag_http_requests_total", method="POST", route="/v1/search", status="200") == 3
    assert grew("rag_http_requests_total", method="POST", route="/v1/ask", status="200") == 2
    assert grew("rag_http_requests_total", method="GET", route="unmatched", status="404") == 1
    assert grew("rag_http_request_duration_seconds_count", method="POST", route="/v1/search") == 3
    for stage, lane in (("retrieve", ""), ("embed", ""), ("fuse", ""), ("lane", "vector"), ("lane", "text")):
        assert grew("rag_stage_duration_seconds_count", stage=stage, lane=lane) >= 3, (stage, lane)
    assert grew("rag_stage_duration_seconds_count", stage="synthesize", lane="") == 2
    answered = grew("rag_answers_total", synthesizer="extractive", outcome="answered")
    declined = sum(v - before.get(k, 0.0) for k, v in after.items()
                   if k[0] == "rag_answers_total" and ("outcome", "answered") not in k[1])
    assert (answered, declined) == (1, 1)  # the question about Venus is declined, by a named reason
    assert after[("rag_stage_duration_seconds_count", (("lane", ""), ("stage", "publish")))] >= 1
    assert after[("rag_publish_queue_depth", ())] == 0 and after[("rag_publish_queue_oldest_seconds", ())] == 0
    assert after[("rag_embedding_batches_total", (("kind", "query"),))] >= 5
    # No query, answer, document id or token in any label or value.
    for secret in (QUESTION, "annual leave", "mercury", world.node_id, world.token):
        assert secret not in raw


def test_metrics_need_their_own_token_when_one_is_set(tmp_path) -> None:
    settings = Settings(home=tmp_path / "home", telemetry={"metrics_token": "scrape-secret-1"})
    with KnowledgeService(settings) as svc, LiveServer(svc) as server:
        assert httpx.get(f"{server.url}/metrics").status_code == 403  # loopback is not enough then
        wrong = httpx.get(f"{server.url}/metrics", headers={"Authorization": "Bearer scrape-secret-2"})
        assert wrong.status_code == 403 and wrong.json()["error"]["code"] == "metrics_forbidden"
        right = httpx.get(f"{server.url}/metrics", headers={"Authorization": "Bearer scrape-secret-1"})
        assert right.status_code == 200 and "rag_http_requests_total" in right.text


def test_without_a_token_only_this_machine_may_scrape(world: World) -> None:
    with TestClient(create_app(service=world.svc)) as client:  # its client address is "testclient"
        refused = client.get("/metrics")
    assert refused.status_code == 403 and "rag_" not in refused.text


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(telemetry, "tracer", provider.get_tracer("rag"))
    monkeypatch.setattr(telemetry, "tracing", True)
    return exporter


def test_a_search_is_one_trace_of_its_stages_without_its_text(world: World, spans: InMemorySpanExporter) -> None:
    response = world.post("/v1/search", {"query": QUESTION}, **{"X-Request-ID": "trace-me-1"})
    assert response.status_code == 200
    finished = spans.get_finished_spans()
    (root,) = [s for s in finished if s.kind == SpanKind.SERVER]
    assert root.name == "POST /v1/search" and root.parent is None
    assert dict(root.attributes) == {"http.request.method": "POST", "http.route": "/v1/search",
                                     "http.response.status_code": 200, "rag.request_id": "trace-me-1"}
    inner = [s for s in finished if s is not root]
    assert {s.context.trace_id for s in inner} == {root.context.trace_id}  # the embedding thread's too
    names = sorted((s.name, s.attributes.get("rag.lane", "")) for s in inner)
    assert {("rag.retrieve", ""), ("rag.embed", ""), ("rag.fuse", ""), ("rag.lane", "vector"),
            ("rag.lane", "text")} <= set(names)
    retrieve = next(s for s in inner if s.name == "rag.retrieve")
    assert retrieve.parent.span_id == root.context.span_id
    for span in finished:
        assert not any(QUESTION in str(value) or "annual" in str(value) for value in span.attributes.values())


def test_off_counts_and_traces_nothing(world: World, spans: InMemorySpanExporter,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(telemetry, "enabled", False)
    before = scrape(world)
    assert world.post("/v1/search", {"query": QUESTION}).status_code == 200
    after = scrape(world)
    key = ("rag_http_requests_total", (("method", "POST"), ("route", "/v1/search"), ("status", "200")))
    assert after.get(key) == before.get(key) and not spans.get_finished_spans()


def test_rag_serve_exports_its_spans_by_otlp_when_an_endpoint_is_set(tmp_path) -> None:
    import os
    import signal
    import subprocess
    import sys

    from ..support.processes import free_port, wait_for_health

    receiver = OtlpReceiver()
    home = tmp_path / "home"
    with KnowledgeService(Settings(home=home)) as svc:
        svc.ensure_workspace("default")
        token, _ = svc.create_token("default", "viewer", [], "all")
    port = free_port()
    env = {**os.environ, "RAG_HOME": str(home), "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
           "OTEL_BSP_SCHEDULE_DELAY": "100"}
    server = subprocess.Popen([sys.executable, "-m", "rag.cli", "serve", "--port", str(port)], env=env, text=True,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for_health(url, server, lambda: server.communicate()[1])
        response = httpx.post(f"{url}/v1/search", json={"query": QUESTION}, headers={
            "Authorization": f"Bearer {token}", "X-Request-ID": "exported-1"})
        assert response.status_code == 200
    finally:
        server.send_signal(signal.SIGINT)  # the exporter sends what it holds as the process ends
        server.communicate(timeout=120)
        receiver.server.shutdown()
    names = {name for name, _ in receiver.spans}
    assert {"POST /v1/search", "rag.retrieve", "rag.lane", "rag.fuse"} <= names
    assert not [name for name in names if name.startswith("fastapi")]  # FastAPI's own telemetry is off
    (search,) = [attributes for name, attributes in receiver.spans if name == "POST /v1/search"]
    assert "exported-1" in search["rag.request_id"] and "/v1/search" in search["http.route"]
    assert not any(QUESTION in value for _, attributes in receiver.spans for value in attributes.values())
