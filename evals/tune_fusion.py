"""Tune one lane's fusion weight: `python -m evals.tune_fusion --dataset DIR [--split train] [--lane vector]`.

Each lane's chunk ranking is computed once per query; the hybrid is then re-fused for every
weight of the swept lane in 0.0..2.0 with the search index's own fusion, so the sweep costs no
further queries. With two lanes the other one gets 2 - the weight (the weights keep summing to
2, as the defaults do); with more, the others keep their configured weights. Pick the weight on
train queries. The configured step after fusion runs too, built with each swept weight (score
fusion weighs the lanes' z-scores with them), so the sweep reproduces the retriever's hybrid.
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

from evals.beir import BeirDataset
from evals.metrics import evaluate, mean_ndcg
from evals.retrieval import DEPTH, TOP, documents, eval_home, load_dataset, open_bench, progress_bar
from rag.retrieve.fusion import reciprocal_rank_fusion
from rag.retrieve.index import build_reranker
from rag.retrieve.lanes import Reranker
from rag.retrieve.types import LaneHit, Query
from rag.settings import Settings

Rankings = tuple[dict[str, list[LaneHit]], dict[int, str]]  # lane -> chunk ranking; chunk -> corpus id


def lane_weights(current: Mapping[str, float], lane: str, weight: float) -> dict[str, float]:
    """The weights with `lane` at `weight`: with one other lane, that one gets 2 - weight; with
    more, the others keep theirs."""
    others = [name for name in current if name != lane]
    if len(others) == 1:
        return {lane: weight, others[0]: 2.0 - weight}
    return {**current, lane: weight}


def reranker_for(settings: Settings, weights: Mapping[str, float]) -> Reranker:
    """The configured step after fusion, as it would be built with these weights. It is given no
    session and an empty query: a reranker that reads the store or the question cannot be swept
    from cached rankings."""
    retrieve = settings.retrieve.model_copy(update={"weights": dict(weights)})
    return build_reranker(settings.model_copy(update={"retrieve": retrieve}), lambda: None)  # type: ignore[arg-type, return-value]


def fuse(rankings: Rankings, weights: Mapping[str, float], rrf_k: int = 60, depth: int = DEPTH,
         reranker: Reranker | None = None) -> list[str]:
    """The hybrid's documents as the search index ranks them (SearchIndex.rank) with these weights
    and lane depth."""
    lanes, chunk_doc = rankings
    lanes = {lane: hits[:depth] for lane, hits in lanes.items()}
    fused = reciprocal_rank_fusion(lanes, weights, rrf_k)
    if reranker is not None:
        fused = reranker.rerank(None, Query(""), fused, depth)  # type: ignore[arg-type]
    return list(dict.fromkeys(chunk_doc[f.chunk_id] for f in fused[:depth]))[:TOP]


def sweep(
    cached: Mapping[str, Rankings],
    qrels: Mapping[str, Mapping[str, int]],
    settings: Settings,
    current: Mapping[str, float],
    lane: str,
    values: Sequence[float],
) -> list[dict]:
    """Per weight of `lane`: nDCG@10 and Recall@100 at the eval's lane depth, and nDCG@10 at the
    product's own lane depth (`retrieve.candidates`, what a search for 10 hits fuses)."""
    rrf_k, candidates = settings.retrieve.rrf_k, settings.retrieve.candidates
    rows = []
    for w in values:
        weights = lane_weights(current, lane, w)
        reranker = reranker_for(settings, weights)
        run = {qid: fuse(r, weights, rrf_k, reranker=reranker) for qid, r in cached.items()}
        product = {qid: fuse(r, weights, rrf_k, candidates, reranker) for qid, r in cached.items()}
        rows.append({"weight": w, "weights": weights, **evaluate(run, qrels),
                     "ndcg@10_candidates": mean_ndcg(product, qrels, 10)})
    return rows


def best(rows: Sequence[dict], metric: str = "ndcg@10") -> dict:
    # The highest metric; among equals (to 4 places) the higher recall, then the weight nearest 1.
    return max(rows, key=lambda r: (round(r[metric], 4), round(r["recall@100"], 4), -abs(r["weight"] - 1)))


