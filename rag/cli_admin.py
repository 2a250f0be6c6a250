"""`rag token …`, `rag export` and `rag import`: the local administrator's commands, mounted by
rag/cli.py. Tokens are the API's and the MCP server's credentials; an archive moves a store to
another deployment (rag/service/transfer/archives.py)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from rag.cli_run import _one, _progress_bar, err, out, run

if TYPE_CHECKING:
    from rich.table import Table

token_app = typer.Typer(no_args_is_help=True, help="Bearer tokens for the HTTP API and the MCP server.")


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


# ----- moving a store to another deployment (rag/service/transfer/archives.py) -----

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
