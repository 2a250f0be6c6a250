"""Retrieval quality on a BEIR-layout dataset: each lane of the search index alone, the hybrid
(every lane, fused and reranked as the service does), and peers.

The corpus is ingested through `KnowledgeService.ingest_records` (one document per record) and
every query goes to the retriever stage itself (`svc.retriever.retrieve`), not to `svc.search`,
which would write an activity row per query. Hits are chunks; a document ranks at its best chunk.
A question-answering dataset (HotpotQA's layout: corpus.jsonl and questions.jsonl) is scored the
same way, its gold passages being the relevant documents.
"""

from __future__ import annotations

import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np
import platformdirs
from sqlalchemy import select
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from evals.beir import BeirDataset, load_beir
from evals.pages import PagesDataset
from evals.qa import QADataset, load_qa_as_beir
from evals.metrics import evaluate
from rag.models.embed import Embedder, embed_search_query
from rag.retrieve.types import Hit, LaneHit, Scope
from rag.service import KnowledgeService, Principal
from rag.service.indexing.ingest import IngestProgress, IngestReport
from rag.settings import Settings
from rag.store.models import Chunk, Node

HYBRID = "hybrid"  # every lane of the search index, as a search uses them
DEPTH = 300  # chunks asked of each lane and kept after fusion: enough for 100 distinct documents
TOP = 100  # documents per query that the metrics see
WORKSPACE = "default"
Ingester = Callable[[KnowledgeService, Principal, IngestProgress], IngestReport]


def default_embed_cache() -> Path:
    """RAG_EMBED_CACHE when set, else the user's cache directory (shared by every eval run)."""
    return Settings().embed_cache or Path(platformdirs.user_cache_dir("rag", appauthor=False)) / "embeddings.sqlite"


def systems(lanes: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """What an eval scores: each lane alone, and the hybrid of them all."""
    return {**{name: (name,) for name in lanes}, HYBRID: tuple(lanes)}


def load_dataset(path: Path, split: str = "test", limit: int | None = None) -> BeirDataset:
    """A BEIR-layout directory, or a question-answering one (questions.jsonl) scored by its gold passages."""
    if (Path(path) / "questions.jsonl").is_file() and not (Path(path) / "queries.jsonl").is_file():
        return load_qa_as_beir(path, limit)
    return load_beir(path, split, limit)


def corpus_id(source_id: str) -> str:
    return source_id.rsplit(":", 1)[1]


def documents(hits: Sequence[Hit], n: int = TOP) -> list[str]:
    """Corpus ids in rank order, each at its best chunk."""
    return list(dict.fromkeys(corpus_id(h.source_id) for h in hits))[:n]


def progress_bar(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description:<28}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        TimeRemainingColumn(), console=console, transient=False,
    )


class QueryMemo:
    """The service's embedder, remembering query vectors: each query is embedded once per run,
    not once per lane and peer. Quality only; this harness measures no latency."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.embed_query = lru_cache(maxsize=4096)(inner.embed_query)
        self.embed_search_query = lru_cache(maxsize=4096)(lambda text: embed_search_query(inner, text))

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.embed(texts)


@dataclass
class Bench:
    """An open service with the dataset ingested: what every eval and the tuner query."""

    service: KnowledgeService
    principal: Principal
    dataset: BeirDataset | QADataset | PagesDataset
    scope: Scope
    embedder: QueryMemo
    ingest_report: IngestReport | None = None

    @property
    def lanes(self) -> list[str]:
        """The search index's lanes, in its order."""
        return list(self.service.index.lanes)

    def retrieve(self, query: str, lanes: Sequence[str] | None, depth: int = DEPTH) -> list[Hit]:
        """A search's ranking (the search encoder's query vector, as search_knowledge ranks)."""
        retriever = self.service.retriever
        return retriever.retrieve(retriever.query(query, search=True), self.scope, k=depth, lanes=lanes, depth=depth)

    def lane_rankings(self, query: str, depth: int = DEPTH) -> tuple[dict[str, list[LaneHit]], dict[int, str]]:
        """Each lane's own chunk ranking (for re-fusion), and the corpus id of every chunk in them."""
        retriever = self.service.retriever
        with retriever.db.session() as session:
            lanes = retriever.lane_hits(session, retriever.query(query, search=True), self.scope, depth)
            ids = sorted({h.chunk_id for hits in lanes.values() for h in hits})
            rows = session.execute(
                select(Chunk.id, Node.source_id, Node.id).join(Node, Node.id == Chunk.node_id).where(Chunk.id.in_(ids))
            ).all() if ids else []
        chunk_doc = {int(chunk): corpus_id(source) if source else node for chunk, source, node in rows}
        return {lane: [h for h in hits if h.chunk_id in chunk_doc] for lane, hits in lanes.items()}, chunk_doc


def eval_settings(home: Path, embed_cache: Path | None = None, database_url: str | None = None) -> Settings:
    # The embedded engines in `home`, whatever RAG_DATABASE_URL / RAG_CHROMA_URL say: an eval
    # never writes a benchmark corpus into a deployment's stores. `database_url` is given
    # explicitly (an empty database) to score the PostgreSQL store's keyword lane.
    return Settings(
        home=home, embed_cache=embed_cache or default_embed_cache(), database_url=database_url, chroma_url=None
    )


