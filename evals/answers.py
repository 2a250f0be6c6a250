"""`rag eval run`: cited answers on a question-answering dataset, scored against its gold
answers and gold passages, beside two baselines in the same run.

The corpus is ingested through `KnowledgeService.ingest_records` (each record one document whose
source_id ends with `:<_id>`) into a workspace of its own; every question goes through
`KnowledgeService.ask`, the pipeline the API uses, and only that call is timed. Then, untimed,
one more retrieval gives recall@10 and the "top-1 copy" baseline (the first retrieved excerpt,
cited). "Always abstain" refuses everything. A configured model can judge citation support
(evals/support.py) after the timed loop. The retriever remembers query vectors (QueryMemo), so the
untimed retrieval reuses the vector the timed ask computed.
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

from evals.answer_metrics import aggregate, score_answer
from evals.answer_report import decline_counts
from evals.metrics import recall
from evals.qa import QADataset, Question, load_qa, make_unanswerable
from evals.retrieval import Bench, corpus_id, documents, eval_home, eval_settings, open_bench, progress_bar
from rag.ingest.parse import parse_record
from rag.retrieve.types import Hit
from rag.service.query.answers import NOTHING_FOUND
from rag.settings import Settings
from rag.synthesize.citations import apply_citations
from rag.synthesize.types import Answer

GROUPS = ("all", "yes_no", "other")
DEPTH = 30  # chunks retrieved for recall@10: enough for 10 distinct records of one or more chunks


@dataclass
class AnswerEvalOptions:
    dataset: Path
    synthesizer: str | None = None  # "extractive", a litellm model, or None: as configured
    limit: int | None = None
    unanswerable: float = 0.0
    seed: int = 0
    home: Path | None = None
    embed_cache: Path | None = None
    judge: str | None = None  # a litellm model for citation support; None: the configured model, if any


def record_bodies(dataset: QADataset) -> dict[str, str]:
    """Each ingested record's document body, as ingestion builds it: what a citation must quote."""
    return {r["_id"]: parse_record(r["title"], r["text"], r["_id"]).body for r in dataset.corpus}


def valid_numbers(answer: Answer, bodies: dict[str, str]) -> set[int]:
    """The source numbers that point at a real record, with every cited excerpt a span of it."""
    valid = set()
    for source in answer.sources:
        body = bodies.get(corpus_id(source.source_id))
        if body is not None and all(body[h.char_start:h.char_end] == h.text for h in source.hits):
            valid.add(source.number)
    return valid


def top1_copy(hits: list[Hit], question: str) -> Answer:
    if not hits:
        return Answer(NOTHING_FOUND, [], synthesizer="top1_copy", abstained=True, question=question)
    text, sources = apply_citations(f"{hits[0].text.strip()} [1]", hits[:1])
    return Answer(text, sources, synthesizer="top1_copy", question=question)


def _refused(answer: Answer) -> bool:
    return answer.abstained or not answer.sources


def _row(q: Question, answer: Answer, bodies: dict[str, str]) -> dict[str, Any]:
    cited = [corpus_id(s.source_id) for s in answer.sources]
    refused = _refused(answer)
    return {
        "answer": answer.text, "cited": cited, "refused": refused, "declined_reason": answer.declined,
        "scores": score_answer(answer.text, cited, refused, q.answers, q.gold, valid_numbers(answer, bodies)),
    }


def _settings(options: AnswerEvalOptions, home: Path) -> tuple[Settings, str | None]:
    """The run's settings, and the judge: --judge, else the model that answers, else the configured
    one even when --synthesizer says extractive ('none': no judge)."""
    settings = eval_settings(home, options.embed_cache)
    configured = settings.llm_model
    if options.synthesizer:
        llm_model = None if options.synthesizer == "extractive" else options.synthesizer
        settings = settings.model_copy(update={"llm_model": llm_model})
    judge = options.judge or settings.llm_model or configured
    return settings, None if judge == "none" else judge


