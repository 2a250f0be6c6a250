"""The `rag` command as a user runs it: ingest, then search, JSON and text."""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..support.processes import rag_run as rag


@pytest.fixture(scope="module")
def cli_home(tmp_path_factory) -> tuple[Path, Path]:
    from ..support.paths import HANDBOOK, SMALL_SET
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


PROGRESS_LINE = re.compile(r"ingest: (reading files|indexing chunks) (\d+)/(\d+) \((\d+) s\)")


def test_progress_is_plain_lines_when_the_output_is_not_a_terminal(cli_home, tmp_path):
    """`rag ingest docs > log 2>&1`: no bars drawn in the log, but lines that show it moving."""
    _, pages = cli_home
    result = rag(tmp_path / "home", "ingest", str(pages))  # standard output and error: pipes
    assert result.returncode == 1, result.stderr
    assert "\x1b" not in result.stderr and "━" not in result.stderr
    lines = [PROGRESS_LINE.fullmatch(line) for line in result.stderr.splitlines() if line.startswith("ingest: ")]
    assert lines and all(lines), result.stderr
    by_stage = {stage: [m for m in lines if m[1] == stage] for stage in ("reading files", "indexing chunks")}
    assert by_stage["reading files"][-1].group(2, 3) == ("6", "6")
    chunks = re.search(r"│ +(\d+) │ +[\d.]+ │$", result.stdout, re.M)[1]  # the summary's chunks column
    assert by_stage["indexing chunks"][-1].group(2, 3) == (chunks, chunks)
    for found in by_stage.values():  # its first and last line, and at most one a second between
        assert len(found) <= 2 + int(found[-1][4]) + 1
    again = rag(tmp_path / "home", "ingest", str(pages), "--json")  # a program reads it: no lines
    assert json.loads(again.stdout)["unchanged"] == 5 and "ingest: " not in again.stderr


def test_progress_lines_are_bounded_to_one_a_second_per_stage(capsys):
    from rag.cli_run import _progress_lines

    now = [0.0]
    progress = _progress_lines("ingest", clock=lambda: now[0])
    for done in range(1001):  # 1,000 files in 5 s, a report every 5 ms
        progress("reading", done, 1000)
        now[0] += 0.005
    progress("reading", 1000, 1000)  # the last report again: not a second line
    progress("indexing", 0, 40)
    printed = capsys.readouterr().err.splitlines()
    assert printed[0] == "ingest: reading files 0/1000 (0 s)" and printed[-2] == "ingest: reading files 1000/1000 (5 s)"
    assert len(printed) == 1 + 4 + 1 + 1 and printed[-1] == "ingest: indexing chunks 0/40 (0 s)"


def test_a_second_writer_is_refused_with_the_holder_named(cli_home):
    from rag.service import KnowledgeService
    from rag.settings import Settings

    home, pages = cli_home
    with KnowledgeService(Settings(home=home)):
        result = rag(home, "ingest", str(pages))
    assert result.returncode == 3
    assert f"in use by process {os.getpid()}" in result.stderr


def test_ask_json_text_and_errors(cli_home):
    home, _ = cli_home
    question = "How much annual leave do I earn each pay period?"
    result = rag(home, "ask", question, "--json")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert set(payload) == {"answer", "sources", "synthesizer", "abstained", "declined"} and payload["synthesizer"] == "extractive"
    first = payload["sources"][0]
    assert {"source_id", "document_id", "title", "score", "source", "excerpt", "excerpts"} <= set(first)
    assert first["document_id"] == first["source_id"] == "fs:default:default:travel-and-leave/leave.md"
    assert first["excerpts"][0]["version"] == 1 and first["excerpts"][0]["char_end"] > first["excerpts"][0]["char_start"]

    text = rag(home, "ask", question).stdout
    answer, sources = text.rstrip("\n").split("\n\nSources:\n")
    assert answer == payload["answer"]
    lines = sources.splitlines()
    assert len(lines) == len(payload["sources"])
    assert re.fullmatch(r"\[1\] .+ \(fs:default:default:travel-and-leave/leave\.md, score 0\.\d{4}\)", lines[0])

    nothing = rag(home, "ask", "What is the capital of Mongolia?")
    assert nothing.returncode == 0 and nothing.stdout == "The knowledge base has nothing on this question.\n"
    empty = rag(home, "ask", "  ")
    assert empty.returncode == 2 and empty.stderr == "error: `query` must be a non-empty string\n"


def test_ask_with_a_model_and_when_the_model_is_down(cli_home, tmp_path):
    home, _ = cli_home
    env = {"RAG_LLM_MODEL": "openai/gpt-4o-mini", "RAG_LLM__MOCK_RESPONSE": "You earn 4 hours [1]."}
    ok = rag_env(home, env, "ask", "How much annual leave do I earn?", "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["synthesizer"] == "llm:openai/gpt-4o-mini"
    history = tmp_path / "history.json"
    history.write_text("[{\"role\": \"user\"}]")
    bad = rag_env(home, env, "ask", "And sick leave?", "--history", str(history))
    assert bad.returncode == 2 and "history[0]" in bad.stderr
    down = {**env, "RAG_LLM__MOCK_RESPONSE": "litellm.RateLimitError", "RAG_LLM__MAX_ATTEMPTS": "1"}
    failed = rag_env(home, down, "ask", "How much annual leave do I earn?")
    assert failed.returncode == 1
    assert failed.stderr.startswith("error: the language model is unavailable (rate limited")
    assert "Traceback" not in failed.stderr and "annual leave" not in failed.stderr


def rag_env(home: Path, extra: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAG_HOME": str(home), **extra}
    return subprocess.run([sys.executable, "-m", "rag.cli", *args], capture_output=True, text=True, env=env, timeout=600)
