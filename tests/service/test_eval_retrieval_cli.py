"""`rag eval retrieval` end to end on a small BEIR-layout dataset written by the test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.beir import write_beir

def test_eval_retrieval_json_reports_every_lane_and_peer(tmp_path: Path):
    dataset = write_beir(tmp_path / "tiny")
    env = {**os.environ, "RAG_HOME": str(tmp_path / "unused-home")}
    result = subprocess.run(
        [sys.executable, "-m", "rag.cli", "eval", "retrieval", "--dataset", str(dataset), "--json"],
        capture_output=True, text=True, env=env, timeout=900,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["queries"] == 4 and report["dataset"] == "tiny"
    for system in ("hybrid", "text", "vector"):
        assert set(report[system]) == {"ndcg@10", "recall@100", "recall@10", "all@10"}
        assert report[system]["recall@100"] == 1.0  # six documents: every relevant one is retrieved
    assert set(report["peers"]) == {"bm25s", "llamaindex_chroma"}
    # Each query names its document plainly: the hybrid ranks it first every time.
    assert report["hybrid"]["ndcg@10"] == 1.0 and report["hybrid"]["all@10"] == 1.0
    assert not (tmp_path / "unused-home").exists()  # an eval never writes into the user's store


def test_eval_retrieval_refuses_a_directory_that_is_not_beir(tmp_path: Path):
    result = subprocess.run(
        [sys.executable, "-m", "rag.cli", "eval", "retrieval", "--dataset", str(tmp_path), "--json"],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode != 0
    assert "corpus.jsonl: missing" in result.stderr and "Traceback" not in result.stderr
