"""`rag eval retrieval` end to end on a small BEIR-layout dataset written by the test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

DOCS = {
    "d1": ("Annual leave", "Employees earn four hours of annual leave every pay period during their first three years."),
    "d2": ("Travel meals", "Meals on official travel are reimbursed at the per diem rate for the destination city."),
    "d3": ("Slack channels", "Join public Slack channels from the channel browser; private channels need an invitation."),
    "d4": ("Laptop setup", "On your first day, IT ships a laptop; enroll it in device management before use."),
    "d5": ("Parking", "The garage under the building has bicycle racks and a few visitor parking spaces."),
    "d6": ("Coffee", "The kitchen on the fourth floor has an espresso machine and oat milk."),
}
QUERIES = {
    "q1": ("How much annual leave do employees earn?", "d1"),
    "q2": ("Are meals reimbursed when I travel?", "d2"),
    "q3": ("How do I join a Slack channel?", "d3"),
    "q4": ("Where can I park my bike?", "d5"),
}


def write_beir(root: Path) -> Path:
    (root / "qrels").mkdir(parents=True)
    with (root / "corpus.jsonl").open("w") as f:
        for doc_id, (title, text) in DOCS.items():
            f.write(json.dumps({"_id": doc_id, "title": title, "text": text}) + "\n")
    with (root / "queries.jsonl").open("w") as f:
        for qid, (text, _) in QUERIES.items():
            f.write(json.dumps({"_id": qid, "text": text}) + "\n")
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, (_, d) in QUERIES.items())
    )
    return root


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
