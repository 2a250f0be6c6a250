"""A small BEIR-layout dataset written by a test (`rag eval retrieval`, evals.tune_fusion)."""

from __future__ import annotations

import json
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
