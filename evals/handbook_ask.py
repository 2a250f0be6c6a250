"""Everyday questions over the 18F handbook, asked through the ask pipeline: does the answer come
from the right page, does it hold the fact, are its citations valid, does it abstain when the
handbook has nothing, and how long does it take.

The questions are evals/fixtures/handbook_questions.yaml: answerable ones with the page(s) that
answer them and short facts copied from the page, and unanswerable ones marked off-topic or
near-topic.
Near-topic questions sound like workplace questions the handbook does not answer; no similarity
threshold can refuse them (their excerpts are about the same things), so they are reported apart.

    python -m evals.handbook_ask [--home DIR] [--repeats N] [--no-sentence-cache]
                                 [--model MODEL --mock-response TEXT] [--json PATH]

With ``--model`` and ``--mock-response`` the litellm path runs with litellm's mock response: the
table then gives the time spent outside the model (retrieval, prompt, citations), not answer quality.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from evals.answer_report import decline_counts

REPO = Path(__file__).resolve().parents[1]
QUESTIONS = REPO / "evals" / "fixtures" / "handbook_questions.yaml"
HANDBOOK = REPO.parent / "shared" / "datasets" / "handbook_18f" / "pages"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def citations_valid(answer: Any) -> bool:
    """Every [n] in the text names a source, sources are 1..k, and each is cited."""
    numbers = [int(n) for n in re.findall(r"\[(\d+)\]", answer.text)]
    return sorted(set(numbers)) == [s.number for s in answer.sources] == list(range(1, len(answer.sources) + 1))


def load_questions() -> dict[str, list[dict[str, Any]]]:
    return yaml.safe_load(QUESTIONS.read_text())


def score(svc: Any, principal: Any, data: dict[str, list[dict[str, Any]]], repeats: int = 1) -> dict[str, Any]:
    """Ask every question through ``svc.ask`` and score the answers (timed, warm)."""
    rows: list[dict[str, Any]] = []
    latencies: list[float] = []
    outside: list[float] = []  # with a model: each ask's time minus its model calls
    model_ms = [0.0]
    model = svc.chat_model
    if model is not None:
        complete = model.complete

        def timed(messages: Any) -> str:
            start = time.perf_counter()
            try:
                return complete(messages)
            finally:
                model_ms[0] += (time.perf_counter() - start) * 1000

        model.complete = timed
    svc.ask(principal, "warm up: how do I request leave?")  # model load, caches
    for kind in ("answerable", "unanswerable"):
        for q in data[kind]:
            for _ in range(repeats):
                model_ms[0] = 0.0
                start = time.perf_counter()
                answer = svc.ask(principal, q["question"])
                latencies.append((time.perf_counter() - start) * 1000)
                if model is not None and not answer.abstained:
                    outside.append(latencies[-1] - model_ms[0])
            # The vector lane's best similarity: what the abstention threshold is set against.
            best = svc.retriever.retrieve(q["question"], svc.scope(principal), 1, lanes=("vector",))
            pages = [":" + p for p in q.get("pages", [])]
            rows.append({
                "id": q["id"],
                "kind": q.get("kind", kind),
                "abstained": answer.abstained,
                "declined": answer.declined,
                "top_similarity": round(best[0].vector_similarity or 0.0, 3) if best else 0.0,
                "right_page": bool(answer.sources) and answer.sources[0].source_id.endswith(tuple(pages or ["\0"])),
                "cited_right_page": any(s.source_id.endswith(p) for s in answer.sources for p in pages),
                "fact": any(f.lower() in answer.text.lower() for f in q.get("facts", [])),
                "valid": citations_valid(answer),
                "answer": answer.text,
            })
    answerable = [r for r in rows if r["kind"] == "answerable"]
    share = lambda rs, key: sum(bool(r[key]) for r in rs) / len(rs) if rs else 0.0  # noqa: E731
    return {
        "synthesizer": svc.synthesizer.name,
        "answerable": len(answerable),
        "answered": 1 - share(answerable, "abstained"),
        "first_source_right_page": share(answerable, "right_page"),
        "cites_right_page": share(answerable, "cited_right_page"),
        "contains_fact": share(answerable, "fact"),
        "citations_valid": share(rows, "valid"),
        "off_topic_abstained": share([r for r in rows if r["kind"] == "off-topic"], "abstained"),
        "near_topic_abstained": share([r for r in rows if r["kind"] == "near-topic"], "abstained"),
        "declined_reasons": decline_counts([{**r, "declined_reason": r["declined"]} for r in rows], "abstained"),
        "answerable_min_similarity": min((r["top_similarity"] for r in answerable), default=0.0),
        "off_topic_max_similarity": max((r["top_similarity"] for r in rows if r["kind"] == "off-topic"), default=0.0),
        "asks_timed": len(latencies),
        "latency_p50_ms": round(statistics.median(latencies), 1),
        "latency_p95_ms": round(percentile(latencies, 0.95), 1),
        **({
            "outside_model_p50_ms": round(statistics.median(outside), 1),
            "outside_model_p95_ms": round(percentile(outside, 0.95), 1),
        } if outside else {}),
        "rows": rows,
    }


class NeverAsked:
    """The service's embedder, but what an ask embeds is not cached for the next one."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self.name = embedder.name
        self.pooled_sentences = getattr(embedder, "pooled_sentences", False)

    def embed(self, texts: list[str]) -> Any:
        if hasattr(self.embedder, "inner"):
            return self.embedder.embed(texts, store=False)
        return self.embedder.embed(texts)

    def embed_sentences(self, texts: list[str]) -> Any:
        if hasattr(self.embedder, "embed_sentences"):
            return self.embedder.embed_sentences(texts, store=False)
        return self.embedder.embed(texts)

    def embed_query(self, text: str) -> Any:
        return self.embedder.embed_query(text)


