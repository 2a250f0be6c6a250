"""The `rag` command: ingest, search, ask, eval. The local CLI is the administrator of its RAG_HOME."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Optional

import typer

from rag.commands import exit_code
from rag.errors import STORAGE_FULL, RagError, is_storage_full
from rag.logs import configure
from rag.store.home import private_umask
from rag.store.lock import announce_server, configured_home, running_server

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from rag.service import KnowledgeService
    from rag.settings import Settings

app = typer.Typer(no_args_is_help=True, add_completion=False, help="A knowledge base that answers with citations.")


@app.callback()
def _private() -> None:
    """Before every command: what it creates (in RAG_HOME, the embedding cache, exports) is the
    user's alone (rag/store/home.py)."""
    private_umask()


@lru_cache(maxsize=None)
def _console(stderr: bool = False) -> Console:
    """Standard output's (or error's) rich console, made on first use: rich is no part of a
    command that prints plain text (`rag search` and `rag ask` beside a server)."""
    from rich.console import Console

    return Console(stderr=stderr)


def out() -> Console:
    return _console()


def err() -> Console:
    return _console(stderr=True)
log = logging.getLogger("rag.cli")


def _error(message: str, prefix: str = "error") -> None:
    # Plain text, never wrapped or read as markup: paths and messages arrive exactly as written.
    sys.stderr.write(f"{prefix}: {message}\n")


def _settings() -> Settings:
    from rag.settings import Settings

    try:
        return Settings()
    except Exception as exc:  # noqa: BLE001 - a configuration error is the user's to fix
        _error(f"invalid configuration: {exc}")
        raise typer.Exit(2) from None


@contextmanager
def service(writer: bool, serving: bool = False, defer_start: bool = False,
            embeds_query: str | None = None, query: str | None = None) -> Iterator[KnowledgeService]:
    """Open the service; map errors once: a clear message and an exit code, tracebacks to the log.
    `serving`: a long-running server, which also takes over other workers' abandoned publishes;
    `defer_start`: see KnowledgeService. `embeds_query` ("search" or "ask"): the command embeds a
    query (`query`, when known), so that query encoder is loaded in the background while the
    service opens (rag.models.embed.warm_query_encoder)."""
    settings = _settings()
    log_path = configure(settings.home)
    if embeds_query:
        from rag.models.embed import warm_query_encoder

        warm_query_encoder(settings, search=embeds_query == "search", query=query)
    from rag.service import KnowledgeService

    try:
        with KnowledgeService(settings, writer=writer, publish_worker=serving, defer_start=defer_start) as svc:
            yield svc
    except typer.Exit:
        raise
    except RagError as exc:
        _error(exc.message)
        raise typer.Exit(exit_code(exc))
    except KeyboardInterrupt:
        err().print("interrupted; anything half-published is resumed on the next start")
        raise typer.Exit(130)
    except Exception as exc:
        log.exception("unexpected error")
        if is_storage_full(exc):  # a full disk is the user's to fix, and says so
            _error(STORAGE_FULL)
        else:
            _error(f"an unexpected error stopped the command; details are in {log_path}")
        raise typer.Exit(1)


def run(operation: str, writer: bool, progress=None, stream=None, **arguments) -> Iterator[dict]:
    """A command's events (rag/commands.py): from the `rag serve` that holds the embedded store when
    one does (over HTTP, with the secret it wrote in RAG_HOME; its progress reports drawn here by
    `progress`), else from a service opened here. `stream`: where an export to "-" goes, here."""
    home, embedded = configured_home()  # the settings themselves only when no server runs the command
    server = running_server(home) if embedded else None
    if server is not None:
        from rag.client import ServerError, call

        try:
            for event in call(*server, operation, arguments, starting=lambda: running_server(home) == server):
                if "progress" not in event:
                    yield event
                elif progress is not None:
                    progress(*event["progress"])
        except ServerError as exc:
            _error(exc.message)
            raise typer.Exit(exc.exit_code) from None
        return
    from rag.commands import OPERATIONS

    extra = {"progress": progress} if progress is not None else {}
    if stream is not None:
        extra["stream"] = stream
    embeds = operation in ("search", "ask")
    query = arguments.get("query") if embeds and isinstance(arguments.get("query"), str) else None
    with service(writer=writer, embeds_query=operation if embeds else None, query=query) as svc:
        yield from OPERATIONS[operation](svc, **arguments, **extra)


def _one(events: Iterator[dict]) -> dict:
    """The one event of a command that has one, the command run to its end (its service closed)."""
    (event,) = list(events)
    return event


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
    from rag.origins import bind_warning

    if workers > 1 and _settings().embedded:
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
            sys.stderr.write(f"serving {svc.settings.sqlalchemy_url.split('@')[-1]} with {workers} workers "
                             f"on http://{host}:{port}\n")
            uvicorn.run("rag.api.app:create_worker_app", factory=True, host=host, port=port, workers=workers,
                        log_config=log_config(), **bounds)
            return
        serving_process(svc.settings)
        # uvicorn stops gracefully on SIGTERM, then raises it again: exit then, closing the
        # service (and removing the lock's holder and secret files), as Ctrl-C does.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        # The local CLI's commands are then run here, beside the store (rag/client.py).
        secret = _announce(svc.settings.home, _local_url(host, port)) if svc.settings.embedded else None
        sys.stderr.write(f"serving {svc.settings.home} on http://{host}:{port}\n")
        uvicorn.run(create_app(service=svc, local_secret=secret, serving=True), host=host, port=port,
                    log_config=log_config(), **bounds)


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