def open_bench(
    dataset: BeirDataset | QADataset | PagesDataset, home: Path, progress: Progress, embed_cache: Path | None = None,
    settings: Settings | None = None, ingest: Ingester | None = None,
) -> Bench:
    """The dataset's corpus ingested; `settings` default to eval_settings(home, embed_cache).
    `ingest(service, principal, progress)` replaces ingesting `dataset.corpus` as records (a pages
    dataset ingests its folder)."""
    service = KnowledgeService(settings or eval_settings(home, embed_cache))
    try:
        principal = Principal.local_admin(WORKSPACE)
        tasks: dict[str, int] = {}

        def on_progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = progress.add_task(f"ingest: {stage}", total=total)
            progress.update(tasks[stage], completed=done, total=total)

        if ingest is None:
            report = service.ingest_records(principal, dataset.corpus, kb_name=dataset.name, progress=on_progress)
        else:
            report = ingest(service, principal, on_progress)
        if report.failed and ingest is None:  # an ingester reports its own failures
            progress.console.print(f"[yellow]{len(report.failed)} record(s) not ingested, e.g. {report.failed[0]}")
        embedder = QueryMemo(service.embedder)
        service.retriever.embedder = embedder
        return Bench(service, principal, dataset, service.scope(principal, dataset.name), embedder, report)
    except BaseException:
        service.close()
        raise


@dataclass
class EvalOptions:
    dataset: Path
    split: str = "test"
    peers: bool = True
    home: Path | None = None
    limit: int | None = None
    embed_cache: Path | None = None
    database_url: str | None = None


def eval_home(stack: ExitStack, home: Path | None) -> Path:
    """The given home, else a temporary one removed when the stack closes."""
    if home is not None:
        return home.expanduser()
    return Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rag-eval-", ignore_cleanup_errors=True)))


def _loop(progress: Progress, label: str, items: Sequence) -> Iterator:
    task = progress.add_task(label, total=len(items))
    for item in items:
        yield item
        progress.advance(task)


def run_retrieval_eval(options: EvalOptions, console: Console | None = None) -> dict:
    """Everything `rag eval retrieval` reports, as the JSON-shaped dict it prints."""
    from evals.peers import Bm25sPeer, LlamaIndexChromaPeer, bm25s_stemmer_name

    started = time.perf_counter()
    console = console or Console(stderr=True)
    dataset = load_dataset(options.dataset, options.split, options.limit)
    peer_runs: dict[str, dict[str, list[str]]] = {}
    with ExitStack() as stack, progress_bar(console) as progress:
        home = eval_home(stack, options.home)
        bench = open_bench(dataset, home, progress, settings=eval_settings(home, options.embed_cache, options.database_url))
        stack.callback(bench.service.close)
        scored = systems(bench.lanes)
        runs: dict[str, dict[str, list[str]]] = {name: {} for name in scored}
        peers: list[tuple[str, Callable[[str], list[str]]]] = []
        if options.peers:
            progress.console.print(f"peer bm25s: indexing (stemmer: {bm25s_stemmer_name()})")
            bm25 = Bm25sPeer(dataset.corpus)
            embed_task = progress.add_task("peer llamaindex: embedding", total=len(dataset.corpus))
            llama = LlamaIndexChromaPeer(
                dataset.corpus, bench.embedder, on_batch=lambda n: progress.advance(embed_task, n), k=TOP
            )
            peers = [(bm25.name, lambda q: bm25.search(q, TOP)), (llama.name, llama.search)]
        for qid, query in _loop(progress, "queries", list(dataset.queries.items())):
            for name, lanes in scored.items():
                runs[name][qid] = documents(bench.retrieve(query, None if name == HYBRID else lanes))
            for name, search in peers:
                peer_runs.setdefault(name, {})[qid] = search(query)[:TOP]
        settings = bench.service.settings
    result: dict = {"dataset": dataset.name, "split": dataset.split, "queries": len(dataset.queries),
                    "lanes": list(scored[HYBRID])}
    for name in (HYBRID, *scored[HYBRID]):
        result[name] = evaluate(runs[name], dataset.qrels)
    result["peers"] = {name: evaluate(run, dataset.qrels) for name, run in peer_runs.items()}
    result["settings"] = {
        "weights": {name: settings.retrieve.weights.get(name, 1.0) for name in scored[HYBRID]},
        "rrf_k": settings.retrieve.rrf_k,
        "rerank": settings.retrieve.rerank,
        "score_norm": settings.retrieve.score_norm,
        "chunk_size": settings.index.chunk_size,
    }
    short = {name: sum(len(r) < TOP for r in run.values()) for name, run in runs.items()}
    if len(dataset.corpus) >= TOP and any(short.values()):
        console.print(f"[dim]queries with fewer than {TOP} documents: {short}")
    for name, run in runs.items():
        if run and not any(run.values()):
            console.print(f"[yellow]warning:[/yellow] the {name} lane found nothing for any query: is it indexed?")
    result["seconds"] = round(time.perf_counter() - started, 1)
    return result
