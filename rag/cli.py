"""The `rag` command: ingest, search, ask, eval. The local CLI is the administrator of its RAG_HOME."""

from __future__ import annotations

import json
import logging
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from rag.errors import STORAGE_FULL, InvalidArgument, NotFound, RagError, StoreLocked, is_storage_full
from rag.logs import configure
from rag.settings import Settings

app = typer.Typer(no_args_is_help=True, add_completion=False, help="A knowledge base that answers with citations.")
out = Console()
err = Console(stderr=True)
log = logging.getLogger("rag.cli")


def _error(message: str, prefix: str = "error") -> None:
    # Plain text, never wrapped or read as markup: paths and messages arrive exactly as written.
    sys.stderr.write(f"{prefix}: {message}\n")


def _settings() -> Settings:
    try:
        return Settings()
    except Exception as exc:  # noqa: BLE001 - a configuration error is the user's to fix
        _error(f"invalid configuration: {exc}")
        raise typer.Exit(2) from None


@contextmanager
def service(writer: bool, serving: bool = False) -> Iterator["KnowledgeService"]:  # noqa: F821
    """Open the service; map errors once: a clear message and an exit code, tracebacks to the log.
    `serving`: a long-running server, which also takes over other workers' abandoned publishes."""
    from rag.service import KnowledgeService

    settings = _settings()
    log_path = configure(settings.home)
    try:
        with KnowledgeService(settings, writer=writer, publish_worker=serving) as svc:
            yield svc
    except typer.Exit:
        raise
    except RagError as exc:
        _error(exc.message)
        raise typer.Exit(3 if isinstance(exc, StoreLocked) else 2 if isinstance(exc, (InvalidArgument, NotFound)) else 1)
    except KeyboardInterrupt:
        err.print("interrupted; anything half-published is resumed on the next start")
        raise typer.Exit(130)
    except Exception as exc:
        log.exception("unexpected error")
        if is_storage_full(exc):  # a full disk is the user's to fix, and says so
            _error(STORAGE_FULL)
        else:
            _error(f"an unexpected error stopped the command; details are in {log_path}")
        raise typer.Exit(1)


def _principal(svc, workspace: str):
    from rag.service import Principal

    svc.ensure_workspace(workspace)
    return Principal.local_admin(workspace)