def _summaries(rows: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """group -> system -> the issue's metrics."""
    result: dict[str, dict[str, dict[str, Any]]] = {}
    for group in GROUPS:
        chosen = [r for r in rows if group == "all" or r["kind"] == group]
        recalls = [r["retrieval_recall@10"] for r in chosen]
        result[group] = {
            "rag": aggregate([r["scores"] for r in chosen], recalls, [r["latency_ms"] for r in chosen]),
            "top1_copy": aggregate([r["top1_copy"]["scores"] for r in chosen], recalls, []),
            "always_abstain": aggregate([r["always_abstain"]["scores"] for r in chosen], [], []),
        }
    return result


def _ask_all(bench: Bench, dataset: QADataset, progress: Progress) -> list[dict[str, Any]]:
    """Every question through `ask` (timed), then one untimed retrieval for recall@10 and top-1 copy.
    Each row keeps its Answer under "_answer" for the judge."""
    svc, bodies = bench.service, record_bodies(dataset)
    rows: list[dict[str, Any]] = []
    task = progress.add_task("questions", total=len(dataset.questions))
    if dataset.questions:  # loads what the first ask would (lazy engines, caches), so it is not timed
        svc.ask(bench.principal, dataset.questions[0].question, kb_name=dataset.name)
    for q in dataset.questions:
        start = time.perf_counter()
        answer = svc.ask(bench.principal, q.question, kb_name=dataset.name)
        latency = (time.perf_counter() - start) * 1000
        hits = svc.retriever.retrieve(q.question, bench.scope, k=DEPTH)
        found = recall(documents(hits, 10), {g: 1 for g in q.gold}, 10) if q.answerable else None
        rows.append({
            "id": q.id, "question": q.question, "kind": q.kind, "answers": q.answers, "gold": q.gold,
            **_row(q, answer, bodies), "latency_ms": round(latency, 1), "retrieval_recall@10": found,
            "top1_copy": _row(q, top1_copy(hits, q.question), bodies),
            "always_abstain": _row(q, Answer(NOTHING_FOUND, [], abstained=True), bodies),
            "_answer": answer,
        })
        progress.advance(task)
    return rows


def run_answer_eval(
    options: AnswerEvalOptions, console: Console | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The run's summary (what --json prints) and its per-question rows."""
    started = time.perf_counter()
    load_before = os.getloadavg()
    dataset = load_qa(options.dataset, options.limit)
    unanswerable = make_unanswerable(dataset, options.unanswerable, options.seed)
    with ExitStack() as stack, progress_bar(console or Console(stderr=True)) as progress:
        home = eval_home(stack, options.home)
        settings, judge = _settings(options, home)
        bench = open_bench(dataset, home, progress, options.embed_cache, settings)
        stack.callback(bench.service.close)
        ingested = time.perf_counter()
        rows = _ask_all(bench, dataset, progress)
        asked = time.perf_counter()
        support = _support(judge, settings, rows, progress) if judge else None
        synthesizer = bench.service.synthesizer.name
    for row in rows:
        del row["_answer"]
    summary = {
        "dataset": dataset.name, "synthesizer": synthesizer,
        "questions": len(rows), "corpus_records": len(dataset.corpus),
        "unanswerable": {"fraction": options.unanswerable, "seed": options.seed, "questions": len(unanswerable),
                         "removed_records": len(dataset.removed), "ids": unanswerable},
        "scores": _summaries(rows),
        "declined_reasons": decline_counts(rows, "refused"),
        "citation_support": support,
        **run_facts(settings, started, ingested, asked, load_before),
    }
    return summary, rows


def run_facts(settings: Settings, started: float, ingested: float, asked: float,
              load_before: tuple[float, float, float]) -> dict[str, Any]:
    """What every eval run's summary records about how it ran: the settings that shape answers,
    the time of each phase, the machine's load and its CPUs."""
    return {
        "settings": {name: getattr(settings, name).model_dump(mode="json") for name in ("answer", "retrieve", "index")},
        "seconds": {"total": round(time.perf_counter() - started, 1), "ingest": round(ingested - started, 1),
                    "questions": round(asked - ingested, 1)},
        "load_average": {"start": [round(x, 2) for x in load_before],
                         "end": [round(x, 2) for x in os.getloadavg()]},
        "cpus": os.cpu_count(),
    }


def _support(judge: str, settings: Settings, rows: list[dict[str, Any]], progress: Progress) -> dict[str, Any]:
    """Citation support of our answers (the ones not refused), judged by `judge` through litellm."""
    from evals.support import model_entails, support_scores
    from rag.models.llm import ChatModel

    entails = model_entails(ChatModel(judge, settings.llm))
    given = [r for r in rows if not r["refused"]]
    task = progress.add_task("citation support (judge)", total=len(given))
    for row in given:
        answer: Answer = row["_answer"]
        premises = {s.number: "\n\n".join(h.text for h in s.hits) for s in answer.sources}
        row["support"] = support_scores(answer.text, premises, entails)
        progress.advance(task)
    n = len(given)
    return {
        "judge": judge,
        "answers_judged": n,
        "support_recall": round(sum(r["support"]["support_recall"] for r in given) / n, 4) if n else None,
        "support_precision": round(sum(r["support"]["support_precision"] for r in given) / n, 4) if n else None,
    }
