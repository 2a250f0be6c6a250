"""The `rag` command: ingest, search, ask, serve and mcp here; token, export and import in
rag/cli_admin.py; eval in rag/cli_eval.py; how every command runs (in a running server or here) in
rag/cli_run.py. The local CLI is the administrator of its RAG_HOME."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Optional

import typer

from rag.cli_admin import export_store, import_store, token_app
from rag.cli_config import config_app
from rag.cli_sources import source_app
from rag.cli_run import _error, _one, _progress_bar, _settings, out, run, service
from rag.logs import configure
from rag.store.home import private_umask
from rag.store.lock import announce_server, configured_home, running_server

app = typer.Typer(no_args_is_help=True, add_completion=False, help="A knowledge base that answers with citations.")


@app.callback()
def _private(
    config: Optional[Path] = typer.Option(
        None, "--config", metavar="PATH", show_default=False, envvar="RAG_CONFIG", show_envvar=True,
        help="A TOML file of settings (the environment's variables win over it); sets RAG_CONFIG for the command "
        "and the processes it starts (docs/deployment.md).",
    ),
) -> None:
    """Before every command: what it creates (in RAG_HOME, the embedding cache, exports) is the
    user's alone (rag/store/home.py); a configuration file or a secret's file that cannot be used
    stops it here (exit code 2), whether it runs here or in a running server."""
    private_umask()
    if config is not None:
        os.environ["RAG_CONFIG"] = str(config.expanduser().absolute())
    if _reads_files(os.environ):
        _settings()  # a clear one-line error and exit code 2, before the command looks for a server


def _reads_files(environ) -> bool:
    """Whether the settings read a file beside the environment: RAG_CONFIG, or a `_FILE` variable."""
    from rag.config_file import config_path

    names = [name.upper() for name in environ if name.upper().startswith("RAG_")]
    return any(name.endswith("_FILE") for name in names) or config_path(environ) is not None


@app.command()
def ingest(
    path: Path = typer.Argument(..., help="Directory of Markdown and text files to import."),
    workspace: str = typer.Option("default", "--workspace", "-w"),
    kb: str = typer.Option("default", "--kb", help="Knowledge base to import into (made if missing)."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Import a directory tree as folders and documents, and publish them. Run again, it changes only what changed."""
    with _progress_bar(json_out, "ingest") as progress:
        # The path as the server would read it too (it may run the command, in another directory).
        report = _one(run("ingest", True, progress, path=os.path.abspath(path), workspace=workspace, kb=kb))
    s = report["summary"]
    if json_out:
        payload = s | {
            "failures": [{"path": p, "error": m} for p, m in report["failed"]],
            "skips": [{"path": p, "reason": m} for p, m in report["skipped"]],
        }
        out().print_json(json.dumps(payload))
    else:
        from rich.table import Table

        table = Table(title=f"Ingested {path} into {s['knowledge_base']!r}")
        columns = ("added", "updated", "unchanged", "removed", "failed", "skipped", "chunks", "seconds")
        for column in columns:
            table.add_column(column, justify="right")
        table.add_row(*(str(s[c]) for c in columns))
        out().print(table)
        for rel, message in report["warnings"]:
            _error(f"{rel}: {message}", "warning")
        for rel, message in report["skipped"]:  # what was left out, and why: nothing is skipped silently
            _error(f"{rel}: {message}", "skipped")
        for rel, message in report["failed"]:
            _error(f"{rel}: {message}", "failed")
    if report["failed"]:
        raise typer.Exit(1)


@app.command()
def search(
    query: str = typer.Argument(..., help="What to look for."),
    limit: str = typer.Option("10", "--limit", "-n", help="Maximum results, 1 to 25 (clamped)."),
    kb: Optional[str] = typer.Option(None, "--kb", help="Search one knowledge base (default: all of them)."),
    workspace: str = typer.Option("default", "--workspace", "-w"),
    json_out: bool = typer.Option(False, "--json", help="Print the JSON result."),
) -> None:
    """Hybrid (vector + full-text) search over the published documents."""
    for result in run("search", False, query=query, limit=limit, kb=kb, workspace=workspace):
        if json_out:
            sys.stdout.write(json.dumps(result["payload"], ensure_ascii=False, indent=2) + "\n")
        else:
            sys.stdout.write(result["text"] + "\n")


