"""Calibrate the extractive answer's decline thresholds on the development questions only.

The development split is the handbook fixture (evals/fixtures/handbook_questions.yaml, all of it)
plus the odd-numbered uv_docs questions; the even-numbered uv_docs questions are held out for the
figures in docs/benchmarks.md and play no part here. Retrieval runs once per question; the
synthesizer then runs again for every combination of the four settings, and a table gives, for
each, the share of near-topic questions declined, of answerable ones wrongly declined, and of
answerable ones whose answer holds a key fact. The recommended row declines the most near-topic
questions while wrongly declining at most `--max-wrong` of the answerable ones (ties: more facts).

    python -m evals.calibrate_decline [--handbook-home DIR] [--uv-home DIR] [--max-wrong 0.05]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rag.synthesize.extractive.tuning import TUNING

REPO = Path(__file__).resolve().parents[1]
DATASETS = REPO.parent / "shared" / "datasets"
GRID = {
    "min_subject_coverage": (0.3, 0.5, 0.7),
    "paraphrase_similarity": (0.45, 0.5, 0.55, 0.6),
    "unused_word_similarity": (0.5, 0.55, 0.6, 0.65),
    "subject_max_share": (0.02, 0.05, 0.1),
}


@dataclass
class DevQuestion:
    id: str
    question: str
    answerable: bool
    facts: list[str]
    hits: Any = None


def handbook_questions() -> list[DevQuestion]:
    import yaml

    data = yaml.safe_load((REPO / "evals" / "fixtures" / "handbook_questions.yaml").read_text())
    found = [DevQuestion(q["id"], q["question"], True, q["facts"]) for q in data["answerable"]]
    found += [DevQuestion(q["id"], q["question"], False, []) for q in data["unanswerable"] if q["kind"] == "near-topic"]
    return found


def uv_questions() -> list[DevQuestion]:
    rows = [json.loads(line) for line in (DATASETS / "uv_docs" / "questions.jsonl").read_text().splitlines() if line]
    return [
        DevQuestion(q["_id"], q["question"], q["kind"] != "near_topic", q["answer_keys"])
        for q in rows if int(q["_id"][2:]) % 2 == 1 and q["kind"] != "multi"
    ]


def open_service(home: Path, pages: Path) -> Any:
    from rag.service import KnowledgeService, Principal
    from rag.settings import Settings

    settings = Settings(home=home)
    if not (home / "rag.db").exists():
        print(f"ingesting {pages} …", file=sys.stderr)
        with KnowledgeService(settings) as writer:
            writer.ensure_workspace("default")
            writer.ingest_directory(Principal.local_admin("default"), pages)
    return KnowledgeService(settings, writer=False)


def retrieve(svc: Any, questions: list[DevQuestion]) -> None:
    from rag.service import Principal
    from rag.synthesize.relevance import relevant_hits

    scope = svc.scope(Principal.local_admin("default"), None)
    for q in questions:
        query = svc.engines.retriever.query(q.question)
        hits = svc.engines.retriever.retrieve(query, scope, svc.settings.answer.excerpts)
        q.hits = (query, relevant_hits(q.question, hits, svc.settings.answer))


def score(svc: Any, questions: list[DevQuestion], values: dict[str, float]) -> dict[str, list[bool]]:
    synthesizer = svc.engines.synthesizer
    synthesizer.tuning = replace(TUNING, **values)
    result: dict[str, list[bool]] = {"near_declined": [], "wrongly_declined": [], "fact": []}
    for q in questions:
        query, hits = q.hits
        answer = synthesizer.answer(query, hits) if hits else None
        declined = answer is None or answer.abstained
        if not q.answerable:
            result["near_declined"].append(declined)
            continue
        result["wrongly_declined"].append(declined)
        result["fact"].append(not declined and any(f.lower() in answer.text.lower() for f in q.facts))
    return result


def share(values: list[bool]) -> float:
    return sum(values) / len(values) if values else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--handbook-home", type=Path, help="RAG_HOME for the handbook (ingested on first use)")
    parser.add_argument("--uv-home", type=Path, help="RAG_HOME for uv_docs (ingested on first use)")
    parser.add_argument("--max-wrong", type=float, default=0.05, help="most answerable questions wrongly declined")
    args = parser.parse_args(argv)
    import rag  # noqa: F401  (process defaults first)

    with tempfile.TemporaryDirectory() as scratch:
        sets = [
            (args.handbook_home or Path(scratch) / "handbook", DATASETS / "handbook_18f" / "pages", handbook_questions()),
            (args.uv_home or Path(scratch) / "uv", DATASETS / "uv_docs" / "pages", uv_questions()),
        ]
        services = []
        for home, pages, questions in sets:
            svc = open_service(home, pages).__enter__()
            retrieve(svc, questions)
            services.append((svc, questions))
        rows = []
        names = list(GRID)
        for combo in itertools.product(*(GRID[n] for n in names)):
            values = dict(zip(names, combo))
            merged: dict[str, list[bool]] = {"near_declined": [], "wrongly_declined": [], "fact": []}
            for svc, questions in services:
                for key, found in score(svc, questions, values).items():
                    merged[key] += found
            rows.append((values, {k: share(v) for k, v in merged.items()}))
        for svc, _ in services:
            svc.__exit__(None, None, None)
    print("| " + " | ".join(names) + " | near-topic declined | answerable wrongly declined | fact in answer |")
    print("|" + " --- |" * (len(names) + 3))
    for values, m in rows:
        print("| " + " | ".join(str(values[n]) for n in names)
              + f" | {m['near_declined']:.3f} | {m['wrongly_declined']:.3f} | {m['fact']:.3f} |")
    allowed = [r for r in rows if r[1]["wrongly_declined"] <= args.max_wrong] or rows
    best = max(allowed, key=lambda r: (r[1]["near_declined"], r[1]["fact"], -r[1]["wrongly_declined"]))
    print("\nrecommended (rag/synthesize/extractive/tuning.py):", " ".join(f"{k}={v}" for k, v in best[0].items()), best[1])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
