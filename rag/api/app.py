"""The FastAPI app: one KnowledgeService per process, the routers, the error mapping, the limits,
and the MCP server's streamable-HTTP app at /mcp when rag.mcp provides one.

Concurrency: FastAPI runs the (plain, blocking) endpoints in its threadpool, and searches,
extractive answers and token checks run on a few compute threads of their own
(rag/api/compute.py), so calls reach the one service from many threads at once. That is safe:
every call opens its own SQLAlchemy session, the local embedder serialises its torch calls behind
a lock, the keyword index serialises its writers, and publishing runs in the service's single
background thread. What is not safe is the
lazy construction of the engines (`cached_property` has no lock in Python 3.12+): two threads could
each load the embedding model. So the lifespan builds them all once, before the first request.
"""

from __future__ import annotations

import gc
import signal
import threading
import logging
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any, AsyncIterator, Callable

import anyio.to_thread
from fastapi import Depends, FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

import rag
from rag import telemetry
from rag.api.arguments import required_as_declared
from rag.api.cors import Cors
from rag.api.observe import Observe
from rag.api.request_id import RequestId
from rag.api.errors import CatchAll, install_error_handlers
from rag.api.limits import BodyLimit, known_query_only
from rag.ingest.sandbox import stop_parsing
from rag.api.routes import (
    activity, chat, health, knowledge, local, metrics, nodes, review, sources, tokens, uploads, versions,
)
from rag.service import KnowledgeService
from rag.shutdown import STOPPING
from rag.settings import LOCAL_EMBED_MODEL, Settings

log = logging.getLogger("rag.api")

DESCRIPTION = """A knowledge base that answers with citations.

Every `/v1` endpoint takes a bearer token (`Authorization: Bearer <token>`, made with
`rag token create`). Errors have one shape, OpenAI's: `{"error": {"message", "type", "code", "param"}}`.
See docs/api.md for every endpoint and its rules."""

McpFactory = Callable[[KnowledgeService], "tuple[ASGIApp, Callable[[], AbstractAsyncContextManager[Any]]]"]


def _mcp_factory() -> McpFactory | None:
    """rag.mcp.http.mcp_http, when the MCP server is installed; None when it is not there (yet).
    Any other import error is a broken module and is raised."""
    try:
        from rag.mcp.http import mcp_http
    except ModuleNotFoundError as exc:
        if exc.name in ("rag.mcp", "rag.mcp.http"):
            return None
        raise
    return mcp_http


class _Deferred:
    """An ASGI app mounted now and built in the lifespan, where the service it needs exists."""

    def __init__(self) -> None:
        self.app: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.app is None:  # Starlette only routes requests once the lifespan has started
            raise RuntimeError("the MCP app was not started")
        await self.app(scope, receive, send)


def warm_up(svc: KnowledgeService) -> bool:
    """Build every engine now, in one thread (see the module's docstring); True when they all
    answered. A remote engine that is down is not fatal: /healthz reports it, the calls that need it
    say so, and it is built on first use once it is back."""
    try:
        svc.embedder.embed_query("warm up")
        svc.vector, svc.retriever, svc.chat_model, svc.synthesizer  # noqa: B018 - cached on first access
        return True
    except Exception:  # noqa: BLE001 - the server still serves what does not need the engine
        log.exception("an engine did not answer at start-up")
        return False


def serving_process(settings: Settings) -> None:
    """Process defaults for a process that only serves (`rag serve`): the local embedding model runs
    on one torch thread. Calls reach it concurrently and take turns behind its lock, so a second
    intra-op thread buys little; on a busy 2-core machine it costs a lot, since each of the model's
    parallel regions waits for a thread the OS has descheduled: on the handbook, warm search p50
    over HTTP was 514 ms with two threads and 34 ms with one, and throughput with 8 clients rose
    (benchmarks/http_latency.py). Not done in create_app: tests share their process. On ONNX Runtime
    (the default backend) every call runs on one thread, queries side by side, and a publish's
    document batches run one text per call on every core (RAG_EMBED__THREADS, 0: one per core),
    taking turns with the queries (`Turns`); on torch (RAG_EMBED__BULK_BACKEND) they get one
    thread unless RAG_EMBED__THREADS says otherwise."""
    if settings.embed_model != LOCAL_EMBED_MODEL:
        return
    if settings.embed.backend == "torch":
        import torch

        torch.set_num_threads(1)
    elif not settings.embed.threads and settings.embed.bulk_backend == "torch":
        settings.embed.threads = 1


def create_worker_app() -> FastAPI:
    """One of `rag serve --workers N`'s processes: its own service on the shared engines."""
    from rag.sources.addresses import serving_from_environment

    settings = Settings()
    serving_process(settings)
    serving_from_environment()  # what `rag serve` listens on: no source reaches it
    return create_app(settings, serving=True)


def offline_docs(app: FastAPI) -> None:
    """/docs from the Swagger UI files of the swagger-ui-bundle package, served here: FastAPI's own
    page loads them from a CDN, and is blank on a machine without internet."""
    from fastapi.openapi.docs import get_swagger_ui_html
    from fastapi.staticfiles import StaticFiles
    from swagger_ui_bundle import swagger_ui_path

    app.mount("/docs/assets", StaticFiles(directory=str(swagger_ui_path)), name="swagger-ui")

    @app.get("/docs", include_in_schema=False)
    def docs() -> Any:
        return get_swagger_ui_html(
            openapi_url="/openapi.json", title="rag - Swagger UI",
            swagger_js_url="/docs/assets/swagger-ui-bundle.js", swagger_css_url="/docs/assets/swagger-ui.css",
            swagger_favicon_url="/docs/assets/favicon-32x32.png",
        )


