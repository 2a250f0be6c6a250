"""Ingest throughput, end to end, beside the raw embedding model on the very same texts.

A fresh temporary home with a fresh, EMPTY embedding cache, so the model really runs. The timed
pipeline is reading, parsing, chunking, embedding and writing (SQLite, the keyword index, Chroma); the model
is loaded and warmed before the clock starts (its load time is reported apart). Publishing embeds,
per group of about 512 chunks, the chunks' indexed texts and then, when no LLM model is configured,
the sentence texts the extractive answer will embed (``Publisher.also_embed``, that is
``ExtractiveSynthesizer.publish_texts(text, heading_path)`` of each chunk). Every list the
publisher embeds is recorded, and checked against the same texts rebuilt from the store afterwards
(``Publisher.indexed_rows`` and ``sentence_texts`` of each stored chunk). Then exactly those texts go
through ``LocalEmbedder.embed`` with the same batch size: once in one call, and once in the very
calls the publisher made (each group's chunks, then its sentences). Target: the pipeline reaches at
least 90% of the raw model's texts/s (one call).

    python -m benchmarks.ingest_throughput                      # the 18F handbook directory
    python -m benchmarks.ingest_throughput --no-sentences       # chunks only (also_embed off)
    python -m benchmarks.ingest_throughput --corpus scifact --limit 2000 --json out.json
    python -m benchmarks.ingest_throughput --bulk-backend onnx  # a publish's batches on ONNX (default: torch)
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
from typing import Any, Callable, Sequence

from benchmarks import write_json
from benchmarks.fixture100k import DATASETS, source_records

TARGET_RATIO = 0.90
# Warm-up batches of full-length texts, so both timed runs start with the model's buffers at full size.
WARMUP_TEXT = " ".join(["retrieval augmented knowledge base chunk with enough words to fill the model"] * 30)


class ParseTimer:
    """While entered, every parse an ingest makes (`parse_bytes` of rag/service/sources/engine.py) is
    timed: `seconds` (summed over the parse workers, which run side by side) and `pages` (spans) so far."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.pages = 0

    def __enter__(self) -> "ParseTimer":
        import rag.service.sources.engine as ingest_module

        self._module, self._parse = ingest_module, ingest_module.parse_bytes

        def timed_parse(data: bytes, filename: str, fallback_title: str | None = None) -> Any:
            started = time.perf_counter()
            try:
                parsed = self._parse(data, filename, fallback_title)
                self.pages += len(parsed.pages)
                return parsed
            finally:
                self.seconds += time.perf_counter() - started

        ingest_module.parse_bytes = timed_parse
        return self

    def __exit__(self, *exc: object) -> None:
        self._module.parse_bytes = self._parse


class PublishRecorder:
    """Wraps the publisher's `_embed` and `also_embed`: records every list the publisher embeds, as
    "chunks" or "sentences", with the seconds spent in each (cache lookups + model), and the seconds
    spent making the sentence texts. Per group the publisher embeds its chunks, then calls also_embed
    for each chunk, then embeds the sentences: an `_embed` after an also_embed call is the sentences."""

    def __init__(self, publisher: Any) -> None:
        self.calls: list[tuple[str, list[str]]] = []
        self.embed_s = {"chunks": 0.0, "sentences": 0.0}
        self.sentence_texts_s = 0.0
        self._sentences_next = False
        embed = publisher._embed
        also: Callable[[str, Sequence[str]], list[str]] | None = publisher.also_embed

        def timed_embed(texts: Sequence[str]) -> Any:
            kind = "sentences" if self._sentences_next else "chunks"
            self._sentences_next = False
            started = time.perf_counter()
            try:
                return embed(texts)
            finally:
                self.embed_s[kind] += time.perf_counter() - started
                self.calls.append((kind, list(texts)))

        publisher._embed = timed_embed  # the instance attribute shadows the method for self._embed(...)
        if also is not None:
            def timed_also(text: str, heading_path: Sequence[str]) -> list[str]:
                self._sentences_next = True
                started = time.perf_counter()
                try:
                    return also(text, heading_path)
                finally:
                    self.sentence_texts_s += time.perf_counter() - started

            publisher.also_embed = timed_also

    def texts(self, kind: str | None = None) -> list[str]:
        return [t for k, texts in self.calls if kind in (None, k) for t in texts]


