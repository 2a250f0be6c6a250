"""Tune the hybrid's vector weight: `python -m evals.tune_fusion --dataset DIR [--split train]`.

Each lane's chunk ranking is computed once per query; the hybrid is then re-fused for every
vector weight in 0.0..2.0 (text weight = 2 - vector weight) with the retriever's own
`reciprocal_rank_fusion`, so the sweep costs no further queries. Pick the weight on train queries.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Mapping, Sequence

from rich.console import Console
from rich.table import Table

from evals.beir import BeirDataset, load_beir
from evals.metrics import evaluate, mean_ndcg
from evals.retrieval import DEPTH, LANES, TOP, documents, eval_home, open_bench, progress_bar
from rag.retrieve.fusion import reciprocal_rank_fusion
from rag.retrieve.types import LaneHit
from rag.settings import RetrieveSettings

Rankings = tuple[dict[str, list[LaneHit]], dict[int, str]]  # lane -> chunk ranking; chunk -> corpus id


def fuse(rankings: Rankings, vector_weight: float, rrf_k: int = 60, depth: int = DEPTH) -> list[str]:
    """The hybrid's documents as the retriever would rank them with this weight and lane depth."""
    lanes, chunk_doc = rankings
    lanes = {lane: hits[:depth] for lane, hits in lanes.items()}
    fused = reciprocal_rank_fusion(lanes, {"vector": vector_weight, "text": 2.0 - vector_weight}, rrf_k)[:depth]
    return list(dict.fromkeys(chunk_doc[f.chunk_id] for f in fused))[:TOP]


def sweep(
    cached: Mapping[str, Rankings],
    qrels: Mapping[str, Mapping[str, int]],
    weights: Sequence[float],
    rrf_k: int = 60,
    candidates: int = 100,
) -> list[dict]:
    """Per weight: nDCG@10 and Recall@100 at the eval's lane depth, and nDCG@10 at the product's
    own lane depth (`retrieve.candidates`, what a search for 10 hits fuses)."""
    rows = []
    for w in weights:
        run = {qid: fuse(r, w, rrf_k) for qid, r in cached.items()}
        product = {qid: fuse(r, w, rrf_k, candidates) for qid, r in cached.items()}
        rows.append({"vector_weight": w, **evaluate(run, qrels), "ndcg@10_candidates": mean_ndcg(product, qrels, 10)})
    return rows


def best(rows: Sequence[dict], metric: str = "ndcg@10") -> dict:
    # The highest metric; among equals (to 4 places) the higher recall, then the weight nearest 1.
    return max(rows, key=lambda r: (round(r[metric], 4), round(r["recall@100"], 4), -abs(r["vector_weight"] - 1)))


def collect(
    dataset: BeirDataset, home: Path | None, console: Console
) -> tuple[dict[str, Rankings], RetrieveSettings, bool]:
    """Every query's lane rankings, the retrieve settings, and whether re-fusion matches the retriever."""
    with ExitStack() as stack, progress_bar(console) as progress:
        bench = open_bench(dataset, eval_home(stack, home), progress)
        stack.callback(bench.service.close)
        settings = bench.service.settings.retrieve
        items = list(dataset.queries.items())
        task = progress.add_task("lane rankings", total=len(items))
        cached: dict[str, Rankings] = {}
        for qid, query in items:
            cached[qid] = bench.lane_rankings(query)
            progress.advance(task)
        # The re-fusion must be the retriever's own fusion: compare on a few queries.
        same = all(
            fuse(cached[qid], settings.vector_weight, settings.rrf_k) == documents(bench.retrieve(q, LANES["hybrid"]))
            for qid, q in items[:25]
        )
    return cached, settings, same


def render(result: dict, candidates: int) -> None:
    out = Console()
    table = Table(title=f"hybrid on {result['dataset']} {result['split']} ({result['queries']} queries), "
                        f"rrf_k {result['rrf_k']}")
    for column in ("vector_weight", "text_weight", "nDCG@10", "Recall@100", f"nDCG@10 (depth {candidates})"):
        table.add_column(column, justify="right")
    top = result["best"]
    for row in result["sweep"]:
        current = row["vector_weight"] == result["current_vector_weight"]
        style = "bold green" if row is top else ("bold" if current else None)
        table.add_row(f"{row['vector_weight']:.1f}", f"{2 - row['vector_weight']:.1f}", f"{row['ndcg@10']:.4f}",
                      f"{row['recall@100']:.4f}", f"{row['ndcg@10_candidates']:.4f}", style=style)
    out.print(table)
    for name, scores in result["lanes"].items():
        out.print(f"{name} lane alone: nDCG@10 {scores['ndcg@10']:.4f}, Recall@100 {scores['recall@100']:.4f}")
    alt = result["best_at_candidates"]
    out.print(f"the sweep fuses {DEPTH} chunks per lane; at the product's depth ({candidates}) the best weight is "
              f"{alt['vector_weight']:.1f} (nDCG@10 {alt['ndcg@10_candidates']:.4f})")
    out.print(f"re-fusion reproduces the retriever's hybrid: {'yes' if result['refusion_matches_retriever'] else 'NO'}")
    out.print(f"best vector_weight: {top['vector_weight']:.1f} (nDCG@10 {top['ndcg@10']:.4f}, "
              f"Recall@100 {top['recall@100']:.4f}); current setting {result['current_vector_weight']}; "
              f"{result['seconds']:.0f} s")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evals.tune_fusion", description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", type=Path, required=True, help="a BEIR-layout directory")
    parser.add_argument("--split", default="train", help="qrels/<split>.tsv to tune on (default: train)")
    parser.add_argument("--home", type=Path, help="keep the ingested store here (default: a temp dir)")
    parser.add_argument("--limit", type=int, help="only the first N queries")
    parser.add_argument("--step", type=float, default=0.1)
    parser.add_argument("--json", action="store_true", help="print the sweep as JSON")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    try:
        dataset = load_beir(args.dataset, args.split, args.limit)
    except FileNotFoundError as exc:
        parser.error(str(exc))
    cached, settings, same = collect(dataset, args.home, Console(stderr=True))
    weights = [round(i * args.step, 4) for i in range(int(round(2.0 / args.step)) + 1)]
    rows = sweep(cached, dataset.qrels, weights, settings.rrf_k, settings.candidates)
    result = {
        "dataset": dataset.name, "split": dataset.split, "queries": len(dataset.queries), "rrf_k": settings.rrf_k,
        "current_vector_weight": settings.vector_weight, "refusion_matches_retriever": same,
        "lanes": {
            name: evaluate({qid: _lane_docs(r, name) for qid, r in cached.items()}, dataset.qrels)
            for name in ("text", "vector")
        },
        "sweep": rows,
        "best": best(rows),
        "best_at_candidates": best(rows, "ndcg@10_candidates"),
        "seconds": round(time.perf_counter() - started, 1),
    }
    if args.json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        render(result, settings.candidates)
    return 0


def _lane_docs(rankings: Rankings, lane: str) -> list[str]:
    lanes, chunk_doc = rankings
    return list(dict.fromkeys(chunk_doc[h.chunk_id] for h in lanes[lane]))[:TOP]


if __name__ == "__main__":
    raise SystemExit(main())
