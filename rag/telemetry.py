"""Metrics (Prometheus) and traces (OpenTelemetry) of the service (issue 31).

**Metrics**, served at `GET /metrics` in Prometheus' text format (rag/api/routes/metrics.py):

- `rag_http_requests_total{method, route, status}` and `rag_http_request_duration_seconds{method,
  route}`: `route` is the route's template (`/v1/documents/{node_id}`), never the path itself;
- `rag_stage_duration_seconds{stage, lane}`: a search's and an answer's stages: `embed` (the
  query's vector), `lane` (each lane's search, `lane` naming it), `fuse` (fusion and reranking),
  `retrieve` (all of a retrieval), `synthesize` (the answer from the excerpts), `model` (one call
  of the language model), `publish` (one group of versions written to the index);
- `rag_answers_total{synthesizer, outcome}`: `answered`, or the reason it was declined
  (rag/synthesize/declines.py);
- `rag_model_calls_total{model, outcome}` (`ok`, `error`), `rag_model_retries_total{model}`,
  `rag_model_fallbacks_total{model}` (a fallback model was called), `rag_model_tokens_total{model,
  kind}` (`prompt`, `completion`, as the provider reports them);
- `rag_embedding_batches_total{kind}` and `rag_embedding_texts_total{kind}` (`documents`, `query`);
- `rag_source_syncs_total{source, outcome}` (`ok`, `partial`, `failed`, `stopped`);
- `rag_errors_total{part}`: a store or lane error met while serving (`store`, a lane's name);
- `rag_compute_gave_way_seconds_total`: what searches of busy callers waited between their stages
  for a lighter caller's (rag/turns.py);
- `rag_parse_queue_length`: files waiting for a parse worker (rag/ingest/sandbox.py), and
  `rag_parse_wait_seconds{caller}`: how long each waited, by the kind of caller (`upload`,
  `source`, `ingest`, `other`: never the token, workspace or source);
- `rag_publish_queue_depth` and `rag_publish_queue_oldest_seconds`, read from the store when scraped.

No label holds a query, an answer, a document's name or id, or a token: only names the code
chose, the route templates, model and source names the operator configured.

`rag serve --workers N` runs prometheus_client's multi-process mode: every worker writes its
counts under `PROMETHEUS_MULTIPROC_DIR` (set by `rag serve`, emptied at its start), and whichever
worker answers a scrape sums them all.

**Traces**: a span per request (`POST /v1/search`) and per stage above (`rag.lane`, …), exported
by OTLP when `OTEL_EXPORTER_OTLP_ENDPOINT` is set (with the SDK's other `OTEL_*` variables), off
otherwise. Spans carry the same labels, and never a query, an answer text or a secret.

`RAG_TELEMETRY__ENABLED=false` turns both off (nothing counted, no span made): the benchmark
`python -m benchmarks.http_latency --telemetry on,off` measures what they cost.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from opentelemetry import trace
from prometheus_client import Counter, Gauge, Histogram, disable_created_metrics

log = logging.getLogger("rag.telemetry")
T = TypeVar("T")

disable_created_metrics()  # no `_created` series beside each count: half the scrape, nothing a dashboard reads
tracer = trace.get_tracer("rag")
enabled = True  # RAG_TELEMETRY__ENABLED, set by configure()
tracing = False  # spans are made only once something takes them: export_traces() (a test's own tracer)

_SECONDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

HTTP_REQUESTS = Counter("rag_http_requests", "HTTP requests answered, by route template and status.",
                        ["method", "route", "status"])
HTTP_SECONDS = Histogram("rag_http_request_duration_seconds", "Time to answer an HTTP request (to its last byte).",
                         ["method", "route"], buckets=_SECONDS)
STAGE_SECONDS = Histogram("rag_stage_duration_seconds", "Time of a stage of a search, an answer or a publish.",
                          ["stage", "lane"], buckets=_SECONDS)
ANSWERS = Counter("rag_answers", "Answers given, by outcome: answered, or why declined.", ["synthesizer", "outcome"])
MODEL_CALLS = Counter("rag_model_calls", "Calls of the language model, by outcome.", ["model", "outcome"])
MODEL_RETRIES = Counter("rag_model_retries", "Calls of the language model made again after a transient error.",
                        ["model"])
MODEL_FALLBACKS = Counter("rag_model_fallbacks", "Fallback models called after the main one failed.", ["model"])
MODEL_TOKENS = Counter("rag_model_tokens", "Tokens the language model's provider reported.", ["model", "kind"])
EMBED_BATCHES = Counter("rag_embedding_batches", "Batches the embedding model computed.", ["kind"])
EMBED_TEXTS = Counter("rag_embedding_texts", "Texts the embedding model computed (cache misses).", ["kind"])
SYNCS = Counter("rag_source_syncs", "Source syncs ended, by source and outcome.", ["source", "outcome"])
ERRORS = Counter("rag_errors", "Store and lane errors met while serving.", ["part"])
PARSE_QUEUED = Gauge("rag_parse_queue_length", "Files waiting for a parse worker (rag/ingest/sandbox.py).",
                     multiprocess_mode="livesum")
PARSE_WAIT_SECONDS = Histogram("rag_parse_wait_seconds", "Time a file waited for a parse worker, by the kind of "
                               "caller: upload, source, ingest, other.", ["caller"], buckets=_SECONDS + (120.0, 300.0))
GAVE_WAY = Counter("rag_compute_gave_way_seconds", "Seconds searches waited between their stages for a lighter "
                   "caller's search (rag/turns.py).")


def configure(settings: Any) -> None:
    """Telemetry on or off for this process (`settings.telemetry.enabled`), and the OTLP
    exporter when `OTEL_EXPORTER_OTLP_ENDPOINT` is set (once per process)."""
    global enabled
    enabled = settings.telemetry.enabled
    if enabled and os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        export_traces()


_exporting = False


def export_traces() -> None:
    """A tracer provider exporting by OTLP, over HTTP (`OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf`,
    the default) or gRPC (`grpc`), in batches from a thread of its own."""
    global _exporting, tracing
    if _exporting:
        return
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    if os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf") == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "rag")})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _exporting = tracing = True
    log.info("exporting traces by OTLP to %s", os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"])


@contextmanager
def stage(name: str, lane: str = "") -> Iterator[None]:
    """Time a stage (a histogram observation) and make it a span under the current one."""
    if not enabled:
        yield
        return
    started = time.perf_counter()
    try:
        if tracing:
            with tracer.start_as_current_span(f"rag.{name}", attributes={"rag.lane": lane} if lane else None):
                yield
        else:  # no span nobody takes: a search's stages cost only their clock
            yield
    finally:
        STAGE_SECONDS.labels(name, lane).observe(time.perf_counter() - started)


def timed(name: str, call: Callable[..., T]) -> Callable[..., T]:
    """`call`, each of its calls a stage."""
    def run(*args: Any, **kwargs: Any) -> T:
        with stage(name):
            return call(*args, **kwargs)
    return run


def count(counter: Counter, *labels: str, amount: float = 1) -> None:
    if enabled:
        counter.labels(*labels).inc(amount)