def run(corpus: str, limit: int | None, keep: bool, sentences: bool = True, backend: str = "onnx",
        bulk: str = "torch") -> dict[str, Any]:
    from sqlalchemy import select

    from rag.models.embed import LocalEmbedder, bulk_embedding
    from rag.service import KnowledgeService, Principal
    from rag.settings import Settings
    from rag.store.models import Chunk
    from rag.synthesize.extractive import ExtractiveSynthesizer

    tmp = Path(tempfile.mkdtemp(prefix="rag-ingest-bench-"))
    settings = Settings(home=tmp / "home", embed_cache=tmp / "embeddings.sqlite",  # fresh and empty
                        embed={"backend": backend, "bulk_backend": bulk})
    result: dict[str, Any] = {"corpus": corpus, "home": str(tmp), "backend": f"{backend}, bulk {bulk}",
                              "loadavg_1m_before": round(os.getloadavg()[0], 2)}
    try:
        with KnowledgeService(settings) as svc:
            p = Principal.local_admin("default")
            started = time.perf_counter()
            cached = svc.embedder  # the CachedEmbedder the publisher uses
            inner = cached.inner  # the LocalEmbedder behind the cache
            svc.index.open()  # Chroma, before the clock starts
            with bulk_embedding():  # the runtime a publish embeds on, loaded now
                inner.embed([WARMUP_TEXT] * inner.batch_size)  # straight to the model: the cache stays empty
            result["model_load_seconds"] = round(time.perf_counter() - started, 2)
            if not sentences:
                svc.publisher.also_embed = None
            result["sentences_embedded"] = svc.publisher.also_embed is not None
            recorder = PublishRecorder(svc.publisher)
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
            misses, hits = cached.misses, cached.hits
            before_indexing = (first_indexing or [started])[0] - started
            embed_s = sum(recorder.embed_s.values())
            result["pipeline_stages"] = {
                "read_parse_chunk_until_indexing_s": round(before_indexing, 2),
                "embed_chunks_s": round(recorder.embed_s["chunks"], 2),
                "sentence_texts_s": round(recorder.sentence_texts_s, 2),
                "embed_sentences_s": round(recorder.embed_s["sentences"], 2),
                "other_s": round(pipeline_s - before_indexing - embed_s - recorder.sentence_texts_s, 2),
            }
            result["loadavg_1m_after_pipeline"] = round(os.getloadavg()[0], 2)
            # The same texts rebuilt from the store: the lanes' indexed texts, and each chunk's
            # sentence texts as the publisher asks for them, in chunk order.
            with svc.db.session() as session:
                chunk_texts = [row.text for row in svc.publisher.indexed_rows(session)]
                stored = session.execute(select(Chunk.text, Chunk.heading_path).order_by(Chunk.id)).all()
            sentence_list = (
                [t for text, path in stored for t in ExtractiveSynthesizer.publish_texts(text, tuple(path or ()))]
                if result["sentences_embedded"] else []
            )
        with sqlite3.connect(settings.home / "rag.db") as conn:
            chunks = int(conn.execute("SELECT count(*) FROM chunks").fetchone()[0])

        calls = [(kind, texts) for kind, texts in recorder.calls if texts]
        texts = recorder.texts()
        result["recorded_matches_store"] = {
            "chunks": recorder.texts("chunks") == chunk_texts,
            "sentences": recorder.texts("sentences") == sentence_list,
        }

        raw = LocalEmbedder(batch_size=settings.index.embed_batch_size, settings=settings.embed)
        with bulk_embedding():  # the runtime a publish embeds on (RAG_EMBED__BULK_BACKEND)
            raw.embed([WARMUP_TEXT] * raw.batch_size)
            started = time.perf_counter()
            raw.embed(texts)
            raw_s = time.perf_counter() - started
            as_calls_s = {"chunks": 0.0, "sentences": 0.0}
            for kind, part in calls:  # the publisher's very calls, in its order
                began = time.perf_counter()
                raw.embed(part)
                as_calls_s[kind] += time.perf_counter() - began
        grouped_s = sum(as_calls_s.values())
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)

    n_chunks, n_sentences, n = len(recorder.texts("chunks")), len(recorder.texts("sentences")), len(texts)

    def rate(seconds: float) -> dict[str, float]:
        return {"seconds": round(seconds, 2), "texts_per_s": round(n / seconds, 1) if seconds else 0.0}

    result.update({
        "documents": len(report.added), "chunks": chunks, "report_chunks": report.chunks,
        "texts": {"chunks": n_chunks, "sentences": n_sentences, "total": n, "distinct": len(set(texts)),
                  "embed_calls": len(calls)},
        "model_runs_on": misses, "cache_hits": hits,
        "batch_size": settings.index.embed_batch_size,
        "pipeline": rate(pipeline_s),
        "raw_model": rate(raw_s),
        "raw_model_as_publisher_calls": rate(grouped_s),
        "raw_model_split_s": {k: round(v, 2) for k, v in as_calls_s.items()},
        "loadavg_1m_after": round(os.getloadavg()[0], 2),
    })
    result["ratio"] = round(raw_s / pipeline_s, 3)  # texts/s over texts/s: the same texts on both sides
    result["ratio_vs_publisher_calls"] = round(grouped_s / pipeline_s, 3)
    return result


