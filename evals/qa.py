"""Reading a question-answering dataset: corpus.jsonl and questions.jsonl (HotpotQA-style).

corpus.jsonl holds `{"_id", "title"?, "text"}`; questions.jsonl holds `{"_id", "question",
"answers": [...], "gold_passage_ids": [...]}`, where an empty `answers` marks an unanswerable
question. `--unanswerable` makes some answerable questions unanswerable by leaving their gold
passages out of the corpus.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from evals.beir import BeirDataset, _jsonl

YES_NO = {"yes", "no"}


@dataclass
class Question:
    id: str
    question: str
    answers: list[str]
    gold: list[str]  # corpus ids of the passages that support the answer
    yes_no: bool = False  # its answer is yes or no (kept when the question is made unanswerable)

    @property
    def answerable(self) -> bool:
        return bool(self.answers)

    @property
    def kind(self) -> str:
        return "yes_no" if self.yes_no else "other"


@dataclass
class QADataset:
    path: Path
    corpus: list[dict]  # {"_id", "title", "text"}, the records to ingest
    questions: list[Question]
    removed: list[str] = field(default_factory=list)  # corpus ids left out to make questions unanswerable

    @property
    def name(self) -> str:
        return self.path.name


def load_qa(path: str | Path, limit: int | None = None) -> QADataset:
    """The whole corpus and the first `limit` questions (all of them without a limit)."""
    root = Path(path).expanduser().resolve()
    for needed in (root / "corpus.jsonl", root / "questions.jsonl"):
        if not needed.is_file():
            raise FileNotFoundError(f"{needed}: missing (expected corpus.jsonl and questions.jsonl)")
    corpus = [
        {"_id": str(r["_id"]), "title": r.get("title") or "", "text": r.get("text") or ""}
        for r in _jsonl(root / "corpus.jsonl")
    ]
    questions = []
    for q in _jsonl(root / "questions.jsonl"):
        answers = [str(a) for a in q.get("answers") or []]
        yes_no = bool(answers) and all(a.strip().lower() in YES_NO for a in answers)
        gold = [str(g) for g in q.get("gold_passage_ids") or []]
        questions.append(Question(str(q["_id"]), q["question"], answers, gold, yes_no))
    return QADataset(root, corpus, questions[:limit] if limit is not None else questions)


def load_qa_as_beir(path: str | Path, limit: int | None = None) -> BeirDataset:
    """A question-answering dataset as a retrieval benchmark: each question with gold passages is a
    query, and its gold passages are its relevant documents (grade 1). HotpotQA's two gold
    paragraphs per question make nDCG@10 and Recall@10 there a measure of finding both hops."""
    dataset = load_qa(path, limit)
    scored = [q for q in dataset.questions if q.gold]
    queries = {q.id: q.question for q in scored}
    qrels = {q.id: {gold: 1 for gold in q.gold} for q in scored}
    return BeirDataset(dataset.path, "questions", dataset.corpus, queries, qrels)


def make_unanswerable(dataset: QADataset, fraction: float, seed: int) -> list[str]:
    """Turn `fraction` of the answerable questions into unanswerable ones (seeded): their gold
    passages leave the corpus and their answers are cleared. Returns their ids.

    Only questions whose gold passages are gold for no other question are eligible: removing a
    shared passage would silently take the evidence of a question that is still scored as
    answerable."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError("--unanswerable must be a fraction between 0 and 1")
    answerable = [q for q in dataset.questions if q.answerable and q.gold]
    wanted = round(fraction * len(answerable))
    if wanted == 0:
        return []
    uses = Counter(g for q in dataset.questions for g in q.gold)
    eligible = [q for q in answerable if all(uses[g] == 1 for g in q.gold)]
    chosen = random.Random(seed).sample(eligible, min(wanted, len(eligible)))
    gone = {g for q in chosen for g in q.gold}
    for q in chosen:
        q.answers = []
    dataset.corpus = [r for r in dataset.corpus if r["_id"] not in gone]
    dataset.removed = sorted(gone)
    return sorted(q.id for q in chosen)