@app.command()
def mcp(
    token: Optional[str] = typer.Option(
        None, "--token", envvar="RAG_TOKEN", show_envvar=True,
        help="The bearer token the tools act with (`rag token create`); default: $RAG_TOKEN.",
    ),
) -> None:
    """Serve the MCP tools over stdio for one agent (standard output is the protocol; logs go to the log file).
    Beside a running `rag serve`, relay them from the server's /mcp instead."""
    if not (token or "").strip():  # `export RAG_TOKEN=$(…)` whose command failed leaves it empty
        _error("no token was given: set RAG_TOKEN or pass --token (make one with `rag token create … --agent`)")
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


token_app = typer.Typer(no_args_is_help=True, help="Bearer tokens for the HTTP API and the MCP server.")
app.add_typer(token_app, name="token")


@token_app.command("create")
def token_create(
    workspace: str = typer.Option(..., "--workspace", "-w", help="The token's home workspace (made if missing)."),
    role: str = typer.Option(..., "--role", help="viewer, editor or admin."),
    scope: Optional[list[str]] = typer.Option(
        None, "--scope", help="knowledge:write to allow writing (knowledge:read is always granted)."
    ),
    access: Optional[str] = typer.Option(
        None, "--access", help="Knowledge-base access: none or all (default: all for a person, none for an agent)."
    ),
    folders: Optional[str] = typer.Option(
        None, "--folders", help="Comma-separated folders (node id, path in the default knowledge base, or KB:path)."
    ),
    agent: bool = typer.Option(False, "--agent", help="The token is an agent's, not a person's."),
    expires: Optional[int] = typer.Option(None, "--expires", help="Days until it expires (default: never)."),
    name: Optional[str] = typer.Option(None, "--name", help="Who it is for, as the activity history shows it."),
    principal: Optional[str] = typer.Option(
        None, "--principal", help="Another token of this principal (id), e.g. to add a workspace to it."
    ),
) -> None:
    """Make a token and print it, alone, on standard output. It is shown this once."""
    specs = [f for f in (folders or "").split(",") if f.strip()]
    made = _one(run("token_create", True, workspace=workspace, role=role, scopes=scope or [], access=access,
                    folders=specs, agent=agent, expires=expires, name=name, principal=principal))
    info = made["token"]
    sys.stdout.write(made["secret"] + "\n")
    sys.stderr.write(
        f"token {info['token_id']} of {info['kind']} {info['name']!r} ({info['principal_id']}) in "
        f"{info['workspace_id']}: {info['role']}, {' '.join(info['scopes'])}, access {info['access']}; "
        "store it now, it is not shown again\n"
    )


