"""`rag eval run` and `rag eval compare` end to end on a small dataset written by the test: the real
pipeline (SQLite, embedded Chroma, the local model), and the model path with litellm's mock."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from evals.answer_metrics import METRICS

CORPUS = {
    "p1": ("Shirley Temple", "Shirley Temple Black was an American actress and diplomat. As an adult she held the "
           "government position of Chief of Protocol of the United States."),
    "p2": ("Kiss and Tell (1945 film)", "Kiss and Tell is a 1945 American comedy film starring then 17-year-old "
           "Shirley Temple as Corliss Archer."),
    "p3": ("Meet Corliss Archer", "Meet Corliss Archer was a radio program that ran from 1943 to 1956 on CBS."),
    "p4": ("Janet Waldo", "Janet Waldo was an American voice actress who played Corliss Archer on the radio."),
    "p5": ("Paris", "Paris is the capital city of France, with about two million inhabitants."),
    "p6": ("Lyon", "Lyon is the third-largest city of France and is famous for its cuisine."),
    "p7": ("Espresso", "Espresso is coffee brewed by forcing hot water through finely ground beans."),
    "p8": ("Tea", "Tea is a drink made by pouring hot water over cured leaves of the tea plant."),
}
QUESTIONS = [
    ("q1", "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?",
     ["Chief of Protocol"], ["p1", "p2"]),
    ("q2", "Are Paris and Lyon both cities in France?", ["yes"], ["p5", "p6"]),
    ("q3", "How is espresso coffee brewed?", ["by forcing hot water through finely ground beans"], ["p7"]),
    ("q4", "What is the orbital period of the planet Neptune in Earth years?", [], []),
]


def write_dataset(root: Path) -> Path:
    root.mkdir(parents=True)
    with (root / "corpus.jsonl").open("w") as f:
        for doc_id, (title, text) in CORPUS.items():
            f.write(json.dumps({"_id": doc_id, "title": title, "text": text}) + "\n")
    with (root / "questions.jsonl").open("w") as f:
        for qid, question, answers, gold in QUESTIONS:
            f.write(json.dumps({"_id": qid, "question": question, "answers": answers, "gold_passage_ids": gold}) + "\n")
    return root


def rag(*args: str, env: dict[str, str] | None = None, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rag.cli", *args], capture_output=True, text=True, timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def test_eval_run_scores_ours_and_both_baselines_then_compare_finds_a_regression(tmp_path: Path):
    dataset, out = write_dataset(tmp_path / "tiny"), tmp_path / "run"
    # The abstention threshold is tuned on the handbook and moves; this test is about citations, so
    # it keeps the actress's page (similarity 0.32 to the question) above it. Neptune's best is 0.10.
    env = {"RAG_HOME": str(tmp_path / "unused-home"), "RAG_ANSWER__MIN_SIMILARITY": "0.2"}
    result = rag("eval", "run", "--dataset", str(dataset), "--synthesizer", "extractive", "--out", str(out),
                 "--json", env=env)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary == json.loads((out / "summary.json").read_text())
    assert summary["synthesizer"] == "extractive" and summary["corpus_records"] == 8
    scores = summary["scores"]
    for system in ("rag", "top1_copy", "always_abstain"):
        assert list(scores["all"][system]) == list(METRICS) and scores["all"][system]["questions"] == 4
    assert scores["yes_no"]["rag"]["questions"] == 1 and scores["other"]["rag"]["questions"] == 3
    ours, abstain = scores["all"]["rag"], scores["all"]["always_abstain"]
    assert ours["citation_valid"] == 1.0 and scores["all"]["top1_copy"]["citation_valid"] == 1.0
    assert ours["abstention_accuracy"] == 1.0  # q4 (Neptune) is refused, the others answered
    assert abstain["abstention_accuracy"] == 0.25 and abstain["citation_recall"] == 0.0
    assert abstain["citation_valid"] is None  # it cites nothing
    assert ours["latency_p50_ms"] > 0 and scores["all"]["top1_copy"]["latency_p50_ms"] is None

    rows = {row["id"]: row for row in map(json.loads, (out / "questions.jsonl").read_text().splitlines())}
    assert set(rows) == {"q1", "q2", "q3", "q4"}
    # The bridge question: the film's page leads to the actress's page, which holds the answer.
    assert sorted(rows["q1"]["cited"]) == ["p1", "p2"] and rows["q1"]["scores"]["answer_contains"] == 1.0
    assert sorted(rows["q2"]["cited"]) == ["p5", "p6"]  # the two places the question names
    assert rows["q4"]["refused"] and rows["q4"]["cited"] == [] and rows["q4"]["gold"] == []
    assert "top-1 copy" in (out / "report.md").read_text()
    page = (out / "report.html").read_text()
    assert page.count("<svg") == 2 and "always abstain" in page
    assert not (tmp_path / "unused-home").exists()  # an eval never writes into the user's store

    same = rag("eval", "compare", str(out), str(out))
    assert same.returncode == 0, same.stderr
    worse = tmp_path / "worse"
    shutil.copytree(out, worse)
    summary["scores"]["all"]["rag"]["citation_recall"] -= 0.1
    (worse / "summary.json").write_text(json.dumps(summary))
    regressed = rag("eval", "compare", str(out), str(worse))
    assert regressed.returncode == 1 and "REGRESSION" in regressed.stdout
    assert "1 regression(s) beyond the tolerance" in regressed.stderr
    assert rag("eval", "compare", str(out), str(worse), "--tolerance", "0.2").returncode == 0
    missing = rag("eval", "compare", str(out), str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "summary.json: missing" in missing.stderr and "Traceback" not in missing.stderr


def test_model_answers_and_citation_support_through_litellm_mock(tmp_path: Path):
    """The model answers and judges through litellm, whose mock replies "Yes [1]." to every call: each
    answer is one sentence citing the first excerpt, and the judge says yes to it."""
    dataset, out = write_dataset(tmp_path / "tiny"), tmp_path / "run"
    result = rag(
        "eval", "run", "--dataset", str(dataset), "--synthesizer", "openai/gpt-4o-mini", "--unanswerable", "0.34",
        "--seed", "5", "--out", str(out), "--json",
        env={"RAG_LLM__MOCK_RESPONSE": "Yes [1].", "RAG_HOME": str(tmp_path / "unused")},
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["synthesizer"] == "llm:openai/gpt-4o-mini"
    # One of the three answerable questions (seed 5: q3) loses its gold passage p7.
    assert summary["unanswerable"] | {"ids": None} == {
        "fraction": 0.34, "seed": 5, "questions": 1, "removed_records": 1, "ids": None,
    }
    assert summary["unanswerable"]["ids"] == ["q3"] and summary["corpus_records"] == 7
    rows = [json.loads(line) for line in (out / "questions.jsonl").read_text().splitlines()]
    judged = [row for row in rows if not row["refused"]]
    assert judged and all(row["support"] == {"support_recall": 1.0, "support_precision": 1.0, "sentences": 1}
                          for row in judged)
    support = summary["citation_support"]
    assert support == {"judge": "openai/gpt-4o-mini", "answers_judged": len(judged),
                       "support_recall": 1.0, "support_precision": 1.0}
    assert summary["scores"]["yes_no"]["rag"]["answer_contains"] == 1.0  # "Yes" is the yes/no answer


def test_eval_run_refuses_a_directory_without_questions(tmp_path: Path):
    (tmp_path / "corpus.jsonl").write_text("")
    result = rag("eval", "run", "--dataset", str(tmp_path), "--json", timeout=300)
    assert result.returncode == 2
    assert "questions.jsonl: missing" in result.stderr and "Traceback" not in result.stderr
