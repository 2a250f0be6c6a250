"""`rag eval run` in process (typer's CliRunner), as the page-evaluation tests call it."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import Result
from typer.testing import CliRunner

from rag.cli import app


def rag_eval(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(app, ["eval", "run", *args], env=env)


def run_json(*args: str, env: dict[str, str] | None = None) -> dict:
    result = rag_eval(*args, "--json", env=env)
    assert result.exit_code == 0, (result.stderr, result.exception)
    return json.loads(result.stdout)


def read_rows(out: Path) -> dict[str, dict]:
    return {row["id"]: row for row in map(json.loads, (out / "questions.jsonl").read_text().splitlines())}
