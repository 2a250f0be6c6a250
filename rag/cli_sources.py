"""`rag source add|list|show|sync|pause|resume|remove`: the sources that keep a knowledge base in sync
(rag/service/sources/), mounted by rag/cli.py. Each runs in the `rag serve` holding the store when
one runs (rag/cli_run.py), so `rag source sync NAME` works beside a running server too."""

from __future__ import annotations

import json
import sys
from typing import Any, Optional

import typer

from rag.cli_run import _error, _one, _progress_bar, out, run

source_app = typer.Typer(no_args_is_help=True, help="Sources kept in sync: folders, websites, Git, S3, exports, IMAP mailboxes.")

_WORKSPACE = typer.Option("default", "--workspace", "-w")
_JSON = typer.Option(False, "--json", help="Print JSON.")


def _options(pairs: list[str], config_json: str | None) -> dict[str, Any]:
    """`--config JSON` and `--option key=value` pairs (a value that reads as JSON is taken as such;
    a key given twice makes a list)."""
    config: dict[str, Any] = {}
    if config_json:
        try:
            config = json.loads(config_json)
        except ValueError:
            _error("--config must be a JSON object")
            raise typer.Exit(2) from None
        if not isinstance(config, dict):
            _error("--config must be a JSON object")
            raise typer.Exit(2)
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            _error(f"--option takes key=value, not {pair!r}")
            raise typer.Exit(2)
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        key = key.strip()
        if key in config:
            previous = config[key]
            config[key] = (previous if isinstance(previous, list) else [previous]) + [value]
        else:
            config[key] = value
    return config


def _print_source(source: dict[str, Any]) -> None:
    last = source["last_sync"]
    lines = [
        f"{source['name']} ({source['kind']}) -> {source['knowledge_base']}:/{source['folder']}",
        f"  schedule: {'every ' + str(source['every_seconds']) + ' s' if source['every_seconds'] else 'on demand'}"
        f"{' (paused)' if source['paused'] else ''}; status: {source['status']}; items: {source['items']}",
        f"  last sync: {last['outcome'] or 'never'}" + (f" at {last['finished_at']}" if last["finished_at"] else "")
        + (f" {json.dumps(last['counts'])}" if last["counts"] else ""),
    ]
    if last["error"]:
        lines.append(f"  error: {last['error']}")
    for item, reason in last["failures"][:10]:
        lines.append(f"  failed: {item}: {reason}")
    if source.get("next_run_at"):
        lines.append(f"  next run: {source['next_run_at']}")
    if "progress" in source:
        lines.append(f"  running: {json.dumps(source['progress'])}")
    if "config" in source:  # shown to those who manage sources only
        lines.append(f"  settings: {json.dumps(source['config'])}" + (f"; secret: {source['secret']}" if source.get("secret") else ""))
    out().print("\n".join(lines), markup=False, highlight=False)


@source_app.command("add")
def add(
    name: str = typer.Argument(..., help="The source's name (letters, digits, '.', '_', '-')."),
    kind: str = typer.Option(..., "--kind", help="folder, website, git, s3, notion, confluence or imap."),
    option: Optional[list[str]] = typer.Option(None, "--option", "-o", help="A setting, key=value (repeatable)."),
    config: Optional[str] = typer.Option(None, "--config", help="The settings as one JSON object."),
    kb: Optional[str] = typer.Option(None, "--kb", help="Knowledge base it fills (made if missing)."),
    folder: str = typer.Option("", "--folder", help="Folder of the knowledge base it fills (default: its root)."),
    every: Optional[str] = typer.Option(None, "--every", help="Sync every 30m, 6h, 1d… (default: on demand)."),
    secret: Optional[str] = typer.Option(
        None, "--secret", help="Name of the secret it needs (set RAG_SOURCE_SECRETS__<NAME>); never its value."),
    workspace: str = _WORKSPACE,
    json_out: bool = _JSON,
) -> None:
    """Add a source. Nothing is fetched until `rag source sync NAME` or its schedule."""
    made = _one(run("source_add", True, workspace=workspace, name=name, kind=kind,
                    config=_options(option or [], config), kb=kb, folder=folder, every=every, secret=secret))
    if json_out:
        sys.stdout.write(json.dumps(made["source"], indent=2) + "\n")
    else:
        _print_source(made["source"])


