"""`rag eval run` on a pages-plus-questions dataset (evals/pages.py): cited answers scored against
gold pages and answer keys, by question kind and overall.

The page folder is ingested through `KnowledgeService.ingest_directory`, as `rag ingest` does, into
a fresh home (the shared embedding cache makes a second run cheap): each page becomes a document
whose source_id ends with its path relative to the folder, so a cited source or a search result
maps back to its page. Every question goes through `KnowledgeService.ask`, the pipeline the API
uses, and only that call is timed (after one untimed warm-up ask); then, untimed,
`KnowledgeService.search` with limit 5 gives the top 5 pages for retrieval@5. The metrics are in
evals/page_metrics.py.
"""

from __future__ import annotations

import os
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress
from sqlalchemy import select

from evals.answer_report import decline_counts
from evals.answers import AnswerEvalOptions, _settings, _support, run_facts
from evals.page_metrics import TOP, groups, score_question, text_found
from evals.pages import PageQuestion, PagesDataset, load_pages, page_id, split_of
from evals.retrieval import Bench, eval_home, open_bench, progress_bar
from rag.render import source_pages
from rag.service import KnowledgeService, Principal
from rag.service.indexing.ingest import IngestProgress, IngestReport
from rag.store.models import PUBLISHED, DocumentVersion, Node
from rag.synthesize.types import Answer


@dataclass
class PagesEvalOptions:
    dataset: Path
    synthesizer: str | None = None  # "extractive", a litellm model, or None: as configured
    split: str = "all"  # all, odd (calibration) or even (held out)
    limit: int | None = None
    home: Path | None = None
    embed_cache: Path | None = None
    judge: str | None = None  # a litellm model for citation support; "none": no judge
    questions: Path | None = None  # a questions file instead of the dataset's questions.jsonl


def _split(question_id: str) -> str | None:
    try:
        return split_of(question_id)
    except ValueError:
        return None


def declined(answer: Answer) -> bool:
    """The answer says the knowledge base has nothing, or cites nothing."""
    return answer.abstained or not answer.sources


def _ingester(dataset: PagesDataset):
    def ingest(service: KnowledgeService, principal: Principal, progress: IngestProgress) -> IngestReport:
        return service.ingest_directory(principal, dataset.root, kb_name=dataset.name, progress=progress)

    return ingest


def _ask_all(bench: Bench, dataset: PagesDataset, progress: Progress) -> list[dict[str, Any]]:
    """Every question through `ask` (timed), then an untimed `search` for the top 5 pages. Each row
    keeps its Answer under "_answer" for the judge."""
    svc, kb = bench.service, dataset.name
    rows: list[dict[str, Any]] = []
    task = progress.add_task("questions", total=len(dataset.questions))
    if dataset.questions:  # loads what the first ask would (lazy engines, caches), so it is not timed
        svc.ask(bench.principal, dataset.questions[0].question, kb_name=kb)
    for q in dataset.questions:
        start = time.perf_counter()
        answer = svc.ask(bench.principal, q.question, kb_name=kb)
        latency = (time.perf_counter() - start) * 1000
        hits = svc.search(bench.principal, q.question, limit=TOP, kb_name=kb).hits
        top = list(dict.fromkeys(page_id(h.source_id) for h in hits))
        cited = [page_id(s.source_id) for s in answer.sources]
        numbers = {page_id(s.source_id): source_pages(s) for s in answer.sources}
        refused = declined(answer)
        found = _text_found(bench, dataset, q)
        scores = score_question(q, answer.text, cited, top, refused, numbers, found)
        rows.append({
            "id": q.id, "kind": q.kind, "behaviour": q.behaviour, "split": _split(q.id), "question": q.question,
            "answerable": q.answerable,
            "gold_pages": list(q.gold_pages), "gold_page_number": q.gold_page_number,
            "answer_keys": list(q.answer_keys), "key_rule": q.key_rule, "gold_rule": q.gold_rule,
            "answer": answer.text, "cited_pages": cited, "top5_pages": top, "declined": refused,
            "declined_reason": answer.declined,
            "cited_page_numbers": {p: n for p, n in numbers.items() if n},
            "key_hit": None if scores["key_hit"] is None else scores["key_hit"] == 1.0, "scores": scores,
            "latency_ms": round(latency, 1), "_answer": answer,
        })
        progress.advance(task)
    return rows