def print_table(r: dict[str, Any]) -> None:
    t = r["texts"]
    print(f"\n## ingest throughput: {r['corpus']}, {r.get('backend', 'torch')} ({r['documents']} documents, {r['chunks']} chunks; "
          f"sentences {'embedded' if r['sentences_embedded'] else 'NOT embedded'}; model ran on {r['model_runs_on']} "
          f"of {t['total']} texts ({t['distinct']} distinct, {r['cache_hits']} cache hits); batch {r['batch_size']}; "
          f"model load {r['model_load_seconds']} s, untimed; load {r['loadavg_1m_before']} -> {r['loadavg_1m_after']})")
    print("| run | chunks | sentence texts | texts embedded | seconds | texts/s | pipeline share |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    rows = [("pipeline (ingest, end to end)", r["pipeline"]), ("raw model, one embed() call", r["raw_model"]),
            (f"raw model, the publisher's {t['embed_calls']} calls", r["raw_model_as_publisher_calls"])]
    for name, s in rows:
        share = "" if s is r["pipeline"] else f"{s['seconds'] / r['pipeline']['seconds']:.1%}"
        print(f"| {name} | {t['chunks']} | {t['sentences']} | {t['total']} | {s['seconds']:.2f} | "
              f"{s['texts_per_s']:.1f} | {share} |")
    st, raw = r["pipeline_stages"], r["raw_model_split_s"]
    embed_total = st["embed_chunks_s"] + st["embed_sentences_s"]
    raw_total = raw["chunks"] + raw["sentences"]
    print(f"\npipeline split: {st['read_parse_chunk_until_indexing_s']} s reading+parsing+chunking (before the first "
          f"embedding); {st['embed_chunks_s']} s embedding chunks, {st['sentence_texts_s']} s making sentence texts, "
          f"{st['embed_sentences_s']} s embedding sentences (cache lookups + model); {st['other_s']} s writing and the "
          f"rest; load after the pipeline {r['loadavg_1m_after_pipeline']}")
    if embed_total:
        print(f"embedding time, sentences vs chunks: pipeline {st['embed_sentences_s'] / embed_total:.0%} / "
              f"{st['embed_chunks_s'] / embed_total:.0%}; raw model (publisher's calls) "
              f"{raw['sentences'] / raw_total:.0%} / {raw['chunks'] / raw_total:.0%}")
    m = r["recorded_matches_store"]
    print(f"texts recorded while publishing = texts rebuilt from the store: chunks {m['chunks']}, sentences {m['sentences']}")
    verdict = "meets" if r["ratio"] >= TARGET_RATIO else "BELOW"
    print(f"pipeline / raw model (one call): {r['ratio']:.1%} ({verdict} the {TARGET_RATIO:.0%} target); "
          f"/ raw model (publisher's calls): {r['ratio_vs_publisher_calls']:.1%}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", choices=["handbook", "scifact"], default="handbook")
    parser.add_argument("--limit", type=int, default=None, help="only the first N SciFact records")
    parser.add_argument("--keep", action="store_true", help="keep the temporary home")
    parser.add_argument("--no-sentences", action="store_true",
                        help="publish without embedding the sentence texts (also_embed off): chunks only")
    parser.add_argument("--backend", choices=["onnx", "torch"], default="onnx", help="the local model's runtime")
    parser.add_argument("--bulk-backend", choices=["onnx", "torch"], default="torch",
                        help="with --backend onnx: the runtime of a publish's document batches")
    parser.add_argument("--json", metavar="PATH", help="also write the result as JSON ('-' for stdout)")
    args = parser.parse_args(argv)
    result = run(args.corpus, args.limit, args.keep, sentences=not args.no_sentences, backend=args.backend,
                 bulk=args.bulk_backend)
    print_table(result)
    write_json(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
