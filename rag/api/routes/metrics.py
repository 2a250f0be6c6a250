"""GET /metrics: the service's metrics in Prometheus' text format (what they are: rag/telemetry.py).

Who may read them is its own setting, apart from the API's tokens: with
`RAG_TELEMETRY__METRICS_TOKEN` set, a scrape sends `Authorization: Bearer <that token>` (a
Prometheus `bearer_token`, a ServiceMonitor's `bearerTokenSecret`); without it, only a client on
this machine (a loopback address) is answered. Anyone else gets 403 and nothing of the metrics.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from datetime import datetime, timezone

from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from sqlalchemy import func, select

from rag import telemetry
from rag.api.auth import get_service
from rag.api.errors import error_response
from rag.service import KnowledgeService
from rag.store.models import PUBLISHING, DocumentVersion

router = APIRouter(tags=["health"])

FORBIDDEN = ("metrics_forbidden", "the metrics need their own token (RAG_TELEMETRY__METRICS_TOKEN), or a client on "
             "this machine when none is set")


class PublishQueue:
    """The publish queue, read from the store when scraped: it is the store's, not one process's."""

    def __init__(self, svc: KnowledgeService) -> None:
        self.svc = svc

    def collect(self):  # noqa: ANN201 - prometheus_client's collector protocol
        depth = GaugeMetricFamily("rag_publish_queue_depth", "Versions waiting to be published.")
        oldest = GaugeMetricFamily("rag_publish_queue_oldest_seconds",
                                   "How long the oldest version waiting to be published has waited.")
        try:
            with self.svc.db.session() as session:
                waiting, since = session.execute(
                    select(func.count(), func.min(DocumentVersion.updated_at))
                    .where(DocumentVersion.status == PUBLISHING)).one()
        except Exception:  # noqa: BLE001 - a store that is down: the other metrics still answer
            telemetry.count(telemetry.ERRORS, "store")
            return []
        if since is not None and since.tzinfo is None:  # SQLite keeps no zone: the store writes UTC
            since = since.replace(tzinfo=timezone.utc)
        depth.add_metric([], waiting)
        oldest.add_metric([], (datetime.now(timezone.utc) - since).total_seconds() if since else 0.0)
        return [depth, oldest]


def _allowed(request: Request) -> bool:
    token = request.app.state.metrics_token
    if token:
        given = request.headers.get("authorization", "")
        return hmac.compare_digest(given.encode(), f"Bearer {token}".encode())
    client = request.client.host if request.client else ""
    try:
        return ipaddress.ip_address(client).is_loopback
    except ValueError:
        return False


@router.get("/metrics", include_in_schema=False)
def metrics(request: Request) -> Response:
    if not _allowed(request):
        return error_response(403, FORBIDDEN[1], FORBIDDEN[0])
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):  # `rag serve --workers N`: every worker's counts
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        body = generate_latest(registry)
    else:
        body = generate_latest(REGISTRY)
    queue = CollectorRegistry()
    queue.register(PublishQueue(get_service(request)))
    return Response(body + generate_latest(queue), media_type=CONTENT_TYPE_LATEST)