@token_app.command("list")
def token_list(
    workspace: Optional[str] = typer.Option(None, "--workspace", "-w", help="Only this workspace's tokens."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Every token, newest first (never their secrets)."""
    tokens = _one(run("token_list", False, workspace=workspace))["tokens"]
    if json_out:
        sys.stdout.write(json.dumps(tokens, indent=2) + "\n")
        return
    # Whole values when piped or redirected: rich would otherwise fit the table to 80 columns and
    # cut them ("vie…"); a terminal gets the table fitted to its width.
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Tokens")
    table.add_column("id", no_wrap=True, min_width=len("tok_") + 16)  # whole: it is what `revoke` takes
    for column in ("name", "kind", "workspace", "role", "scopes", "access", "expires", "status"):
        table.add_column(column, no_wrap=not out().is_terminal)
    for t in tokens:
        access = f"folders {','.join(t['folder_ids'])}" if t["folder_ids"] else t["access"]
        status = "revoked" if t["revoked_at"] else "active" if t["active"] else "expired"
        expires = t["expires_at"][:10] if t["expires_at"] else "never"
        table.add_row(t["token_id"], t["name"], t["kind"], t["workspace_id"], t["role"], " ".join(t["scopes"]),
                      access, expires, status)
    if out().is_terminal:
        out().print(table)
    else:
        Console(width=max(80, _table_width(table)), no_color=True).print(table)


def _table_width(table: Table) -> int:
    """The width that shows every cell whole."""
    from rich.console import Console

    return Console(width=100_000).measure(table).maximum


@token_app.command("revoke")
def token_revoke(token_id: str = typer.Argument(..., help="The token's id (tok_…), from `rag token list`.")) -> None:
    """Revoke a token for good."""
    revoked = _one(run("token_revoke", True, token_id=token_id))
    sys.stdout.write(f"revoked {revoked['token_id']}\n")


try:  # the evaluation commands live with the harness in evals/
    from rag.cli_eval import eval_app

    app.add_typer(eval_app, name="eval", help="Offline evaluation runs.")
except ImportError:  # pragma: no cover - an install without the harness
    pass


# ----- moving a store to another deployment (rag/service/transfer/archives.py) -----

_STAGES = {
    "reading": "reading files", "exporting": "exporting rows", "checking": "checking the archive",
    "loading": "loading rows", "indexing": "indexing chunks",
}


@contextmanager
def _progress_bar(quiet: bool, command: str) -> Iterator:
    """A progress callback on standard error: bars on a terminal (`quiet`: gone when done);
    elsewhere (`rag ingest docs > log 2>&1`, a service manager) plain lines, so that a log shows the
    command moving: `ingest: reading files 10/14 (2 s)`, each stage's first and last report and at
    most one line a second between them (`quiet`: none, as for a program reading --json)."""
    if not err().is_terminal:
        yield (lambda *_: None) if quiet else _progress_lines(command)
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=err(), transient=quiet,
    ) as bar:
        tasks: dict[str, int] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(_STAGES.get(stage, stage), total=total)
            bar.update(tasks[stage], completed=done, total=total)

        yield progress


PROGRESS_LINE_SECONDS = 1.0


def _progress_lines(command: str, clock=time.monotonic):
    """The plain-text progress callback: a line per stage when it starts, when it ends (done ==
    total) and at most every PROGRESS_LINE_SECONDS between."""
    started: dict[str, float] = {}
    last: dict[str, tuple[float, int, int]] = {}

    def progress(stage: str, done: int, total: int) -> None:
        now = clock()
        began = started.setdefault(stage, now)
        before = last.get(stage)
        if before is not None and ((done, total) == before[1:]
                                   or (done < total and now - before[0] < PROGRESS_LINE_SECONDS)):
            return
        last[stage] = (now, done, total)
        sys.stderr.write(f"{command}: {_STAGES.get(stage, stage)} {done}/{total} ({now - began:.0f} s)\n")
        sys.stderr.flush()

    return progress


def _counts_table(counts: dict[str, int], extra: dict[str, object]) -> Table:
    from rich.table import Table

    table = Table()
    table.add_column("table")
    table.add_column("rows", justify="right")
    for name, count in counts.items():
        table.add_row(name, str(count))
    for name, value in extra.items():
        table.add_row(name, str(value))
    return table


@app.command("export")
def export_store(
    file: str = typer.Argument(..., help="The archive to write (JSON lines); - for standard output."),
    kb: Optional[list[str]] = typer.Option(
        None, "--kb", help="Only this knowledge base (repeat for more); default: the whole store."
    ),
    workspace: Optional[str] = typer.Option(
        None, "--workspace", "-w", help="Only this workspace; with --kb, the workspace they are in (default: default)."
    ),
) -> None:
    """Write the store as an archive for `rag import`: every version, summary, metadata and activity row, and
    (whole store only) the principals and tokens. Chunks and vectors are rebuilt by the import."""
    to_stdout = file == "-"
    report = None
    with _progress_bar(to_stdout, "export") as progress:
        # The path as the server would read it too (it may run the command, in another directory).
        events = run("export", False, progress, sys.stdout.buffer if to_stdout else None,
                     file=file if to_stdout else os.path.abspath(file), kb=list(kb or ()), workspace=workspace)
        for event in events:
            if "data" in event:  # the archive, from a server
                sys.stdout.buffer.write(event["data"].encode("utf-8"))
            else:
                report = event["report"]
    if to_stdout:
        sys.stdout.flush()
    scope = report["scope"]
    where = "the whole store" if scope["workspace"] is None else f"workspace {scope['workspace']!r}"
    if scope["knowledge_bases"]:
        where = f"{', '.join(map(repr, scope['knowledge_bases']))} of {where}"
    target = "-" if to_stdout else str(Path(file))  # as given (the server got it absolute)
    (sys.stderr if to_stdout else sys.stdout).write(f"Exported {where} to {target}\n")
    (err() if to_stdout else out()).print(_counts_table(report["counts"], {"seconds": report["seconds"]}))


@app.command("import")
def import_store(
    file: Path = typer.Argument(..., help="An archive written by `rag export`."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Load an archive into the store the settings name (RAG_DATABASE_URL, RAG_CHROMA_URL, RAG_HOME) with the
    same ids, and index its published versions. A store that already holds any of it is left unchanged."""
    with _progress_bar(json_out, "import") as progress:
        report = _one(run("import", True, progress, file=os.path.abspath(file)))["report"]
    if json_out:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
        return
    extra = {"versions indexed": report["versions_indexed"], "chunks indexed": report["chunks"],
             "seconds": report["seconds"]}
    sys.stdout.write(f"Imported {file}\n")
    out().print(_counts_table(report["counts"], extra))
    if report["workspaces_kept"]:
        sys.stderr.write(f"workspaces already here, kept as they were: {', '.join(report['workspaces_kept'])}\n")
    if report["activity_offset"]:
        sys.stderr.write(f"activity rows follow this store's own: their ids moved up by {report['activity_offset']}\n")


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
