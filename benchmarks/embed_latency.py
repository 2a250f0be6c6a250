"""The local model's runtimes side by side: query embedding latency, queries/s from concurrent
callers, document throughput, and agreement with the torch model, on SciFact text.

For each runtime (torch fp32 through sentence-transformers; ONNX Runtime fp32; ONNX with int8
queries, an answer's and a search's: `embed_query`, `embed_search_query`), on the same machine in turn:

- query p50/p95: `embed_query` of N SciFact queries, one at a time, after a warm-up;
- queries/s with C threads calling `embed_query` at once (the server's case);
- documents/s: `embed` of D SciFact abstracts (title and text), batches of 64;
- cosine to torch: the worst and the mean over the queries (and the documents).

CPU time per query is printed beside wall time: on a shared machine it moves less with the load.

With `--ndcg-docs N`, also retrieval quality by query encoder: dense nDCG@10 of the 300 SciFact
test queries over N abstracts (every abstract judged relevant to a test query, then others drawn
at random, seed 0), the abstracts embedded once by the fp32 model (the vectors the store holds on
either runtime), each runtime embedding the queries. The whole corpus (5,183) is the real figure;
a slice compares the encoders at a fraction of the cost (the document vectors are cached under
.cache/bench/).

    python -m benchmarks.embed_latency [--queries 200] [--docs 128] [--clients 4] [--ndcg-docs 1500] [--json out.json]
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from typing import Any

import numpy as np

from benchmarks import write_json
from benchmarks.fixture100k import DATASETS, read_jsonl

# One thread each, as `rag serve` runs the model (rag/api/app.py: serving_process): on a shared
# 2-core machine a second intra-op thread mostly waits for a core.
RUNTIMES = {
    "torch fp32": {"backend": "torch"},
    "onnx fp32": {"backend": "onnx", "int8_queries": False, "threads": 1},
    "onnx, int8 queries (answers)": {"backend": "onnx", "int8_queries": True, "threads": 1},
    "onnx, int8 search queries": {"backend": "onnx", "int8_queries": True, "threads": 1, "search": True},
}


def runtime(config: dict[str, Any]) -> tuple[Any, Any]:
    """(the embedder of a runtime, its query call: a search's or an answer's)."""
    from rag.models.embed import local_embedder
    from rag.settings import EmbedSettings

    embedder = local_embedder(64, EmbedSettings(**{k: v for k, v in config.items() if k != "search"}))
    return embedder, embedder.embed_search_query if config.get("search") else embedder.embed_query


def texts(n_queries: int, n_docs: int) -> tuple[list[str], list[str]]:
    queries = [q["text"] for _, q in zip(range(n_queries), read_jsonl(DATASETS / "scifact" / "queries.jsonl"))]
    docs = [f"{d['title']}\n{d['text']}" for _, d in zip(range(n_docs), read_jsonl(DATASETS / "scifact" / "corpus.jsonl"))]
    return queries, docs


def concurrent_rate(embed_query: Any, queries: list[str], clients: int) -> float:
    """Queries/s with `clients` threads sharing the query list."""
    position = iter(range(len(queries)))
    lock = threading.Lock()

    def work() -> None:
        while True:
            with lock:
                i = next(position, None)
            if i is None:
                return
            embed_query(queries[i])

    threads = [threading.Thread(target=work) for _ in range(clients)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(queries) / (time.perf_counter() - started)


def measure(name: str, config: dict[str, Any], queries: list[str], docs: list[str], clients: int) -> dict[str, Any]:
    embedder, embed_query = runtime(config)
    for q in queries[:10]:
        embed_query(q)
    embedder.embed(docs[:8])
    wall, cpu, vectors = [], [], []
    for q in queries:
        w, c = time.perf_counter(), time.thread_time()
        vectors.append(embed_query(q))
        cpu.append(time.thread_time() - c)
        wall.append(time.perf_counter() - w)
    started = time.perf_counter()
    doc_vectors = embedder.embed(docs)
    docs_s = time.perf_counter() - started
    return {
        "runtime": name, "query_p50_ms": 1000 * float(np.percentile(wall, 50)),
        "query_p95_ms": 1000 * float(np.percentile(wall, 95)), "query_cpu_p50_ms": 1000 * float(np.percentile(cpu, 50)),
        "concurrent_qps": concurrent_rate(embed_query, queries, clients), "docs_per_s": len(docs) / docs_s,
        "_queries": np.stack(vectors), "_docs": doc_vectors,
    }


def dense_ndcg(n_docs: int) -> list[dict[str, Any]]:
    """nDCG@10 (and Recall@100) of each runtime's query vectors against the same fp32 document vectors."""
    import random

    from benchmarks.fixture100k import BENCH_CACHE
    from evals.beir import load_beir
    from evals.metrics import mean_ndcg, mean_recall
    from rag.models.embed import local_embedder
    from rag.settings import EmbedSettings

    data = load_beir(DATASETS / "scifact", "test")
    relevant = {doc for judged in data.qrels.values() for doc in judged}
    corpus = [d for d in data.corpus if d["_id"] in relevant]
    others = [d for d in data.corpus if d["_id"] not in relevant]
    random.Random(0).shuffle(others)
    corpus += others[:max(0, n_docs - len(corpus))]
    ids = [d["_id"] for d in corpus]
    cached = BENCH_CACHE / f"scifact_abstracts_{len(corpus)}.npy"
    if cached.exists():
        doc_vectors = np.load(cached)
    else:
        fp32 = local_embedder(64, EmbedSettings(backend="onnx", int8_queries=False))
        doc_vectors = fp32.embed([f"{d['title']}\n{d['text']}" for d in corpus])
        cached.parent.mkdir(parents=True, exist_ok=True)
        np.save(cached, doc_vectors)
    rows = []
    for name, config in RUNTIMES.items():
        _, embed_query = runtime(config)
        run = {}
        for qid, text in data.queries.items():
            scores = doc_vectors @ embed_query(text)
            run[qid] = [ids[i] for i in np.argsort(-scores)[:100]]
        rows.append({"runtime": name, "ndcg@10": mean_ndcg(run, data.qrels), "recall@100": mean_recall(run, data.qrels),
                     "queries": len(run), "documents": len(corpus)})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--docs", type=int, default=128)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--ndcg-docs", type=int, default=0, help="also dense nDCG@10 on SciFact over N abstracts")
    parser.add_argument("--skip-latency", action="store_true", help="only the nDCG table")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON ('-' for stdout)")
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    if not args.skip_latency:
        rows = latency_table(args)
    if args.ndcg_docs:
        quality = dense_ndcg(args.ndcg_docs)
        print(f"\n## dense retrieval by query encoder: SciFact test, {quality[0]['queries']} queries, "
              f"{quality[0]['documents']} abstracts (fp32 document vectors)")
        print("| query encoder | nDCG@10 | Recall@100 |")
        print("| --- | ---: | ---: |")
        for q in quality:
            print(f"| {q['runtime']} | {q['ndcg@10']:.4f} | {q['recall@100']:.4f} |")
        rows = rows + quality
    write_json(rows, args.json)
    return 0


