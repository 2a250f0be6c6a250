"""Ingest throughput and CPU per chunk, end to end, beside the raw embedding model on the same texts.

A fresh temporary home with a fresh, EMPTY embedding cache, so the model really runs. The timed
pipeline is reading, parsing, chunking, embedding and writing (SQLite, the keyword index, Chroma); the model
is loaded and warmed before the clock starts (its load time is reported apart). Publishing embeds,
per group of about 512 chunks, the chunks' indexed texts; when no LLM model is configured the
sentences the extractive answer will embed (``Publisher.sentences``, that is
``ExtractiveSynthesizer.publish_sentences`` of each chunk) are pooled out of the same pass
(``CachedEmbedder.embed_chunks``). Every group the publisher embeds is recorded, and checked against
the same texts and sentences rebuilt from the store afterwards. Then exactly those texts go through
``LocalEmbedder.embed_pooled`` with the same batch size: once in one call, and once in the very calls
the publisher made. Target: the pipeline reaches at least 90% of the raw model's chunks/s (one call).
The pipeline's CPU-ms per chunk is this process's CPU time over the pipeline (all its threads).

``--trees A B ...`` compares checkouts instead: `rag ingest` of the corpus by each tree's code, in a
process of its own on a fresh home and empty cache, the trees taking turns (``--rounds``): CPU-ms per
chunk (the process's, model load included) and chunks/s end to end, each tree's median.

    python -m benchmarks.ingest_throughput                      # the 18F handbook directory
    python -m benchmarks.ingest_throughput --no-sentences       # chunks only (Publisher.sentences off)
    python -m benchmarks.ingest_throughput --corpus scifact --limit 2000 --json out.json
    python -m benchmarks.ingest_throughput --bulk-backend torch  # a publish's batches on torch (default: onnx)
    python -m benchmarks.ingest_throughput --trees ../old . --share 4 --rounds 2   # side by side
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

        def timed_parse(data: bytes, filename: str, fallback_title: str | None = None, **how: Any) -> Any:
            started = time.perf_counter()
            try:
                parsed = self._parse(data, filename, fallback_title, **how)
                self.pages += len(parsed.pages)
                return parsed
            finally:
                self.seconds += time.perf_counter() - started

        ingest_module.parse_bytes = timed_parse
        return self

    def __exit__(self, *exc: object) -> None:
        self._module.parse_bytes = self._parse


class PublishRecorder:
    """Wraps the publisher's `_embed` and `_embed_with_sentences`: records every group the
    publisher embeds (its chunk texts, and the sentence spans pooled out of their pass), with the
    seconds spent (cache lookups + model), and the seconds spent finding the sentences."""

    def __init__(self, publisher: Any) -> None:
        self.calls: list[tuple[list[str], list[list[Any]]]] = []
        self.embed_s = 0.0
        self.sentence_spans_s = 0.0
        embed, with_sentences = publisher._embed, publisher._embed_with_sentences
        sentences: Callable[..., list[Any]] | None = publisher.sentences

        def timed_embed(texts: Sequence[str]) -> Any:
            started = time.perf_counter()
            try:
                return embed(texts)
            finally:
                self.embed_s += time.perf_counter() - started
                self.calls.append((list(texts), [[] for _ in texts]))

        def timed_with_sentences(texts: Sequence[str], spans: Sequence[Sequence[Any]]) -> Any:
            started = time.perf_counter()
            try:
                return with_sentences(texts, spans)
            finally:
                self.embed_s += time.perf_counter() - started
                self.calls.append((list(texts), [list(s) for s in spans]))

        # Instance attributes shadow the methods for self._embed(...) and self._embed_with_sentences(...).
        publisher._embed, publisher._embed_with_sentences = timed_embed, timed_with_sentences
        if sentences is not None:
            def timed_sentences(indexed: str, text: str, heading_path: Sequence[str]) -> list[Any]:
                started = time.perf_counter()
                try:
                    return sentences(indexed, text, heading_path)
                finally:
                    self.sentence_spans_s += time.perf_counter() - started

            publisher.sentences = timed_sentences

    def texts(self) -> list[str]:
        return [t for texts, _ in self.calls for t in texts]

    def spans(self) -> list[list[Any]]:
        return [s for _, spans in self.calls for s in spans]


def run(corpus: str, limit: int | None, keep: bool, sentences: bool = True, backend: str = "onnx",
        bulk: str = "onnx") -> dict[str, Any]:
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
                inner.embed_pooled([WARMUP_TEXT] * inner.batch_size, [[]] * inner.batch_size)  # the cache stays empty
            result["model_load_seconds"] = round(time.perf_counter() - started, 2)
            if not sentences:
                svc.publisher.sentences = None
            result["sentences_embedded"] = svc.publisher.sentences is not None
            recorder = PublishRecorder(svc.publisher)
            first_indexing: list[float] = []

            def progress(stage: str, done: int, total: int) -> None:
                if stage == "indexing" and not first_indexing:
                    first_indexing.append(time.perf_counter())

            started, cpu_started = time.perf_counter(), time.process_time()
            if corpus == "handbook":
                report = svc.ingest_directory(p, DATASETS / "handbook_18f" / "pages", "bench", progress=progress)
            else:
                records = source_records("scifact")[:limit] if limit else source_records("scifact")
                report = svc.ingest_records(p, records, "bench", provider="corpus", progress=progress)
            pipeline_s, pipeline_cpu_s = time.perf_counter() - started, time.process_time() - cpu_started
            misses, hits = cached.misses, cached.hits
            pooled, alone = cached.sentences_pooled, cached.sentences_alone
            before_indexing = (first_indexing or [started])[0] - started
            result["pipeline_stages"] = {
                "read_parse_chunk_until_indexing_s": round(before_indexing, 2),
                "sentence_spans_s": round(recorder.sentence_spans_s, 2),
                "embed_s": round(recorder.embed_s, 2),
                "other_s": round(pipeline_s - before_indexing - recorder.embed_s - recorder.sentence_spans_s, 2),
            }
            result["loadavg_1m_after_pipeline"] = round(os.getloadavg()[0], 2)
            # The same texts rebuilt from the store: the lanes' indexed texts, and each chunk's
            # sentences as the publisher asks for them, in chunk order.
            with svc.db.session() as session:
                chunk_texts = [row.text for row in svc.publisher.indexed_rows(session)]
                stored = session.execute(select(Chunk.text, Chunk.heading_path).order_by(Chunk.id)).all()
            spans_list = (
                [ExtractiveSynthesizer.publish_sentences(indexed, text, tuple(path or ()))
                 for indexed, (text, path) in zip(chunk_texts, stored)]
                if result["sentences_embedded"] else [[] for _ in chunk_texts]
            )
        with sqlite3.connect(settings.home / "rag.db") as conn:
            chunks = int(conn.execute("SELECT count(*) FROM chunks").fetchone()[0])

        calls = [(texts, spans) for texts, spans in recorder.calls if texts]
        texts = recorder.texts()
        result["recorded_matches_store"] = {"chunks": texts == chunk_texts, "sentences": recorder.spans() == spans_list}

        raw = LocalEmbedder(batch_size=settings.index.embed_batch_size, settings=settings.embed)

        def raw_pass(texts: Sequence[str], spans: Sequence[Sequence[Any]]) -> None:
            raw.embed_pooled(texts, [[s.ranges for s in chunk] for chunk in spans])
            if not raw.pools:  # on torch the sentences take a pass of their own, as publishing does
                raw.embed([s.key for chunk in spans for s in chunk])

        with bulk_embedding():  # the runtime a publish embeds on (RAG_EMBED__BULK_BACKEND)
            raw.embed([WARMUP_TEXT] * raw.batch_size)
            started = time.perf_counter()
            raw_pass(texts, recorder.spans())
            raw_s = time.perf_counter() - started
            started = time.perf_counter()
            for part, spans in calls:  # the publisher's very calls, in its order
                raw_pass(part, spans)
            grouped_s = time.perf_counter() - started
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)

    n = len(texts)

    def rate(seconds: float) -> dict[str, float]:
        return {"seconds": round(seconds, 2), "chunks_per_s": round(n / seconds, 1) if seconds else 0.0}

    result.update({
        "documents": len(report.added), "chunks": chunks, "report_chunks": report.chunks,
        "texts": {"chunks": n, "sentences": sum(len(s) for s in recorder.spans()), "distinct": len(set(texts)),
                  "embed_calls": len(calls), "sentences_pooled": pooled, "sentences_alone": alone},
        "model_runs_on": misses, "cache_hits": hits,
        "batch_size": settings.index.embed_batch_size,
        "pipeline": rate(pipeline_s),
        "pipeline_cpu_ms_per_chunk": round(1000 * pipeline_cpu_s / n, 1) if n else 0.0,
        "raw_model": rate(raw_s),
        "raw_model_as_publisher_calls": rate(grouped_s),
        "loadavg_1m_after": round(os.getloadavg()[0], 2),
    })
    result["ratio"] = round(raw_s / pipeline_s, 3)  # chunks/s over chunks/s: the same texts on both sides
    result["ratio_vs_publisher_calls"] = round(grouped_s / pipeline_s, 3)
    return result


def print_table(r: dict[str, Any]) -> None:
    t = r["texts"]
    print(f"\n## ingest throughput: {r['corpus']}, {r.get('backend', 'torch')} ({r['documents']} documents, {r['chunks']} chunks; "
          f"sentences {'embedded' if r['sentences_embedded'] else 'NOT embedded'}: {t['sentences']}, "
          f"{t['sentences_pooled']} pooled out of their chunk's pass, {t['sentences_alone']} embedded alone; model ran "
          f"on {r['model_runs_on']} of {t['chunks']} chunk texts ({t['distinct']} distinct, {r['cache_hits']} cache "
          f"hits); batch {r['batch_size']}; model load {r['model_load_seconds']} s, untimed; load "
          f"{r['loadavg_1m_before']} -> {r['loadavg_1m_after']})")
    print("| run | chunks | sentences | seconds | chunks/s | CPU-ms per chunk | pipeline share |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    rows = [("pipeline (ingest, end to end)", r["pipeline"]), ("raw model, one call", r["raw_model"]),
            (f"raw model, the publisher's {t['embed_calls']} calls", r["raw_model_as_publisher_calls"])]
    for name, s in rows:
        share = "" if s is r["pipeline"] else f"{s['seconds'] / r['pipeline']['seconds']:.1%}"
        cpu = r["pipeline_cpu_ms_per_chunk"] if s is r["pipeline"] else ""
        print(f"| {name} | {t['chunks']} | {t['sentences']} | {s['seconds']:.2f} | {s['chunks_per_s']:.1f} | {cpu} | {share} |")
    st = r["pipeline_stages"]
    print(f"\npipeline split: {st['read_parse_chunk_until_indexing_s']} s reading+parsing+chunking (before the first "
          f"embedding); {st['sentence_spans_s']} s finding sentences; {st['embed_s']} s embedding (cache lookups + "
          f"model); {st['other_s']} s writing and the rest; load after the pipeline {r['loadavg_1m_after_pipeline']}")
    m = r["recorded_matches_store"]
    print(f"texts recorded while publishing = texts rebuilt from the store: chunks {m['chunks']}, sentences {m['sentences']}")
    verdict = "meets" if r["ratio"] >= TARGET_RATIO else "BELOW"
    print(f"pipeline / raw model (one call): {r['ratio']:.1%} ({verdict} the {TARGET_RATIO:.0%} target); "
          f"/ raw model (publisher's calls): {r['ratio_vs_publisher_calls']:.1%}")


def _corpus_folder(corpus: str, share: int, into: Path) -> Path:
    """The corpus as a folder `rag ingest` reads: the handbook's pages, or one SciFact abstract per
    Markdown file; with `share` N, every Nth file (sorted), so runs compare on the same files."""
    folder = into / "corpus"
    if corpus == "handbook":
        root = DATASETS / "handbook_18f" / "pages"
        files = sorted(p for p in root.rglob("*") if p.is_file())[::share]
        for path in files:
            target = folder / path.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    else:
        folder.mkdir(parents=True)
        for record in source_records("scifact")[::share]:
            (folder / f"{record['id']}.md").write_text(f"# {record['title']}\n\n{record['text']}\n")
    return folder


def _ingest_process(tree: Path, folder: Path, scratch: Path, env: dict[str, str]) -> dict[str, float]:
    """`rag ingest` of the folder by the code in `tree`, in a process of its own on a fresh home
    with an empty embedding cache: wall seconds, the process's CPU seconds (all its threads and
    children), chunks written."""
    import resource
    import subprocess

    home = scratch / "home"
    shutil.rmtree(home, ignore_errors=True)
    cache = scratch / "embeddings.sqlite"
    for leftover in scratch.glob("embeddings.sqlite*"):
        leftover.unlink()
    run_env = {**env, "RAG_HOME": str(home), "RAG_EMBED_CACHE": str(cache), "PYTHONPATH": str(tree)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "rag.cli", "ingest", str(folder), "--json"], cwd=tree, env=run_env,
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=3600)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    with sqlite3.connect(home / "rag.db") as conn:
        chunks = int(conn.execute("SELECT count(*) FROM chunks").fetchone()[0])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu, "chunks": chunks}


def side_by_side(trees: Sequence[Path], corpus: str, share: int, rounds: int,
                 settings: Sequence[str] = ()) -> dict[str, Any]:
    """Each tree's `rag ingest` (`_ingest_process`), the trees taking turns for `rounds` rounds, so
    that a machine whose load changes weighs on each alike. Per tree: CPU-ms per chunk (process
    CPU, model load included, as a user pays it) and chunks/s end to end, the median of its rounds.
    `settings`: NAME=VALUE environment variables every tree runs with (RAG_* ones of this process
    are not passed on)."""
    import statistics

    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    env.update(item.split("=", 1) for item in settings)
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    runs: dict[str, list[dict[str, float]]] = {str(t): [] for t in trees}
    loads = [round(os.getloadavg()[0], 2)]
    with tempfile.TemporaryDirectory(prefix="rag-ingest-side-") as scratch_dir:
        scratch = Path(scratch_dir)
        folder = _corpus_folder(corpus, share, scratch)
        for n in range(rounds):
            for tree in trees:
                found = _ingest_process(tree, folder, scratch, env)
                runs[str(tree)].append(found)
                print(f"round {n + 1}, {tree}: {found['chunks']} chunks, {found['wall_s']:.1f} s, "
                      f"{found['cpu_s']:.1f} CPU s", file=sys.stderr)
        loads.append(round(os.getloadavg()[0], 2))
    result: dict[str, Any] = {"corpus": corpus, "share": share, "rounds": rounds, "settings": list(settings),
                              "loadavg_1m": loads, "trees": {}}
    for tree, found in runs.items():
        result["trees"][tree] = {
            "chunks": found[0]["chunks"],
            "cpu_ms_per_chunk": round(statistics.median(1000 * f["cpu_s"] / f["chunks"] for f in found), 1),
            "chunks_per_s": round(statistics.median(f["chunks"] / f["wall_s"] for f in found), 2),
            "wall_s": [round(f["wall_s"], 1) for f in found],
        }
    return result


def print_side_by_side(r: dict[str, Any]) -> None:
    first = next(iter(r["trees"].values()))
    print(f"\n## `rag ingest`, {r['corpus']} (every {r['share']} file(s)), empty cache, trees in turn, "
          f"median of {r['rounds']} rounds; {' '.join(r['settings']) or 'default settings'}; "
          f"load {r['loadavg_1m'][0]} -> {r['loadavg_1m'][-1]}")
    print("| tree | chunks | CPU-ms per chunk | chunks/s end to end | vs the first tree | wall s per round |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for tree, t in r["trees"].items():
        print(f"| {tree} | {t['chunks']} | {t['cpu_ms_per_chunk']} | {t['chunks_per_s']} | "
              f"{t['chunks_per_s'] / first['chunks_per_s']:.2f}x | {', '.join(map(str, t['wall_s']))} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", choices=["handbook", "scifact"], default="handbook")
    parser.add_argument("--limit", type=int, default=None, help="only the first N SciFact records")
    parser.add_argument("--keep", action="store_true", help="keep the temporary home")
    parser.add_argument("--no-sentences", action="store_true",
                        help="publish without the answers' sentence vectors (Publisher.sentences off): chunks only")
    parser.add_argument("--backend", choices=["onnx", "torch"], default="onnx", help="the local model's runtime")
    parser.add_argument("--bulk-backend", choices=["onnx", "torch"], default="onnx",
                        help="with --backend onnx: the runtime of a publish's document batches")
    parser.add_argument("--json", metavar="PATH", help="also write the result as JSON ('-' for stdout)")
    parser.add_argument("--trees", type=Path, nargs="+", metavar="TREE",
                        help="side by side instead: `rag ingest` by the code of each tree (a checkout), in turn")
    parser.add_argument("--share", type=int, default=1, help="with --trees: every Nth file of the corpus")
    parser.add_argument("--rounds", type=int, default=2, help="with --trees: rounds of turns")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="with --trees: an environment variable for every tree's ingest (repeatable)")
    args = parser.parse_args(argv)
    if args.trees:
        result = side_by_side(args.trees, args.corpus, args.share, args.rounds, args.set)
        print_side_by_side(result)
        write_json(result, args.json)
        return 0
    result = run(args.corpus, args.limit, args.keep, sentences=not args.no_sentences, backend=args.backend,
                 bulk=args.bulk_backend)
    print_table(result)
    write_json(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
