"""Reading a BEIR-layout dataset: corpus.jsonl, queries.jsonl and qrels/<split>.tsv."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

Qrels = dict[str, dict[str, int]]  # query id -> {corpus id: grade}


@dataclass
class BeirDataset:
    path: Path
    split: str
    corpus: list[dict]  # {"_id", "title", "text"}
    queries: dict[str, str]  # only the queries judged in this split, in file order
    qrels: Qrels  # only the relevant pairs (grade > 0)

    @property
    def name(self) -> str:
        return self.path.name


def _jsonl(path: Path) -> Iterator[dict]:
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def load_qrels(path: Path) -> Qrels:
    """A qrels TSV (with or without its `query-id corpus-id score` header); grades <= 0 are left out."""
    qrels: Qrels = {}
    with path.open(encoding="utf-8", newline="") as handle:
        for row in csv.reader(handle, delimiter="\t"):
            if len(row) < 3 or row[0] == "query-id":
                continue
            qid, doc, grade = row[0].strip(), row[1].strip(), int(float(row[2]))
            if grade > 0:
                qrels.setdefault(qid, {})[doc] = grade
    return qrels


def load_beir(path: str | Path, split: str = "test", limit: int | None = None) -> BeirDataset:
    """The corpus, and the queries of `split` that have at least one relevant document (as BEIR does).

    `limit` keeps the first N of those queries (the corpus is always whole)."""
    root = Path(path).expanduser().resolve()
    qrels_file = root / "qrels" / f"{split}.tsv"
    for needed in (root / "corpus.jsonl", root / "queries.jsonl", qrels_file):
        if not needed.is_file():
            raise FileNotFoundError(f"{needed}: missing (expected a BEIR-layout directory)")
    corpus = [
        {"_id": str(r["_id"]), "title": r.get("title") or "", "text": r.get("text") or ""}
        for r in _jsonl(root / "corpus.jsonl")
    ]
    qrels = load_qrels(qrels_file)
    queries = {str(q["_id"]): q["text"] for q in _jsonl(root / "queries.jsonl") if str(q["_id"]) in qrels}
    if limit is not None:
        queries = dict(list(queries.items())[:limit])
    qrels = {qid: qrels[qid] for qid in queries}
    return BeirDataset(root, split, corpus, queries, qrels)
