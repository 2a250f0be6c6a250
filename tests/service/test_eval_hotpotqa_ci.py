"""CI's answer eval: the first 50 HotpotQA questions over the pooled corpus (4,858 passages), asked
through the real pipeline, with thresholds that catch a regression of the citations or answers.

Measured on this run (extractive, tantivy keyword lane): citation precision 0.81 (top-1 copy 0.80),
recall 0.60 (0.40), answer_contains 0.44 (0.26), retrieval recall@10 0.85, every citation valid.
Before the extractive synthesizer followed links between documents it scored precision 0.71, so
the precision floor below fails on that. The first run embeds the corpus into the shared cache
(minutes on 2 cores); later runs take about a minute.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from rich.console import Console

from evals.answer_report import write_run
from evals.answers import AnswerEvalOptions, run_answer_eval
from evals.compare import compare_runs

from ..support.paths import SHARED

HOTPOTQA = SHARED / "datasets" / "hotpotqa_dev500"


@pytest.mark.slow
def test_hotpotqa_50_questions_keep_their_scores(tmp_path: Path) -> None:
    if not (HOTPOTQA / "questions.jsonl").is_file():
        if os.environ.get("CI"):
            raise AssertionError(f"{HOTPOTQA} is missing")
        pytest.skip(f"{HOTPOTQA} is missing")
    options = AnswerEvalOptions(HOTPOTQA, synthesizer="extractive", limit=50, home=tmp_path / "home")
    summary, rows = run_answer_eval(options, Console(stderr=True, quiet=True))
    write_run(tmp_path / "out", summary, rows)
    all_ = summary["scores"]["all"]
    ours, top1 = all_["rag"], all_["top1_copy"]
    assert ours["questions"] == 50
    # The extractive answer declines a question whose sentences do not name what it asks about:
    # 1 of these 50 (0.992 over the odd-numbered 250, all answerable).
    assert ours["citation_valid"] == 1.0 and ours["abstention_accuracy"] >= 0.96
    # 0.723 on these 50 (0.827 on all 500): answers that draw on a third page for a part of the
    # question or a subject the others leave out pay some precision for recall and answers.
    assert ours["citation_precision"] >= 0.7
    assert ours["citation_recall"] >= 0.54 and ours["citation_recall"] >= 1.3 * top1["citation_recall"]
    assert ours["answer_contains"] >= 0.36 and ours["answer_contains"] > top1["answer_contains"]
    assert ours["retrieval_recall@10"] >= 0.78
    assert all_["always_abstain"]["citation_recall"] == 0.0
    assert not any(d.regression for d in compare_runs(summary, summary))
    assert {p.name for p in (tmp_path / "out").iterdir()} == {
        "summary.json", "questions.jsonl", "report.md", "report.html"
    }