@app.command()
def ingest(
    path: Path = typer.Argument(..., help="Directory of Markdown and text files to import."),
    workspace: str = typer.Option("default", "--workspace", "-w"),
    kb: str = typer.Option("default", "--kb", help="Knowledge base to import into (made if missing)."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Import a directory tree as folders and documents, and publish them. Run again, it changes only what changed."""
    with service(writer=True) as svc:
        principal = _principal(svc, workspace)
        with Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=err, transient=json_out, disable=not err.is_terminal and json_out,
        ) as bar:
            tasks: dict[str, int] = {}

            def progress(stage: str, done: int, total: int) -> None:
                if stage not in tasks:
                    label = "reading files" if stage == "reading" else "indexing chunks"
                    tasks[stage] = bar.add_task(label, total=total)
                bar.update(tasks[stage], completed=done, total=total)

            report = svc.ingest_directory(principal, path, kb, progress)
    if json_out:
        payload = report.summary() | {
            "failures": [{"path": p, "error": m} for p, m in report.failed],
            "skips": [{"path": p, "reason": m} for p, m in report.skipped],
        }
        out.print_json(json.dumps(payload))
    else:
        table = Table(title=f"Ingested {path} into {report.knowledge_base!r}")
        for column in ("added", "updated", "unchanged", "removed", "failed", "skipped", "chunks", "seconds"):
            table.add_column(column, justify="right")
        s = report.summary()
        table.add_row(*(str(s[c]) for c in ("added", "updated", "unchanged", "removed", "failed", "skipped", "chunks", "seconds")))
        out.print(table)
        for rel, message in report.warnings:
            _error(f"{rel}: {message}", "warning")
        for rel, message in report.skipped:  # what was left out, and why: nothing is skipped silently
            _error(f"{rel}: {message}", "skipped")
        for rel, message in report.failed:
            _error(f"{rel}: {message}", "failed")
    if report.failed:
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
    from rag.render import search_response
    from rag.service.search import clamp_limit

    with service(writer=False) as svc:
        principal = _principal(svc, workspace)
        result = svc.search(principal, query, clamp_limit(limit), kb_name=kb)
        payload, text = search_response(query, result.hits, svc.settings.retrieve.excerpt_chars)
    if json_out:
        sys.stdout.write(json.dumps(payload, ensure_ascii=False, indent=2) + "\n")
    else:
        sys.stdout.write(text + "\n")


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
    from rag.render import answer_response, sources_text

    messages = None
    if history is not None:
        try:
            messages = json.loads(history.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            _error(f"cannot read the conversation history {history}: {exc}")
            raise typer.Exit(2) from None
    with service(writer=False) as svc:
        principal = _principal(svc, workspace)
        if json_out:
            answer = svc.ask(principal, question, kb_name=kb, history=messages)
            payload, _ = answer_response(answer, svc.settings.retrieve.excerpt_chars)
            sys.stdout.write(json.dumps(payload, ensure_ascii=False, indent=2) + "\n")
            return
        for event in svc.ask_stream(principal, question, kb_name=kb, history=messages):
            if event.kind == "delta":
                sys.stdout.write(event.text)
                sys.stdout.flush()
            elif event.kind == "done" and event.answer is not None:
                tail = f"\n\n{sources_text(event.answer.sources)}" if event.answer.sources else ""
                sys.stdout.write(tail + "\n")


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

    if workers > 1 and _settings().embedded:
        _error(
            "--workers above 1 needs the scale-out deployment: the embedded store (a SQLite file and embedded "
            "Chroma) belongs to one process. Set RAG_DATABASE_URL (PostgreSQL) and RAG_CHROMA_URL (a Chroma server)."
        )
        raise typer.Exit(2)
    # The service is opened here rather than in the app's lifespan so that a store held by another
    # process is the CLI's clear message and exit code 3, not a traceback from uvicorn's start-up.
    with service(writer=True, serving=workers == 1) as svc:
        if workers > 1:
            # This process migrated the schema, resumed interrupted publishes and reconciled the
            # lanes; each worker opens its own service on the same engines.
            svc.close()
            sys.stderr.write(f"serving {svc.settings.sqlalchemy_url.split('@')[-1]} with {workers} workers "
                             f"on http://{host}:{port}\n")
            uvicorn.run("rag.api.app:create_worker_app", factory=True, host=host, port=port, workers=workers,
                        log_config=log_config())
            return
        serving_process(svc.settings)
        sys.stderr.write(f"serving {svc.settings.home} on http://{host}:{port}\n")
        uvicorn.run(create_app(service=svc), host=host, port=port, log_config=log_config())


@app.command()
def mcp(
    token: Optional[str] = typer.Option(
        None, "--token", envvar="RAG_TOKEN", show_envvar=True,
        help="The bearer token the tools act with (`rag token create`); default: $RAG_TOKEN.",
    ),
) -> None:
    """Serve the MCP tools over stdio for one agent (standard output is the protocol; logs go to the log file)."""
    from rag.mcp.stdio import serve_stdio, stdout_reserved

    # Reserved before the service opens: nothing a library prints at start-up may reach the protocol.
    with stdout_reserved() as hand_over, service(writer=True, serving=True) as svc:
        serve_stdio(svc, token, hand_over)


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
    with service(writer=True) as svc:
        secret, info = svc.create_token(
            workspace, role, scope or (), access, specs, agent, expires, name=name, principal_id=principal
        )
    sys.stdout.write(secret + "\n")
    sys.stderr.write(
        f"token {info.token_id} of {info.kind} {info.name!r} ({info.principal_id}) in {info.workspace_id}: "
        f"{info.role}, {' '.join(info.scopes)}, access {info.access}; store it now, it is not shown again\n"
    )


@token_app.command("list")
def token_list(
    workspace: Optional[str] = typer.Option(None, "--workspace", "-w", help="Only this workspace's tokens."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Every token, newest first (never their secrets)."""
    with service(writer=False) as svc:
        tokens = svc.list_tokens(workspace)
    if json_out:
        sys.stdout.write(json.dumps([t.payload() | {"active": t.active} for t in tokens], indent=2) + "\n")
        return
    table = Table(title="Tokens")
    table.add_column("id", no_wrap=True, min_width=len("tok_") + 16)  # whole: it is what `revoke` takes
    for column in ("name", "kind", "workspace", "role", "scopes", "access", "expires", "status"):
        table.add_column(column)
    for t in tokens:
        access = f"folders {','.join(t.folder_ids)}" if t.folder_ids else t.access
        status = "revoked" if t.revoked_at else "active" if t.active else "expired"
        expires = t.expires_at.strftime("%Y-%m-%d") if t.expires_at else "never"
        table.add_row(t.token_id, t.name, t.kind, t.workspace_id, t.role, " ".join(t.scopes), access, expires, status)
    out.print(table)


@token_app.command("revoke")
def token_revoke(token_id: str = typer.Argument(..., help="The token's id (tok_…), from `rag token list`.")) -> None:
    """Revoke a token for good."""
    with service(writer=True) as svc:
        info = svc.revoke_token(token_id)
    sys.stdout.write(f"revoked {info.token_id}\n")


try:  # the evaluation commands live with the harness in evals/
    from rag.cli_eval import eval_app

    app.add_typer(eval_app, name="eval", help="Offline evaluation runs.")
except ImportError:  # pragma: no cover - an install without the harness
    pass


# ----- moving a store to another deployment (rag/service/transfer.py) -----

_TRANSFER_STAGES = {
    "exporting": "exporting rows", "checking": "checking the archive", "loading": "loading rows",
    "indexing": "indexing chunks",
}


@contextmanager
def _transfer_progress(quiet: bool) -> Iterator:
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=err, transient=quiet, disable=quiet and not err.is_terminal,
    ) as bar:
        tasks: dict[str, int] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(_TRANSFER_STAGES.get(stage, stage), total=total)
            bar.update(tasks[stage], completed=done, total=total)

        yield progress


def _counts_table(counts: dict[str, int], extra: dict[str, object]) -> Table:
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
    from rag.service import Principal

    to_stdout = file == "-"
    with service(writer=False) as svc:
        principal = Principal.local_admin(workspace or svc.settings.default_workspace)
        with _transfer_progress(to_stdout) as progress:
            report = svc.export_archive(
                principal, sys.stdout.buffer if to_stdout else Path(file), kb or (), workspace, progress
            )
    if to_stdout:
        sys.stdout.flush()
    where = "the whole store" if report.scope["workspace"] is None else f"workspace {report.scope['workspace']!r}"
    if report.scope["knowledge_bases"]:
        where = f"{', '.join(map(repr, report.scope['knowledge_bases']))} of {where}"
    (sys.stderr if to_stdout else sys.stdout).write(f"Exported {where} to {report.target}\n")
    (err if to_stdout else out).print(_counts_table(report.counts, {"seconds": round(report.seconds, 2)}))


@app.command("import")
def import_store(
    file: Path = typer.Argument(..., help="An archive written by `rag export`."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Load an archive into the store the settings name (RAG_DATABASE_URL, RAG_CHROMA_URL, RAG_HOME) with the
    same ids, and index its published versions. A store that already holds any of it is left unchanged."""
    from rag.service import Principal

    with service(writer=True) as svc:
        principal = Principal.local_admin(svc.settings.default_workspace)
        with _transfer_progress(json_out) as progress:
            report = svc.import_archive(principal, file, progress)
    if json_out:
        sys.stdout.write(json.dumps(report.summary(), indent=2) + "\n")
        return
    extra = {"versions indexed": report.versions_indexed, "chunks indexed": report.chunks,
             "seconds": round(report.seconds, 2)}
    sys.stdout.write(f"Imported {file}\n")
    out.print(_counts_table(report.counts, extra))
    if report.workspaces_kept:
        sys.stderr.write(f"workspaces already here, kept as they were: {', '.join(report.workspaces_kept)}\n")
    if report.activity_offset:
        sys.stderr.write(f"activity rows follow this store's own: their ids moved up by {report.activity_offset}\n")


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
