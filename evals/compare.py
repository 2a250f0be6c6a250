"""`rag eval compare A B`: the differences between two `rag eval run --out` folders.

A regression is a score of ours (the `rag` system) that B has lower than A by more than the
tolerance (absolute), in any question group (a pages-layout run's groups are its question kinds and
splits; its wrongly_declined regresses when it grows); with a latency tolerance, also a latency that B has
higher than A by more than that share. Baselines are shown but never judged: they only move when
retrieval or the dataset does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evals.answer_metrics import METRICS
from evals.page_metrics import LOWER_IS_BETTER, PAGE_METRICS

LATENCY = ("latency_p50_ms", "latency_p95_ms")
SAME_RUN_KEYS = ("dataset", "questions", "corpus_records", "split")


@dataclass
class Difference:
    group: str
    system: str
    metric: str
    a: float | None
    b: float | None
    regression: bool

    @property
    def delta(self) -> float | None:
        return None if self.a is None or self.b is None else round(self.b - self.a, 4)


def load_run(folder: Path) -> dict[str, Any]:
    path = Path(folder) if Path(folder).suffix == ".json" else Path(folder) / "summary.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing (give a folder written by `rag eval run --out`)")
    return json.loads(path.read_text())


def mismatches(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Why the two runs may not measure the same thing (dataset, size, unanswerable split)."""
    found = [f"{key}: {a.get(key)} vs {b.get(key)}" for key in SAME_RUN_KEYS if a.get(key) != b.get(key)]
    ua, ub = a.get("unanswerable", {}), b.get("unanswerable", {})
    if (ua.get("fraction"), ua.get("seed")) != (ub.get("fraction"), ub.get("seed")):
        found.append(f"unanswerable: {ua.get('fraction')} seed {ua.get('seed')} vs {ub.get('fraction')} seed {ub.get('seed')}")
    return found


def _regressed(metric: str, a: Any, b: Any, tolerance: float, latency_tolerance: float | None) -> bool:
    if a is None or b is None or metric in ("questions", "answerable"):
        return False
    if metric in LATENCY:
        return latency_tolerance is not None and b > a * (1 + latency_tolerance)
    if metric in LOWER_IS_BETTER:
        return b > a + tolerance + 1e-12
    return b < a - tolerance - 1e-12  # a float rounding never reads as a regression


def compare_runs(
    a: dict[str, Any], b: dict[str, Any], tolerance: float = 0.02, latency_tolerance: float | None = None
) -> list[Difference]:
    diffs: list[Difference] = []
    names = PAGE_METRICS if a.get("layout") == "pages" else METRICS  # a pages-layout run: by question kind
    for group, systems in a["scores"].items():
        for system, metrics in systems.items():
            other = b["scores"].get(group, {}).get(system, {})
            for metric in names:
                va, vb = metrics.get(metric), other.get(metric)
                judged = system == "rag" and _regressed(metric, va, vb, tolerance, latency_tolerance)
                diffs.append(Difference(group, system, metric, va, vb, judged))
    for key in ("support_recall", "support_precision"):
        sa, sb = a.get("citation_support") or {}, b.get("citation_support") or {}
        va, vb = sa.get(key), sb.get(key)
        if va is not None or vb is not None:
            diffs.append(Difference("all", "rag", key, va, vb, _regressed(key, va, vb, tolerance, None)))
    return diffs
