"""Ingest throughput, end to end, beside the raw embedding model on the very same chunk texts.

A fresh temporary home with a fresh, EMPTY embedding cache, so the model really runs. The timed
pipeline is reading, parsing, chunking, embedding and writing (SQLite, the keyword index, Chroma); the model
is loaded and warmed before the clock starts (its load time is reported apart). Then the exact
texts the lanes indexed (``Publisher.indexed_rows``) go through ``LocalEmbedder.embed`` with the same
batch size: once in one call, and once in slices of the publisher's group size. Target: the pipeline
reaches at least 80% of the raw model's chunks/s.

    python -m benchmarks.ingest_throughput                      # the 18F handbook directory
    python -m benchmarks.ingest_throughput --corpus scifact --limit 2000 --json out.json
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import write_json
from benchmarks.fixture100k import DATASETS, source_records

TARGET_RATIO = 0.80
# Warm-up batches of full-length texts, so both timed runs start with the model's buffers at full size.
WARMUP_TEXT = " ".join(["retrieval augmented knowledge base chunk with enough words to fill the model"] * 30)


class TimedEmbedder:
    """A pass-through around the service's embedder that adds up the seconds spent in embed()."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds = 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def embed(self, texts: Any) -> Any:
        started = time.perf_counter()
        try:
            return self.inner.embed(texts)
        finally:
            self.seconds += time.perf_counter() - started


def run(corpus: str, limit: int | None, keep: bool) -> dict[str, Any]:
    from rag.models.embed import LocalEmbedder
    from rag.service import KnowledgeService, Principal
    from rag.settings import Settings

    tmp = Path(tempfile.mkdtemp(prefix="rag-ingest-bench-"))
    settings = Settings(home=tmp / "home", embed_cache=tmp / "embeddings.sqlite")  # fresh and empty
    result: dict[str, Any] = {"corpus": corpus, "home": str(tmp), "loadavg_1m_before": round(os.getloadavg()[0], 2)}
    try:
        with KnowledgeService(settings) as svc:
            p = Principal.local_admin("default")
            started = time.perf_counter()
            inner = svc.embedder.inner  # the LocalEmbedder behind the cache
            svc.index.open()  # Chroma, before the clock starts
            inner.embed([WARMUP_TEXT] * inner.batch_size)  # straight to the model: the cache stays empty
            result["model_load_seconds"] = round(time.perf_counter() - started, 2)
            timed = svc.engines.__dict__["embedder"] = TimedEmbedder(svc.embedder)  # the publisher asks the engines
            first_indexing: list[float] = []

            def progress(stage: str, done: int, total: int) -> None:
                if stage == "indexing" and not first_indexing:
                    first_indexing.append(time.perf_counter())

            started = time.perf_counter()
            if corpus == "handbook":
                report = svc.ingest_directory(p, DATASETS / "handbook_18f" / "pages", "bench", progress=progress)
            else:
                records = source_records("scifact")[:limit] if limit else source_records("scifact")
                report = svc.ingest_records(p, records, "bench", provider="corpus", progress=progress)
            pipeline_s = time.perf_counter() - started
            misses = timed.inner.misses
            result["pipeline_stages"] = {
                "read_parse_chunk_until_indexing_s": round((first_indexing or [started])[0] - started, 2),
                "embed_s": round(timed.seconds, 2),
                "other_s": round(pipeline_s - timed.seconds - ((first_indexing or [started])[0] - started), 2),
            }
            result["loadavg_1m_after_pipeline"] = round(os.getloadavg()[0], 2)
            with svc.db.session() as session:  # exactly the texts the lanes indexed, in chunk order
                texts = [text for _, text, _, _ in svc.publisher.indexed_rows(session)]
        with sqlite3.connect(settings.home / "rag.db") as conn:
            chunks = int(conn.execute("SELECT count(*) FROM chunks").fetchone()[0])

        raw = LocalEmbedder(batch_size=settings.index.embed_batch_size)
        raw.embed([WARMUP_TEXT] * raw.batch_size)
        started = time.perf_counter()
        raw.embed(texts)
        raw_s = time.perf_counter() - started
        group = 512  # Publisher.batch_chunks: the pipeline embeds groups of about this many chunks
        started = time.perf_counter()
        for i in range(0, len(texts), group):
            raw.embed(texts[i:i + group])
        grouped_s = time.perf_counter() - started
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)

    result.update({
        "documents": len(report.added), "chunks": chunks, "report_chunks": report.chunks, "model_runs_on": misses,
        "batch_size": settings.index.embed_batch_size,
        "pipeline": {"seconds": round(pipeline_s, 2), "chunks_per_s": round(chunks / pipeline_s, 1)},
        "raw_model": {"seconds": round(raw_s, 2), "chunks_per_s": round(len(texts) / raw_s, 1)},
        "raw_model_groups_512": {"seconds": round(grouped_s, 2), "chunks_per_s": round(len(texts) / grouped_s, 1)},
        "loadavg_1m_after": round(os.getloadavg()[0], 2),
    })
    result["ratio"] = round(result["pipeline"]["chunks_per_s"] / result["raw_model"]["chunks_per_s"], 3)
    return result


def print_table(r: dict[str, Any]) -> None:
    print(f"\n## ingest throughput: {r['corpus']} ({r['documents']} documents, {r['chunks']} chunks; "
          f"model ran on {r['model_runs_on']}; batch {r['batch_size']}; model load {r['model_load_seconds']} s, "
          f"untimed; load {r['loadavg_1m_before']} -> {r['loadavg_1m_after']})")
    print(f"{'':<38} {'chunks':>7} {'seconds':>8} {'chunks/s':>9}")
    rows = [("pipeline (ingest, end to end)", r["pipeline"]), ("raw model, one embed() call", r["raw_model"]),
            ("raw model, in groups of 512", r["raw_model_groups_512"])]
    for name, s in rows:
        print(f"{name:<38} {r['chunks']:>7} {s['seconds']:>8.2f} {s['chunks_per_s']:>9.1f}")
    st = r["pipeline_stages"]
    print(f"pipeline split: {st['read_parse_chunk_until_indexing_s']} s reading+parsing+chunking (before the first "
          f"embedding), {st['embed_s']} s in embed() (cache lookups + model), {st['other_s']} s writing and the rest; "
          f"load after the pipeline {r['loadavg_1m_after_pipeline']}")
    verdict = "meets" if r["ratio"] >= TARGET_RATIO else "BELOW"
    print(f"pipeline / raw model: {r['ratio']:.1%} ({verdict} the {TARGET_RATIO:.0%} target)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", choices=["handbook", "scifact"], default="handbook")
    parser.add_argument("--limit", type=int, default=None, help="only the first N SciFact records")
    parser.add_argument("--keep", action="store_true", help="keep the temporary home")
    parser.add_argument("--json", metavar="PATH", help="also write the result as JSON ('-' for stdout)")
    args = parser.parse_args(argv)
    result = run(args.corpus, args.limit, args.keep)
    print_table(result)
    write_json(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