def latency_table(args: argparse.Namespace) -> list[dict[str, Any]]:
    import torch

    torch.set_num_threads(1)
    queries, docs = texts(args.queries, args.docs)
    load_before = os.getloadavg()[0]
    rows = [measure(name, config, queries, docs, args.clients) for name, config in RUNTIMES.items()]
    ref_queries, ref_docs = rows[0]["_queries"], rows[0]["_docs"]  # torch
    for row in rows:
        q = np.sum(row.pop("_queries") * ref_queries, axis=1)
        d = np.sum(row.pop("_docs") * ref_docs, axis=1)
        row.update(query_cos_min=float(q.min()), query_cos_mean=float(q.mean()), doc_cos_min=float(d.min()))
    print(f"\n## local model runtimes: {len(queries)} SciFact queries, {len(docs)} abstracts, {args.clients} clients "
          f"(load {load_before:.2f} -> {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores)")
    print("| runtime | query p50 ms | query p95 ms | query CPU p50 ms | queries/s, "
          f"{args.clients} clients | documents/s | cosine to torch, queries min / mean | documents min |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['runtime']} | {r['query_p50_ms']:.2f} | {r['query_p95_ms']:.2f} | {r['query_cpu_p50_ms']:.2f} | "
              f"{r['concurrent_qps']:.1f} | {r['docs_per_s']:.1f} | {r['query_cos_min']:.4f} / {r['query_cos_mean']:.4f} | "
              f"{r['doc_cos_min']:.5f} |")
    return rows


if __name__ == "__main__":
    sys.exit(main())