def stop_parsing_on_signals(app: FastAPI) -> None:
    """`rag serve`: SIGTERM and SIGINT also kill the parse workers, at once, before uvicorn waits for
    the requests in progress to end: an upload waiting on a parse then fails (503) instead of
    holding the shutdown for as long as the parse takes (issue 27). /readyz answers 503 from then
    on, and event streams end with a last event saying the server stops (rag/api/sse.py). Chained in front of the handlers uvicorn installed before the lifespan started, from the
    loop's (main) thread."""
    for signum in (signal.SIGTERM, signal.SIGINT):
        previous = signal.getsignal(signum)
        if not callable(previous):
            continue

        def handler(number: int, frame: Any, previous: Callable[..., Any] = previous) -> None:
            app.state.stopping = True
            STOPPING.set()  # event streams end with a last event (rag/api/sse.py)
            # A thread: the handler interrupts the main thread, which may hold the pool's lock.
            threading.Thread(target=stop_parsing, name="rag-stop-parsing", daemon=True).start()
            previous(number, frame)

        signal.signal(signum, handler)


def create_app(settings: Settings | None = None, *, service: KnowledgeService | None = None,
               local_secret: str | None = None, serving: bool = False) -> FastAPI:
    """The app. With `service`, the caller owns it (`rag serve`, tests); without, the lifespan opens
    one on `settings` (default: the environment) as the store's writer, and closes it at shutdown.
    `local_secret`: the secret `rag serve` wrote in RAG_HOME, which lets the local CLI have this
    server run its commands (/local, rag/api/routes/local.py); without it, /local refuses all.
    `serving`: the process only serves (`rag serve`): once started, what start-up made is frozen
    out of the garbage collector's sight (not in tests, which share their process)."""
    mcp_http = _mcp_factory()
    mcp_app = _Deferred() if mcp_http is not None else None

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            svc = service
            if svc is None:  # a worker of `rag serve --workers N`, or an app server's own
                from rag.logs import configure_serving
                from rag.store.home import private_umask

                private_umask()  # what this process creates (logs, caches) is the owner's alone
                config = settings or Settings()
                configure_serving(config)
                svc = await anyio.to_thread.run_sync(lambda: KnowledgeService(config, writer=True))
                stack.push_async_callback(anyio.to_thread.run_sync, svc.close)
            app.state.model_ready = await anyio.to_thread.run_sync(warm_up, svc)
            if serving:
                # What start-up made (modules, the models, the engines) lives as long as the process:
                # moved out of the collector's sight, so that its full collections under load no
                # longer walk it (`python -m benchmarks.scale_out --only embedded` measures the p95).
                gc.collect()
                gc.freeze()
            app.state.service = svc
            if serving:
                stop_parsing_on_signals(app)
            if (serving or service is None) and svc.settings.sources.scheduler:
                # `rag serve` (and each of its workers) syncs the sources that are due; leases keep it
                # to one sync per source across them (rag/service/sources/schedule.py).
                scheduler = svc.start_scheduler()
                stack.callback(scheduler.stop)
            if mcp_http is not None and mcp_app is not None:
                mcp_app.app, run = mcp_http(svc)
                await stack.enter_async_context(run())  # a mounted app's own lifespan never runs
            yield
            app.state.service = None

    # FastAPI's own OpenTelemetry is off: rag/api/observe.py traces each request by its route's
    # template, and FastAPI's would export raw paths, and validation errors with their input (a
    # query's text) as log records.
    app = FastAPI(title="rag", version=rag.__version__, description=DESCRIPTION, lifespan=lifespan,
                  dependencies=[Depends(known_query_only)], docs_url=None, redoc_url=None,
                  telemetry={"tracing": False, "metrics": False, "logs": False, "operation_spans": False})
    app.state.local_secret = local_secret
    app.state.stopping = False  # set by SIGTERM (`rag serve`): /readyz then answers 503
    install_error_handlers(app)
    offline_docs(app)
    for module in (health, metrics, knowledge, chat, nodes, versions, review, uploads, activity, tokens, sources, local):
        app.include_router(module.router)
    app.openapi = lambda: required_as_declared(FastAPI.openapi(app))  # type: ignore[method-assign]
    if mcp_app is not None:
        # `/mcp` itself (what MCP clients are given) and anything below it; the MCP app answers
        # on any path, and a bare mount would redirect `/mcp` to `/mcp/` first.
        app.add_route("/mcp", mcp_app, include_in_schema=False)
        app.mount("/mcp", mcp_app)
    from rag.web import install as install_editor

    install_editor(app)  # the knowledge base editor at `/` (rag/web/), after every other route
    app_settings = service.settings if service is not None else settings or Settings()
    telemetry.configure(app_settings)
    token = app_settings.telemetry.metrics_token
    app.state.metrics_token = token.get_secret_value() if token is not None else None
    app.add_middleware(BodyLimit, paths=uploads.body_limits(app_settings))
    app.add_middleware(CatchAll)
    # Outside CatchAll: preflights end here, and a 500 from CatchAll still carries the CORS
    # headers a page needs to read it.
    app.add_middleware(Cors, origins=app_settings.allowed_origins)
    app.add_middleware(Observe)  # counted and traced, a preflight too (rag/telemetry.py)
    app.add_middleware(RequestId)  # around all: every answer, a refused preflight too, has its id
    return app
