"""How sentence vectors pooled out of their chunk's pass compare with sentences embedded alone.

    python -m evals.pooling [--shares 0,0.2,0.3,0.4,0.5,0.6]

A publish pools each sentence of a chunk out of the chunk's own model pass (rag/models/onnx_encoder.py
`pool_ranges`), less `CONTEXT_SHARE` times the chunk's mean; the extractive answer's thresholds were
fitted on sentences embedded alone. For each share this reads, on the gold page of every question of
the fitting halves of the dev sets (handbook fixture: odd positions; uv_docs and the dev questions:
odd ids; rag/synthesize/extractive/fitted.json's splits, evals/fit_answers.py):

- question-sentence similarity, pooled minus alone: the mean and the mean of its absolute value;
- neighbouring sentences' cosine, and the share of pairs above the answer's `repeat_similarity`;
- how often the page's sentence most similar to the question holds an answer key (top 1, top 3).

The share with the least mean absolute difference is the one whose similarities the thresholds read
as they were fitted (CONTEXT_SHARE). The model runs here; nothing is stored.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
DATASETS = REPO.parent / "shared" / "datasets"


def _odd(identifier: str) -> bool:
    digits = "".join(c for c in identifier if c.isdigit())
    return bool(digits) and int(digits) % 2 == 1


def fitting_items() -> list[tuple[str, Path, list[str]]]:
    """(question, gold page, answer keys) of the fitting halves."""
    items = []
    handbook = yaml.safe_load((REPO / "evals" / "fixtures" / "handbook_questions.yaml").read_text())
    for n, q in enumerate(handbook["answerable"], start=1):
        if n % 2 == 1:
            items.append((q["question"], DATASETS / "handbook_18f" / "pages" / q["pages"][0], q["facts"]))
    dev = REPO / "evals" / "fixtures" / "dev"
    for path, root in ((DATASETS / "uv_docs" / "questions.jsonl", DATASETS / "uv_docs" / "pages"),
                       (dev / "handbook.jsonl", DATASETS / "handbook_18f" / "pages"),
                       (dev / "uv_docs.jsonl", DATASETS / "uv_docs" / "pages")):
        for line in path.read_text().splitlines():
            q = json.loads(line)
            if q.get("answer_keys") and q.get("gold_pages") and _odd(q["_id"]):
                items.append((q["question"], root / q["gold_pages"][0], q["answer_keys"]))
    return items


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shares", default="0,0.2,0.3,0.4,0.5,0.6")
    args = parser.parse_args(argv)
    import rag  # noqa: F401  (process defaults first)
    from rag.ingest.chunk import Chunker
    from rag.models.embed import local_embedder
    from rag.models.onnx_encoder import CONTEXT_SHARE, FP32_FILE, pool_ranges
    from rag.settings import EmbedSettings
    from rag.synthesize.extractive import ExtractiveSynthesizer
    from rag.synthesize.extractive.tuning import TUNING

    shares = [float(s) for s in args.shares.split(",")]
    embedder = local_embedder(64, EmbedSettings(bulk_backend="onnx"))
    encoder = embedder._onnx(FP32_FILE)
    chunker = Chunker()
    pages: dict[Path, tuple[list[str], np.ndarray, dict[float, np.ndarray]]] = {}

    def read(page: Path) -> tuple[list[str], np.ndarray, dict[float, np.ndarray]]:
        """The page's sentence keys, their vectors alone, and pooled at each share (alone where
        the pass does not hold a sentence, as a publish does)."""
        if page not in pages:
            keys: list[str] = []
            pooled: dict[float, list[np.ndarray | None]] = {s: [] for s in shares}
            for spec in chunker.chunk(page.read_text(encoding="utf-8"), None):
                text = spec.indexed_text(True).strip()
                spans = ExtractiveSynthesizer.publish_sentences(text, spec.text, spec.heading_path)
                tokens = encoder.tokens(text)
                _, hidden = encoder.run_states([tokens])
                keys += [s.key for s in spans]
                for share in shares:
                    pooled[share] += pool_ranges(hidden[0], tokens.offsets, tokens.attention_mask,
                                                 [s.ranges for s in spans], share)
            alone = embedder.embed(keys) if keys else np.zeros((0, embedder.dim), dtype=np.float32)
            stacked = {s: np.stack([v if v is not None else a for v, a in zip(pooled[s], alone)]) if keys else alone
                       for s in shares}
            pages[page] = (keys, alone, stacked)
        return pages[page]

    items = fitting_items()
    rows: dict[str, dict[str, Any]] = {}
    for label in ["alone", *shares]:
        diffs: list[float] = []
        top1 = top3 = asked = 0
        for question, page, answer_keys in items:
            keys, alone, pooled = read(page)
            if not keys:
                continue
            vectors = alone if label == "alone" else pooled[label]
            q = embedder.embed_query(question)
            sims = vectors @ q
            diffs += list(sims - alone @ q)
            holds = [any(k.lower() in key.lower() for k in answer_keys) for key in keys]
            order = np.argsort(-sims)
            asked += 1
            top1 += holds[order[0]]
            top3 += any(holds[i] for i in order[:3])
        pairs = np.concatenate([np.sum(v[:-1] * v[1:], axis=1) for keys, alone, pooled in pages.values()
                                for v in [alone if label == "alone" else pooled[label]] if len(keys) > 1])
        d = np.array(diffs)
        rows[str(label)] = {"mean_diff": float(d.mean()), "mean_abs_diff": float(np.abs(d).mean()),
                            "neighbours": float(pairs.mean()),
                            "repeats": float(np.mean(pairs > TUNING.repeat_similarity)),
                            "top1": top1, "top3": top3, "questions": asked}
    print(f"\n{len(items)} questions (fitting halves), {len(pages)} gold pages; CONTEXT_SHARE now {CONTEXT_SHARE}")
    print("| vectors | q-s similarity, pooled - alone: mean / mean abs | neighbours' cosine | pairs above "
          f"{TUNING.repeat_similarity} | answer key in the top 1 / top 3 |")
    print("| --- | --- | --- | --- | --- |")
    for label, r in rows.items():
        name = "alone" if label == "alone" else f"pooled, share {label}"
        print(f"| {name} | {r['mean_diff']:+.3f} / {r['mean_abs_diff']:.3f} | {r['neighbours']:.3f} | "
              f"{r['repeats']:.3f} | {r['top1']} / {r['top3']} of {r['questions']} |")
    best = min((s for s in rows if s != "alone"), key=lambda s: rows[s]["mean_abs_diff"])
    print(f"\nleast mean absolute difference: share {best}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
