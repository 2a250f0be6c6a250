"""`rag config show`: the effective settings, secrets masked, each with where its value came from
(rag/settings_report.py). Mounted by rag/cli.py, beside its `--config PATH` option."""

from __future__ import annotations

import json
import sys

import typer

from rag.cli_run import _settings, out

config_app = typer.Typer(no_args_is_help=True, help="The settings: a TOML file (--config, RAG_CONFIG) beside the environment.")


@config_app.command("show")
def config_show(json_out: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Every setting's effective value (secrets masked) and its source: option, env RAG_X, file
    RAG_X_FILE, config PATH or default."""
    from rag.config_file import config_path
    from rag.settings_report import settings_report

    _settings()  # a configuration that cannot be used: one line and exit code 2, as for every command
    _, entries = settings_report()
    path = config_path()
    if json_out:
        payload = {
            "config_file": str(path) if path is not None else None,
            "settings": {e.name: {"value": e.value, "source": e.source} for e in entries},
        }
        sys.stdout.write(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from rag.cli_admin import _table_width

    table = Table(title=Text(f"Settings (config file: {path or 'none'})"))
    for column in ("setting", "value", "source"):
        table.add_column(column, no_wrap=not out().is_terminal)
    for e in entries:
        value = e.value if isinstance(e.value, str) else json.dumps(e.value, ensure_ascii=False)
        table.add_row(Text(e.name), Text(value), Text(e.source))  # Text: `[::1]` is a value, not markup
    if out().is_terminal:
        out().print(table)
    else:  # whole values when piped, as `rag token list` prints them
        Console(width=max(80, _table_width(table)), no_color=True).print(table)