def collect(
    dataset: BeirDataset, home: Path | None, console: Console
) -> tuple[dict[str, Rankings], Settings, dict[str, float], bool]:
    """Every query's lane rankings, the settings, the index's weights, and whether re-fusion
    matches the retriever."""
    with ExitStack() as stack, progress_bar(console) as progress:
        bench = open_bench(dataset, eval_home(stack, home), progress)
        stack.callback(bench.service.close)
        settings = bench.service.settings
        weights = dict(bench.service.index.weights)
        reranker = reranker_for(settings, weights)
        items = list(dataset.queries.items())
        task = progress.add_task("lane rankings", total=len(items))
        cached: dict[str, Rankings] = {}
        for qid, query in items:
            cached[qid] = bench.lane_rankings(query)
            progress.advance(task)
        # The re-fusion must be the retriever's own fusion: compare on a few queries.
        same = all(
            fuse(cached[qid], weights, settings.retrieve.rrf_k, reranker=reranker) == documents(bench.retrieve(q, None))
            for qid, q in items[:25]
        )
    return cached, settings, weights, same


def render(result: dict, candidates: int) -> None:
    out = Console()
    lane = result["lane"]
    names = list(result["current_weights"])
    table = Table(title=f"hybrid on {result['dataset']} {result['split']} ({result['queries']} queries), "
                        f"rrf_k {result['rrf_k']}, rerank {result['rerank']}, sweeping the {lane} lane")
    for column in (*(f"{name} weight" for name in names), "nDCG@10", "Recall@100", f"nDCG@10 (depth {candidates})"):
        table.add_column(column, justify="right")
    top = result["best"]
    for row in result["sweep"]:
        current = row["weights"] == result["current_weights"]
        style = "bold green" if row is top else ("bold" if current else None)
        table.add_row(*(f"{row['weights'][name]:.1f}" for name in names), f"{row['ndcg@10']:.4f}",
                      f"{row['recall@100']:.4f}", f"{row['ndcg@10_candidates']:.4f}", style=style)
    out.print(table)
    for name, scores in result["lanes"].items():
        out.print(f"{name} lane alone: nDCG@10 {scores['ndcg@10']:.4f}, Recall@100 {scores['recall@100']:.4f}")
    alt = result["best_at_candidates"]
    out.print(f"the sweep fuses {DEPTH} chunks per lane; at the product's depth ({candidates}) the best {lane} weight "
              f"is {alt['weight']:.1f} (nDCG@10 {alt['ndcg@10_candidates']:.4f})")
    out.print(f"re-fusion reproduces the retriever's hybrid: {'yes' if result['refusion_matches_retriever'] else 'NO'}")
    out.print(f"best {lane} weight: {top['weight']:.1f} (nDCG@10 {top['ndcg@10']:.4f}, "
              f"Recall@100 {top['recall@100']:.4f}); current weights {result['current_weights']}; "
              f"{result['seconds']:.0f} s")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evals.tune_fusion", description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", type=Path, required=True, help="a BEIR-layout directory")
    parser.add_argument("--split", default="train", help="qrels/<split>.tsv to tune on (default: train)")
    parser.add_argument("--lane", default="vector", help="the lane whose weight is swept (default: vector)")
    parser.add_argument("--home", type=Path, help="keep the ingested store here (default: a temp dir)")
    parser.add_argument("--limit", type=int, help="only the first N queries")
    parser.add_argument("--step", type=float, default=0.1)
    parser.add_argument("--json", action="store_true", help="print the sweep as JSON")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    try:
        dataset = load_dataset(args.dataset, args.split, args.limit)
    except FileNotFoundError as exc:
        parser.error(str(exc))
    cached, settings, current, same = collect(dataset, args.home, Console(stderr=True))
    if args.lane not in current:
        parser.error(f"no lane named {args.lane!r} (the lanes: {', '.join(current)})")
    values = [round(i * args.step, 4) for i in range(int(round(2.0 / args.step)) + 1)]
    rows = sweep(cached, dataset.qrels, settings, current, args.lane, values)
    result = {
        "dataset": dataset.name, "split": dataset.split, "queries": len(dataset.queries),
        "rrf_k": settings.retrieve.rrf_k, "rerank": settings.retrieve.rerank,
        "lane": args.lane, "current_weights": current, "refusion_matches_retriever": same,
        "lanes": {
            name: evaluate({qid: _lane_docs(r, name) for qid, r in cached.items()}, dataset.qrels)
            for name in current
        },
        "sweep": rows,
        "best": best(rows),
        "best_at_candidates": best(rows, "ndcg@10_candidates"),
        "seconds": round(time.perf_counter() - started, 1),
    }
    if args.json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        render(result, settings.retrieve.candidates)
    return 0


def _lane_docs(rankings: Rankings, lane: str) -> list[str]:
    lanes, chunk_doc = rankings
    return list(dict.fromkeys(chunk_doc[h.chunk_id] for h in lanes[lane]))[:TOP]


if __name__ == "__main__":
    raise SystemExit(main())