def _text_found(bench: Bench, dataset: PagesDataset, q: PageQuestion) -> bool | None:
    """Whether the published text of the question's file holds its support string (on its page, for
    a PDF); None when the question has no support string or no single file."""
    if not q.support or len(q.gold_pages) != 1:
        return None
    source_id = f"fs:{bench.principal.workspace_id}:{dataset.name}:{q.gold_pages[0]}"
    with bench.service.db.session() as session:
        row = session.execute(
            select(DocumentVersion.body, DocumentVersion.pages).join(Node, Node.id == DocumentVersion.node_id)
            .where(Node.source_id == source_id, DocumentVersion.status == PUBLISHED)
        ).first()
    return row is not None and text_found(q.support, row.body, row.pages, q.gold_page_number)


def _ingest_summary(dataset: PagesDataset, report: IngestReport | None) -> dict[str, Any]:
    """What was ingested, what was not and why, and which questions lost a gold page to that."""
    if report is None:
        return {}
    ingested = set(report.added) | set(report.updated) | set(report.unchanged)
    missing = [q.id for q in dataset.questions if any(p not in ingested for p in q.gold_pages)]
    return {
        "folder": dataset.root.name, "pages": len(ingested), "chunks": report.chunks,
        "skipped": [{"path": p, "reason": r} for p, r in report.skipped],
        "failed": [{"path": p, "error": e} for p, e in report.failed],
        "questions_missing_gold_pages": missing,
    }


def _judge(judge: str | None, settings: Any, rows: list[dict[str, Any]], progress: Progress) -> dict[str, Any] | None:
    """Citation support of the answers that did not decline, judged through litellm (evals/support.py)."""
    if not judge:
        return None
    views = [{"refused": r["declined"], "_answer": r["_answer"]} for r in rows]
    support = _support(judge, settings, views, progress)
    for row, view in zip(rows, views):
        if "support" in view:
            row["support"] = view["support"]
    return support


def run_pages_eval(
    options: PagesEvalOptions, console: Console | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The run's summary (what --json prints) and its per-question rows."""
    started = time.perf_counter()
    load_before = os.getloadavg()
    console = console or Console(stderr=True)
    dataset = load_pages(options.dataset, options.split, options.limit, options.questions)
    with ExitStack() as stack, progress_bar(console) as progress:
        home = eval_home(stack, options.home)
        settings, judge = _settings(
            AnswerEvalOptions(options.dataset, options.synthesizer, embed_cache=options.embed_cache,
                              judge=options.judge), home,
        )
        bench = open_bench(dataset, home, progress, options.embed_cache, settings, ingest=_ingester(dataset))
        stack.callback(bench.service.close)
        ingest = _ingest_summary(dataset, bench.ingest_report)
        for item in ingest["failed"]:
            progress.console.print(f"[yellow]not ingested: {item['path']}: {item['error']}")
        if ingest["skipped"]:
            progress.console.print(f"[yellow]{len(ingest['skipped'])} file(s) skipped, e.g. "
                                   f"{ingest['skipped'][0]['path']}: {ingest['skipped'][0]['reason']}")
        ingested = time.perf_counter()
        rows = _ask_all(bench, dataset, progress)
        asked = time.perf_counter()
        support = _judge(judge, settings, rows, progress)
        synthesizer = bench.service.synthesizer.name
    for row in rows:
        del row["_answer"]
    summary = {
        "dataset": dataset.name, "layout": "pages", "synthesizer": synthesizer, "split": dataset.split,
        "questions_file": str(dataset.questions_file) if dataset.questions_file else None,
        "questions": len(rows), "dataset_questions": dataset.total_questions,
        "corpus_records": ingest["pages"], "ingest": ingest,
        "scores": {group: {"rag": figures} for group, figures in groups(rows, dataset.split).items()},
        "declined_reasons": decline_counts(rows, "declined"),
        "citation_support": support,
        **run_facts(settings, started, ingested, asked, load_before),
    }
    return summary, rows
