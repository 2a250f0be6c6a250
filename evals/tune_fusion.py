"""Tune fusion: `python -m evals.tune_fusion --dataset DIR [--split train] [--questions odd] [--methods ...]`.

Each lane's chunk ranking is computed once per query (or read back with `--load`, written with
`--save`); the hybrid is then re-fused for every fusion method (`rrf`, or score fusion with one of
the normalisations of rag/retrieve/fusion.py) and every weight of the swept lane in 0.0..2.0, so
the sweep costs no further queries. Sweeping the vector or the text lane, the other gets 2 - the
weight (the two keep summing to 2, as the defaults do); with more lanes, the others keep their
configured weights. The bridge's ranking (`SearchIndex.follow`: the title lane searched with the
first result's words) is cached like a lane's; it was searched from the first result under the
configured settings, so a sweep far from them re-fuses a bridge ranking the retriever would not
have made: check the chosen weights by running without `--load` under them.

Tune on the development queries only: SciFact's train split (`--split train`), the odd-numbered
questions of a question-answering dataset (`--questions odd`: the 1st, 3rd, … of questions.jsonl;
HotpotQA's ids are hashes); then read the held-out ones once (`--split test`, `--questions even`).
Every figure is given at the eval's lane depth (300) and at the product's (`retrieve.candidates`,
what a search for 10 results fuses), where `all@10` is the share of queries with every relevant
document among the first ten: for HotpotQA, both gold passages in the top 10 of `/v1/search`.
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
from evals.metrics import evaluate, mean_ndcg, share_all_found
from evals.retrieval import DEPTH, TOP, documents, eval_home, load_dataset, open_bench, progress_bar
from rag.retrieve.fusion import NORMALISERS, Fused, diversify, reciprocal_rank_fusion, score_fusion
from rag.retrieve.types import LaneHit
from rag.settings import Settings

Rankings = tuple[dict[str, list[LaneHit]], dict[int, str]]  # lane -> chunk ranking; chunk -> corpus id
METHODS = ("rrf", *NORMALISERS)


PAIRED = ("vector", "text")  # the two lanes of the query itself: their weights keep summing to 2


def lane_weights(current: Mapping[str, float], lane: str, weight: float) -> dict[str, float]:
    """The weights with `lane` at `weight`: sweeping one of the vector and text lanes, the other gets
    2 - weight; otherwise, with one other lane counting (weight above 0), that one gets 2 - weight;
    with more, the others keep theirs."""
    partner = [name for name in PAIRED if name != lane and name in current] if lane in PAIRED else []
    others = partner or [name for name in current if name != lane and current[name] > 0]
    if len(others) == 1:
        return {**current, lane: weight, others[0]: 2.0 - weight}
    return {**current, lane: weight}


def configured_method(settings: Settings) -> str:
    """What the retriever runs: RRF alone, or score fusion with its normalisation."""
    return "rrf" if settings.retrieve.rerank == "none" else settings.retrieve.score_norm


def _fused(rankings: Rankings, weights: Mapping[str, float], rrf_k: int, depth: int, method: str) -> list[Fused]:
    lanes = {lane: hits[:depth] for lane, hits in rankings[0].items() if weights.get(lane, 1.0) > 0}  # 0: left out
    fused = reciprocal_rank_fusion(lanes, weights, rrf_k)
    return fused if method == "rrf" else score_fusion(fused, weights, method)


def fuse(rankings: Rankings, weights: Mapping[str, float], rrf_k: int = 60, depth: int = DEPTH,
         method: str = "rrf") -> list[str]:
    """The hybrid's documents as the search index ranks them (SearchIndex.rank) with these weights,
    lane depth and fusion method."""
    chunk_doc = rankings[1]
    return list(dict.fromkeys(chunk_doc[f.chunk_id] for f in _fused(rankings, weights, rrf_k, depth, method)))[:TOP]


def search_documents(rankings: Rankings, weights: Mapping[str, float], settings: Settings, method: str,
                     per_document: int, limit: int = 10) -> list[str]:
    """The documents of a search's first `limit` results (chunks, at the product's lane depth), with
    at most `per_document` excerpts of one document among the first `diversity_window` (0: no cap)."""
    chunk_doc = rankings[1]
    fused = _fused(rankings, weights, settings.retrieve.rrf_k, settings.retrieve.candidates, method)
    order, _ = diversify([chunk_doc[f.chunk_id] for f in fused], per_document,
                         min(settings.retrieve.diversity_window, limit))
    return list(dict.fromkeys(chunk_doc[fused[i].chunk_id] for i in order[:limit]))


def sweep(
    cached: Mapping[str, Rankings],
    qrels: Mapping[str, Mapping[str, int]],
    settings: Settings,
    current: Mapping[str, float],
    lane: str,
    values: Sequence[float],
    methods: Sequence[str] = ("rrf",),
) -> list[dict]:
    """Per method and weight of `lane`: the metrics at the eval's lane depth, and at the product's
    own lane depth (`retrieve.candidates`), suffixed `_candidates`."""
    rrf_k, candidates = settings.retrieve.rrf_k, settings.retrieve.candidates
    rows = []
    for method in methods:
        for w in values:
            weights = lane_weights(current, lane, w)
            run = {qid: fuse(r, weights, rrf_k, method=method) for qid, r in cached.items()}
            product = {qid: fuse(r, weights, rrf_k, candidates, method) for qid, r in cached.items()}
            at_depth = evaluate(product, qrels)
            rows.append({"method": method, "weight": w, "weights": weights, **evaluate(run, qrels),
                         **{f"{key}_candidates": value for key, value in at_depth.items()}})
    return rows


def best(rows: Sequence[dict], metric: str = "ndcg@10") -> dict:
    # The highest metric; among equals (to 4 places) the higher recall, then the weight nearest 1.
    return max(rows, key=lambda r: (round(r[metric], 4), round(r["recall@100"], 4), -abs(r["weight"] - 1)))


def pick_questions(dataset: BeirDataset, which: str) -> BeirDataset:
    """The odd-numbered (1st, 3rd, …), even-numbered or all queries, by their place in the file."""
    if which == "all":
        return dataset
    keep = [qid for i, qid in enumerate(dataset.queries, start=1) if (i % 2 == 1) == (which == "odd")]
    return BeirDataset(dataset.path, f"{dataset.split}:{which}", dataset.corpus,
                       {qid: dataset.queries[qid] for qid in keep}, {qid: dataset.qrels[qid] for qid in keep})


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
        items = list(dataset.queries.items())
        task = progress.add_task("lane rankings", total=len(items))
        cached: dict[str, Rankings] = {}
        for qid, query in items:
            cached[qid] = bench.lane_rankings(query)
            progress.advance(task)
        # The re-fusion must be the retriever's own fusion: compare on a few queries.
        method = configured_method(settings)
        same = all(
            fuse(cached[qid], weights, settings.retrieve.rrf_k, method=method) == documents(bench.retrieve(q, None))
            for qid, q in items[:25]
        )
    return cached, settings, weights, same


def save_rankings(path: Path, cached: Mapping[str, Rankings], weights: Mapping[str, float], same: bool) -> None:
    payload = {"weights": dict(weights), "refusion_matches_retriever": same, "queries": {
        qid: {"lanes": {lane: [[h.chunk_id, h.score] for h in hits] for lane, hits in lanes.items()},
              "docs": {str(chunk): doc for chunk, doc in chunk_doc.items()}}
        for qid, (lanes, chunk_doc) in cached.items()}}
    path.write_text(json.dumps(payload), encoding="utf-8")


def load_rankings(path: Path) -> tuple[dict[str, Rankings], dict[str, float], bool]:
    payload = json.loads(path.read_text(encoding="utf-8"))
    cached = {
        qid: ({lane: [LaneHit(int(c), float(s)) for c, s in hits] for lane, hits in q["lanes"].items()},
              {int(chunk): doc for chunk, doc in q["docs"].items()})
        for qid, q in payload["queries"].items()}
    return cached, payload["weights"], payload["refusion_matches_retriever"]


def render(result: dict, candidates: int) -> None:
    out = Console()
    lane = result["lane"]
    names = list(result["current_weights"])
    table = Table(title=f"hybrid on {result['dataset']} {result['split']} ({result['queries']} queries), "
                        f"rrf_k {result['rrf_k']}, sweeping the {lane} lane")
    columns = ("method", *(f"{name} weight" for name in names), "nDCG@10", "Recall@100",
               f"nDCG@10 (depth {candidates})", f"all@10 (depth {candidates})")
    for column in columns:
        table.add_column(column, justify="right")
    top = result["best"]
    for row in result["sweep"]:
        style = "bold green" if row is top else None
        table.add_row(row["method"], *(f"{row['weights'][name]:.1f}" for name in names), f"{row['ndcg@10']:.4f}",
                      f"{row['recall@100']:.4f}", f"{row['ndcg@10_candidates']:.4f}",
                      f"{row['all@10_candidates']:.4f}", style=style)
    out.print(table)
    for name, scores in result["lanes"].items():
        out.print(f"{name} lane alone: nDCG@10 {scores['ndcg@10']:.4f}, Recall@100 {scores['recall@100']:.4f}, "
                  f"all@10 {scores['all@10']:.4f}")
    for method, row in result["best_by_method"].items():
        out.print(f"best {method}: {lane} weight {row['weight']:.1f}, nDCG@10 {row['ndcg@10']:.4f} "
                  f"(depth {candidates}: {row['ndcg@10_candidates']:.4f}, all@10 {row['all@10_candidates']:.4f})")
    for method, figures in result["search_top10"].items():
        out.print(f"{method}, a search's first 10 results: " + "; ".join(
            f"{cap}: nDCG@10 {v['ndcg@10']:.4f}, all@10 {v['all@10']:.4f}" for cap, v in figures.items()))
    out.print(f"re-fusion reproduces the retriever's hybrid: {'yes' if result['refusion_matches_retriever'] else 'NO'}")
    out.print(f"best: {top['method']}, {lane} weight {top['weight']:.1f} (nDCG@10 {top['ndcg@10']:.4f}); "
              f"current weights {result['current_weights']}; {result['seconds']:.0f} s")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m evals.tune_fusion", description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", type=Path, required=True, help="a BEIR-layout or question-answering directory")
    parser.add_argument("--split", default="train", help="qrels/<split>.tsv to tune on (default: train)")
    parser.add_argument("--questions", choices=("odd", "even", "all"), default="all",
                        help="the odd-numbered (tuning), even-numbered (held out) or all queries, by place in the file")
    parser.add_argument("--lane", default="vector", help="the lane whose weight is swept (default: vector)")
    parser.add_argument("--methods", default=None,
                        help=f"fusion methods to compare, comma-separated, of {', '.join(METHODS)} (default: the "
                             "configured one)")
    parser.add_argument("--weights", default=None, help="only these weights of the swept lane, comma-separated")
    parser.add_argument("--set", default=None, help="start from these lane weights, e.g. title=0,text=1.2 "
                                                    "(0 leaves a lane out)")
    parser.add_argument("--home", type=Path, help="keep the ingested store here (default: a temp dir)")
    parser.add_argument("--save", type=Path, help="write every query's lane rankings here (JSON)")
    parser.add_argument("--load", type=Path, help="read the lane rankings from a --save file instead of searching")
    parser.add_argument("--limit", type=int, help="only the first N queries")
    parser.add_argument("--step", type=float, default=0.1)
    parser.add_argument("--json", action="store_true", help="print the sweep as JSON")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    started = time.perf_counter()
    try:
        dataset = pick_questions(load_dataset(args.dataset, args.split, args.limit), args.questions)
    except FileNotFoundError as exc:
        parser.error(str(exc))
    settings = Settings()
    if args.load:
        cached, current, same = load_rankings(args.load)
        missing = [qid for qid in dataset.queries if qid not in cached]
        if missing:
            parser.error(f"{args.load} has no rankings for {len(missing)} of these queries (e.g. {missing[0]})")
        cached = {qid: cached[qid] for qid in dataset.queries}
    else:
        cached, settings, current, same = collect(dataset, args.home, Console(stderr=True))
    if args.save:
        save_rankings(args.save, cached, current, same)
    for item in (args.set.split(",") if args.set else []):
        name, _, value = item.partition("=")
        current[name.strip()] = float(value)
    methods = args.methods.split(",") if args.methods else [configured_method(settings)]
    if args.lane not in current or any(m not in METHODS for m in methods):
        parser.error(f"lanes: {', '.join(current)}; methods: {', '.join(METHODS)}")
    values = ([float(w) for w in args.weights.split(",")] if args.weights
              else [round(i * args.step, 4) for i in range(int(round(2.0 / args.step)) + 1)])
    rows = sweep(cached, dataset.qrels, settings, current, args.lane, values, methods)
    result = {
        "dataset": dataset.name, "split": dataset.split, "queries": len(dataset.queries),
        "rrf_k": settings.retrieve.rrf_k, "methods": methods,
        "lane": args.lane, "current_weights": current, "refusion_matches_retriever": same,
        "lanes": {
            name: evaluate({qid: _lane_docs(r, name) for qid, r in cached.items()}, dataset.qrels)
            for name in current if all(name in lanes for lanes, _ in cached.values())
        },
        "sweep": rows,
        "best": best(rows),
        "best_by_method": {m: best([r for r in rows if r["method"] == m]) for m in methods},
        # What /v1/search with limit 10 returns (the documents of its ten results), for the current
        # weights and each method, uncapped and with the per-document cap as configured.
        "search_top10": {m: {f"per_document {cap}": _top10(
            {qid: search_documents(r, current, settings, m, cap) for qid, r in cached.items()}, dataset.qrels)
            for cap in (0, settings.retrieve.per_document)} for m in methods},
        "seconds": round(time.perf_counter() - started, 1),
    }
    if args.json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        render(result, settings.retrieve.candidates)
    return 0


def _top10(run: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]]) -> dict[str, float]:
    return {"ndcg@10": mean_ndcg(run, qrels, 10), "all@10": share_all_found(run, qrels, 10)}


def _lane_docs(rankings: Rankings, lane: str) -> list[str]:
    lanes, chunk_doc = rankings
    return list(dict.fromkeys(chunk_doc[h.chunk_id] for h in lanes[lane]))[:TOP]


if __name__ == "__main__":
    raise SystemExit(main())
