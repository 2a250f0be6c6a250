"""How a `rag` command runs, shared by every command module (rag/cli.py, rag/cli_admin.py): in the
`rag serve` that holds the embedded store when one runs, else in a service opened here; errors
mapped once to a message and an exit code; progress drawn on standard error."""

from __future__ import annotations

import logging
import sys
import time
from contextlib import contextmanager
from functools import lru_cache
from typing import TYPE_CHECKING, Iterator

import typer

from rag.commands import exit_code
from rag.errors import STORAGE_FULL, RagError, is_storage_full
from rag.logs import configure
from rag.store.lock import configured_home, running_server

if TYPE_CHECKING:
    from rich.console import Console

    from rag.service import KnowledgeService
    from rag.settings import Settings


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
        _error(f"invalid configuration: {configuration_problem(exc)}")
        raise typer.Exit(2) from None


def configuration_problem(exc: Exception) -> str:
    """A settings error on one line: each bad setting by its path and its variable, and what is wrong
    with it; never the value given (it may be a secret), never pydantic's links."""
    from pydantic import ValidationError

    if not isinstance(exc, ValidationError):
        return str(exc)
    problems = []
    for error in exc.errors(include_url=False, include_input=False):
        path = [str(part) for part in error["loc"]]
        where = ".".join(path)
        variable = "RAG_" + "__".join(path).upper() if path else ""
        named = f"{where} ({variable})" if where else "the settings"
        problems.append(f"{named}: {error['msg'][:1].lower()}{error['msg'][1:]}")
    return "; ".join(problems)


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


_STAGES = {
    "reading": "reading files", "exporting": "exporting rows", "checking": "checking the archive",
    "loading": "loading rows", "indexing": "indexing chunks", "listing": "listing items",
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