def run(home: Path, model: str | None, mock: str | None, repeats: int, sentence_cache: bool = True) -> dict[str, Any]:
    import rag  # noqa: F401  (process defaults first)
    from rag.service import KnowledgeService, Principal
    from rag.settings import LLMSettings, Settings

    settings = Settings(home=home)
    principal = Principal.local_admin("default")
    if not (home / "rag.db").exists():
        with KnowledgeService(settings) as writer:
            writer.ensure_workspace("default")
            print(f"ingesting {HANDBOOK} …", file=sys.stderr)
            writer.ingest_directory(principal, HANDBOOK)
    if model:
        settings = settings.model_copy(update={"llm_model": model, "llm": LLMSettings(mock_response=mock)})
    with KnowledgeService(settings, writer=False) as svc:
        if not sentence_cache and not model:
            # As for a question never asked before: the sentence vectors publishing cached are
            # there, but nothing an earlier ask embedded is kept.
            svc.synthesizer.embedder = NeverAsked(svc.embedder)
        return score(svc, principal, load_questions(), repeats)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", type=Path, help="RAG_HOME to use (ingested on first use); default: a temporary one")
    parser.add_argument("--model", help="litellm model name (with --mock-response: the litellm path, mocked)")
    parser.add_argument("--mock-response", help="the text litellm returns instead of calling the model")
    parser.add_argument("--repeats", type=int, default=1, help="asks per question, for the latency figures")
    parser.add_argument("--no-sentence-cache", action="store_true",
                        help="extractive: keep nothing an ask embeds for the next (every question as if never "
                        "asked; the sentence vectors publishing cached are used)")
    parser.add_argument("--json", dest="json_out", help="write the result (with every answer) to PATH, '-' for stdout")
    args = parser.parse_args(argv)
    from benchmarks import write_json

    with tempfile.TemporaryDirectory() as scratch:
        result = run(
            args.home or Path(scratch) / "home", args.model, args.mock_response, args.repeats,
            sentence_cache=not args.no_sentence_cache,
        )
    print(f"\nhandbook questions, synthesizer {result['synthesizer']}")
    print("| metric | value |\n| --- | --- |")
    for key, value in result.items():
        if key not in ("rows", "synthesizer"):
            print(f"| {key} | {value:.3f} |" if isinstance(value, float) and value <= 1 else f"| {key} | {value} |")
    write_json(result, args.json_out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