@app.command()
def ask(
    question: str = typer.Argument(..., help="The question to answer."),
    kb: Optional[str] = typer.Option(None, "--kb", help="Answer from one knowledge base (default: all of them)."),
    workspace: str = typer.Option("default", "--workspace", "-w"),
    history: Optional[Path] = typer.Option(
        None, "--history", help='JSON file with the earlier conversation: [{"role": "user", "content": "…"}, …].'
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the JSON result."),
) -> None:
    """A cited answer from the published documents (a model's, or extractive when none is configured)."""
    messages = None
    if history is not None:
        try:
            messages = json.loads(history.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            _error(f"cannot read the conversation history {history}: {exc}")
            raise typer.Exit(2) from None
    events = run("ask", False, question=question, kb=kb, workspace=workspace, history=messages, json_out=json_out)
    for event in events:
        if "payload" in event:
            sys.stdout.write(json.dumps(event["payload"], ensure_ascii=False, indent=2) + "\n")
        elif "delta" in event:
            sys.stdout.write(event["delta"])
            sys.stdout.flush()
        elif "tail" in event:
            sys.stdout.write(event["tail"] + "\n")


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(8000, "--port", min=1, max=65535, help="Port to listen on."),
    workers: int = typer.Option(
        1, "--workers", min=1, max=64, envvar="RAG_WORKERS", show_envvar=True,
        help="Worker processes. More than one needs the scale-out deployment (RAG_DATABASE_URL and RAG_CHROMA_URL).",
    ),
) -> None:
    """Serve the HTTP API (OpenAPI at /docs; the MCP server at /mcp when installed) until Ctrl-C."""
    import uvicorn

    from rag.api import create_app
    from rag.api.access_log import log_config
    from rag.api.app import serving_process
    from rag.api.server import uvicorn_options
    from rag.first_token import first_run_token
    from rag.logs import configure_serving, serving_destination
    from rag.origins import bind_warning

    from rag.sources.addresses import serving as no_source_reaches

    settings = _settings()
    no_source_reaches(host, port)  # a source never fetches this API (/metrics included)
    configure_serving(settings)  # standard output (JSON lines) or the file, as RAG_LOG__TO says
    json_lines = serving_destination(settings) == ("stdout", True)
    if workers > 1 and settings.embedded:
        _error(
            "--workers above 1 needs the scale-out deployment: the embedded store (a SQLite file and embedded "
            "Chroma) belongs to one process. Set RAG_DATABASE_URL (PostgreSQL) and RAG_CHROMA_URL (a Chroma server)."
        )
        raise typer.Exit(2)
    # The service is opened here rather than in the app's lifespan so that a store held by another
    # process is the CLI's clear message and exit code 3, not a traceback from uvicorn's start-up.
    with service(writer=True, serving=workers == 1) as svc:
        # No person has a token yet: one for the local user, its secret in RAG_HOME/admin-token.
        first_run_token(svc, sys.stderr.write, lambda message: _error(message, "warning"))
        if (warning := bind_warning(host, svc.settings.allowed_hosts)) is not None:
            _error(warning, "warning")  # /mcp's Host check (rag/origins.py)
        # Deadlines for a request's head and body and a cap on open connections (rag/api/server.py).
        bounds, limits = uvicorn_options(svc.settings.http)
        sys.stderr.write(limits.describe())
        if workers > 1:
            # This process migrated the schema, resumed interrupted publishes and reconciled the
            # lanes; each worker opens its own service on the same engines.
            svc.close()
            shared_metrics(svc.settings.home)
            sys.stderr.write(f"serving {svc.settings.sqlalchemy_url.split('@')[-1]} with {workers} workers "
                             f"on http://{host}:{port}\n")
            uvicorn.run("rag.api.app:create_worker_app", factory=True, host=host, port=port, workers=workers,
                        log_config=log_config(json_lines), **bounds)
            return
        serving_process(svc.settings)
        # uvicorn stops gracefully on SIGTERM, then raises it again: exit then, closing the
        # service (and removing the lock's holder and secret files), as Ctrl-C does.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        # The local CLI's commands are then run here, beside the store (rag/client.py).
        secret = _announce(svc.settings.home, _local_url(host, port)) if svc.settings.embedded else None
        sys.stderr.write(f"serving {svc.settings.home} on http://{host}:{port}\n")
        uvicorn.run(create_app(service=svc, local_secret=secret, serving=True), host=host, port=port,
                    log_config=log_config(json_lines), **bounds)


def shared_metrics(home: Path) -> None:
    """`rag serve --workers N`: the workers' metrics in files of one folder, summed by whichever
    worker answers /metrics (prometheus_client's multi-process mode, rag/telemetry.py). The folder
    (PROMETHEUS_MULTIPROC_DIR, default RAG_HOME/metrics) is emptied first: counts of an earlier run
    would add up with this one's."""
    folder = Path(os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", str(home / "metrics")))
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    for old in folder.glob("*.db"):
        old.unlink()


def _local_url(host: str, port: int) -> str:
    """Where a local client reaches a server listening on `host`."""
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _announce(home: Path, url: str) -> str | None:
    """The secret the local CLI may use this server with; None (and a warning) when it cannot be
    written, e.g. on a full disk: the server serves all the same."""
    try:
        return announce_server(home, url)
    except OSError as exc:
        _error(f"the local CLI cannot use this server (its secret could not be written: {exc.strerror})", "warning")
        return None


TOKEN_FILE = "RAG_TOKEN_FILE"  # `rag mcp`'s token as a mounted secret: the file this variable names


@app.command()
def mcp(
    token: Optional[str] = typer.Option(
        None, "--token", envvar="RAG_TOKEN", show_envvar=True,
        help="The bearer token the tools act with (`rag token create`); default: $RAG_TOKEN, else the file "
             "$RAG_TOKEN_FILE names (a mounted secret).",
    ),
) -> None:
    """Serve the MCP tools over stdio for one agent (standard output is the protocol; logs go to the log file).
    Beside a running `rag serve`, relay them from the server's /mcp instead."""
    from rag.config_file import ConfigError, read_secret_file

    try:  # read even beside --token: RAG_TOKEN and RAG_TOKEN_FILE both set is a mistake said at once
        mounted = read_secret_file(TOKEN_FILE)
    except ConfigError as exc:
        _error(str(exc))
        raise typer.Exit(2) from None
    token = token if token is not None else mounted
    if not (token or "").strip():  # `export RAG_TOKEN=$(…)` whose command failed leaves it empty
        _error("no token was given: set RAG_TOKEN or RAG_TOKEN_FILE, or pass --token (make one with "
               "`rag token create … --agent`)")
        raise typer.Exit(2)
    home, embedded = configured_home()
    server = running_server(home) if embedded else None
    if server is not None:
        _mcp_relay(home, server[0], token)
        return
    from rag.mcp.stdio import serve_stdio, stdout_reserved

    # Reserved before the service opens: nothing a library prints at start-up may reach the protocol.
    # The writer's start-up and the engines are opened while the first messages are answered.
    with stdout_reserved() as hand_over, service(writer=True, serving=True, defer_start=True) as svc:
        serve_stdio(svc, token, hand_over)


def _mcp_relay(home: Path, url: str, token: str) -> None:
    from rag.client import ServerError, bridge_mcp, token_refusal

    try:
        refusal = token_refusal(url, token)
    except ServerError as exc:
        _error(exc.message)
        raise typer.Exit(exc.exit_code) from None
    if refusal is not None:  # as over stdio: a bad token fails before serving
        _error(refusal)
        raise typer.Exit(1)
    configure(home)  # the SDK's own messages go to the log file, never onto the protocol
    bridge_mcp(url, token)


app.add_typer(token_app, name="token")
app.add_typer(source_app, name="source")
app.add_typer(config_app, name="config")

try:  # the evaluation commands live with the harness in evals/
    from rag.cli_eval import eval_app

    app.add_typer(eval_app, name="eval", help="Offline evaluation runs.")
except ImportError:  # pragma: no cover - an install without the harness
    pass

app.command("export")(export_store)
app.command("import")(import_store)


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
