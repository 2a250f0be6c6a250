"""What the tests of `rag export` / `rag import` share (tests/e2e/test_transfer.py,
tests/service/test_transfer_sources.py): reading an archive back by table, and the empty store of
either deployment an import goes into."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag.service.transfer.rows import TABLES
from rag.settings import Settings


def archive_rows(path: Path) -> tuple[dict, dict[str, list[dict]]]:
    """The archive's header, and its rows by table (every table of TABLES, empty ones too)."""
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    by_table: dict[str, list[dict]] = {name: [] for name in TABLES}
    for record in lines[1:]:
        by_table[record["table"]].append(record["row"])
    return lines[0], by_table


def empty_store(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    """An empty store of the deployment `request.param` names ("sqlite" or "postgresql") to import into."""
    if request.param == "postgresql":
        return Settings(home=tmp_path / "target", database_url=request.getfixturevalue("postgres").new_database())
    return Settings(home=tmp_path / "target")
