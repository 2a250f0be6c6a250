"""The `rag` command as a user runs it: ingest, then search, JSON and text."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def rag(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAG_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "rag.cli", *args], capture_output=True, text=True, env=env, timeout=600)


@pytest.fixture(scope="module")
def cli_home(tmp_path_factory) -> tuple[Path, Path]:
    from .conftest import HANDBOOK, SMALL_SET
    import shutil

    root = tmp_path_factory.mktemp("cli")
    pages = root / "pages"
    for rel in SMALL_SET:
        (pages / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(HANDBOOK / rel, pages / rel)
    (pages / "broken.md").write_bytes(b"\xff\xfe\x00\x00")
    result = rag(root / "home", "ingest", str(pages), "--json")
    assert result.returncode == 1, result.stderr  # one file failed, the rest went in
    summary = json.loads(result.stdout)
    assert summary["added"] == 5 and summary["failed"] == 1
    assert summary["failures"] == [{"path": "broken.md", "error": "a binary file, not text"}]
    return root / "home", pages


def test_search_json_has_the_documented_shape(cli_home):
    home, _ = cli_home
    result = rag(home, "search", "How much annual leave do I earn?", "--limit", "3", "--json")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert set(payload) == {"query", "results", "truncated"} and payload["truncated"] is False
    assert len(payload["results"]) == 3
    first = payload["results"][0]
    assert set(first) == {"source_id", "document_id", "title", "score", "retrievers", "excerpt", "source"}
    assert first["source_id"] == first["document_id"] == "fs:default:default:travel-and-leave/leave.md"
    assert first["retrievers"] == ["vector", "text"] and first["title"] == "Leave types"


def test_search_text_rendering_and_limit_clamp(cli_home):
    home, _ = cli_home
    result = rag(home, "search", "slack", "--limit", "0")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("### ") and result.stdout.count("\n### ") == 0  # clamped to 1
    assert "document_id: fs:default:default:tools/slack/getting-started.md" in result.stdout.splitlines()[1]
    assert "(score: 0.0" in result.stdout.splitlines()[0]


def test_reingest_summary_and_errors_without_tracebacks(cli_home):
    home, pages = cli_home
    result = rag(home, "ingest", str(pages))
    assert "unchanged" in result.stdout and "Traceback" not in result.stderr
    missing = rag(home, "ingest", str(pages / "nope"))
    assert missing.returncode == 2
    assert "no such directory" in missing.stderr and "Traceback" not in missing.stderr
    empty = rag(home, "search", "   ")
    assert empty.returncode == 2 and "`query` must be a non-empty string" in empty.stderr


def test_a_second_writer_is_refused_with_the_holder_named(cli_home):
    from rag.service import KnowledgeService
    from rag.settings import Settings

    home, pages = cli_home
    with KnowledgeService(Settings(home=home)):
        result = rag(home, "ingest", str(pages))
    assert result.returncode == 3
    assert f"in use by process {os.getpid()}" in result.stderr