@source_app.command("list")
def list_(workspace: str = _WORKSPACE, json_out: bool = _JSON) -> None:
    """Every source, with its state."""
    sources = _one(run("source_list", False, workspace=workspace))["sources"]
    if json_out:
        sys.stdout.write(json.dumps(sources, indent=2) + "\n")
        return
    if not sources:
        out().print("no sources (add one with `rag source add`)", markup=False)
    for source in sources:
        _print_source(source)


@source_app.command("show")
def show(name: str = typer.Argument(...), workspace: str = _WORKSPACE, json_out: bool = _JSON) -> None:
    """One source: its settings, schedule, last sync, failures and progress."""
    source = _one(run("source_show", False, workspace=workspace, name=name))["source"]
    if json_out:
        sys.stdout.write(json.dumps(source, indent=2) + "\n")
    else:
        _print_source(source)


@source_app.command("sync")
def sync(name: str = typer.Argument(...), workspace: str = _WORKSPACE, json_out: bool = _JSON) -> None:
    """Sync a source now: what changed is fetched and published, what vanished archived."""
    with _progress_bar(json_out, f"sync {name}") as progress:
        report = _one(run("source_sync", True, progress, workspace=workspace, name=name))
    if json_out:
        payload = report["summary"] | {
            "outcome": report["source"]["last_sync"]["outcome"], "error": report["error"],
            "failures": [{"item": p, "error": m} for p, m in report["failed"]],
            "skips": [{"item": p, "reason": m} for p, m in report["skipped"]],
            "timings": report.get("timings", {}),
        }
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
    else:
        s = report["summary"]
        out().print(" ".join(f"{k}={s[k]}" for k in ("added", "updated", "unchanged", "moved", "removed", "failed",
                                                     "skipped", "chunks", "seconds") if k in s), markup=False)
        for item, message in report["warnings"]:
            _error(f"{item}: {message}", "warning")
        for item, message in report["skipped"]:
            _error(f"{item}: {message}", "skipped")
        for item, message in report["failed"]:
            _error(f"{item}: {message}", "failed")
        if report["error"]:
            _error(report["error"])
    if report["error"]:
        raise typer.Exit(1)
    if report["failed"]:
        raise typer.Exit(1)


def _pause(name: str, workspace: str, paused: bool, json_out: bool) -> None:
    source = _one(run("source_pause", True, workspace=workspace, name=name, paused=paused))["source"]
    if json_out:
        sys.stdout.write(json.dumps(source, indent=2) + "\n")
    else:
        _print_source(source)


@source_app.command("pause")
def pause(name: str = typer.Argument(...), workspace: str = _WORKSPACE, json_out: bool = _JSON) -> None:
    """Stop syncing a source on its schedule (`rag source sync` still runs it)."""
    _pause(name, workspace, True, json_out)


@source_app.command("resume")
def resume(name: str = typer.Argument(...), workspace: str = _WORKSPACE, json_out: bool = _JSON) -> None:
    """Sync a paused source on its schedule again (its next run is now)."""
    _pause(name, workspace, False, json_out)


@source_app.command("remove")
def remove(
    name: str = typer.Argument(...),
    delete_documents: bool = typer.Option(
        False, "--delete-documents", help="Delete the documents it brought too (default: they stay, as ordinary documents)."),
    workspace: str = _WORKSPACE,
    json_out: bool = _JSON,
) -> None:
    """Remove a source."""
    removed = _one(run("source_remove", True, workspace=workspace, name=name, keep_documents=not delete_documents))
    if json_out:
        sys.stdout.write(json.dumps(removed["removed"], indent=2) + "\n")
    else:
        r = removed["removed"]
        kept = "kept" if r["documents_kept"] else "deleted"
        out().print(f"removed source {r['name']}; its {r['documents']} documents {kept}", markup=False)
