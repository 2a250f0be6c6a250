"""`rag eval run` on a pages-plus-questions dataset (evals/pages.py, evals/page_metrics.py,
evals/page_answers.py): the metric definitions on hand-made rows, then the command end to end on a
slice of uv_docs (12 questions of every kind, the 12 pages they need and 5 distractors: about 100 KB,
a few seconds of embedding on 2 cores, nothing once the shared cache holds them), with litellm's mock
standing in for a model that declines and for one that answers, and on an office_docs-style folder.

Only shape, definitions and a weak sanity bound are asserted, never quality: the synthesizer is being
rewritten, and `rag eval run` reports how good it is.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from evals.answer_metrics import strip_citations
from evals.answer_report import pages_markdown, pages_table_rows
from evals.compare import compare_runs
from evals.page_metrics import PAGE_METRICS, aggregate, groups, key_hit, key_in, score_question
from evals.pages import (
    ALL, ANY, SUBSTRING, WORD, PageQuestion, is_pages_layout, load_pages, page_id, question_from_record, split_of,
)
from rag.synthesize.types import ABSTENTION

from ..support.evals import rag_eval, read_rows, run_json
from ..support.paths import SHARED

UV_DOCS = SHARED / "datasets" / "uv_docs"
# A spread of kinds and both splits: odd ids are the calibration split, even ids the held-out one.
SLICE = {
    "howto": ["uv009", "uv011", "uv023", "uv025", "uv030", "uv033"],
    "fact": ["uv040", "uv044"],
    "multi": ["uv047", "uv049"],
    "near_topic": ["uv057", "uv058"],
}
DISTRACTORS = ["guides/tools.md", "reference/storage.md", "getting-started/features.md",
               "guides/integration/fastapi.md", "reference/policies/python.md"]
MOCK_MODEL = "openai/gpt-4o-mini"

# ----- the metric definitions, by hand -----


def q(kind: str = "howto", gold: tuple[str, ...] = ("a.md",), keys: tuple[str, ...] = ("uv export",),
      rule: str = SUBSTRING) -> PageQuestion:
    return PageQuestion("uv001", "?", kind, gold, None, keys, rule, ALL if kind == "multi" else ANY)


def test_answer_keys_match_case_insensitively_as_substrings_or_as_whole_words() -> None:
    assert key_in("UV EXPORT", "Run `uv export --format requirements-txt`.", SUBSTRING)
    assert key_in("export", "it exported the lockfile", SUBSTRING)  # uv_docs: anywhere
    assert not key_in("export", "it exported the lockfile", WORD)  # office_docs: never inside a longer word
    assert key_in("73", "affects 73 airplanes of U.S. registry", WORD)
    assert not key_in("73", "the Boeing 737 MAX", WORD) and key_in("73", "the Boeing 737 MAX", SUBSTRING)
    assert not key_in("8", "SP 800-63B", WORD) and key_in("8", "at least 8 characters.", WORD)
    assert key_in("$3,400", "costs $3,400 per product", WORD) and key_in("All Factors", "of ALL FACTORS.", WORD)
    assert not key_in("", "anything", SUBSTRING)
    # Citation markers are not part of the answer: "[73]" cites source 73, it does not say 73.
    assert key_hit("Use MACOS 13 or later [1].", ["macOS 13"], WORD)
    assert not key_hit("The count is given in [73].", ["73"], WORD)
    assert not key_hit("nothing here", [], SUBSTRING)


def test_scores_of_one_question_by_hand() -> None:
    # howto / fact: any gold page is enough, for retrieval and for citation.
    s = score_question(q(gold=("a.md", "b.md")), "Run UV EXPORT [1].", ["b.md"], ["x.md", "b.md"], False)
    assert s == {"retrieval@5": 1.0, "gold_found@5": None, "gold_cited": 1.0, "text_found": None, "page_cited": None, "key_hit": 1.0,
                 "wrongly_declined": 0.0, "declined": None}
    # multi: both gold pages are needed; the fraction found is reported beside.
    s = score_question(q("multi", ("a.md", "b.md")), "no key here [1]", ["a.md"], ["a.md", "x.md"], False)
    assert s["retrieval@5"] == 0.0 and s["gold_found@5"] == 0.5 and s["gold_cited"] == 0.0 and s["key_hit"] == 0.0
    s = score_question(q("multi", ("a.md", "b.md")), "x", ["b.md", "a.md"], ["b.md", "a.md"], False)
    assert (s["retrieval@5"], s["gold_found@5"], s["gold_cited"]) == (1.0, 1.0, 1.0)
    # An answerable question declined: wrongly declined, nothing cited, no key.
    s = score_question(q(), ABSTENTION, [], ["a.md"], True)
    assert (s["wrongly_declined"], s["gold_cited"], s["key_hit"], s["retrieval@5"]) == (1.0, 0.0, 0.0, 1.0)
    # near_topic (no answer keys): only "declined" is defined.
    near = q("near_topic", (), ())
    assert score_question(near, ABSTENTION, [], ["a.md"], True) == {
        "retrieval@5": None, "gold_found@5": None, "gold_cited": None, "text_found": None, "page_cited": None, "key_hit": None,
        "wrongly_declined": None, "declined": 1.0}
    assert score_question(near, "Use tox [1].", ["a.md"], ["a.md"], False)["declined"] == 0.0


def _row(question: PageQuestion, split: str, answer: str, cited: list[str], top: list[str], declined: bool,
         latency: float) -> dict:
    return {"kind": question.kind, "split": split, "answerable": question.answerable, "latency_ms": latency,
            "scores": score_question(question, answer, cited, top, declined)}


def test_means_by_kind_and_split_leave_out_what_is_not_defined() -> None:
    rows = [
        _row(q(), "odd", "uv export [1]", ["a.md"], ["a.md"], False, 10.0),
        _row(q(), "even", ABSTENTION, [], ["z.md"], True, 20.0),
        _row(q("multi", ("a.md", "b.md")), "odd", "x [1]", ["a.md"], ["a.md"], False, 30.0),
        _row(q("near_topic", (), ()), "even", ABSTENTION, [], ["a.md"], True, 40.0),
        _row(q("near_topic", (), ()), "odd", "y [1]", ["a.md"], ["a.md"], False, 50.0),
    ]
    by = groups(rows)
    assert list(by) == ["howto", "multi", "near_topic", "all", "odd", "even"]
    assert all(list(figures) == list(PAGE_METRICS) for figures in by.values())
    assert by["howto"] | {"latency_p50_ms": None, "latency_p95_ms": None} == {
        "questions": 2, "answerable": 2, "retrieval@5": 0.5, "gold_found@5": None, "gold_cited": 0.5,
        "text_found": None, "page_cited": None, "key_hit": 0.5, "wrongly_declined": 0.5, "declined": None, "latency_p50_ms": None, "latency_p95_ms": None}
    assert by["multi"]["gold_found@5"] == 0.5 and by["near_topic"]["declined"] == 0.5
    everything = by["all"]
    assert everything["questions"] == 5 and everything["answerable"] == 3
    assert everything["retrieval@5"] == pytest.approx(1 / 3, abs=1e-4) and everything["declined"] == 0.5
    assert everything["wrongly_declined"] == pytest.approx(1 / 3, abs=1e-4)
    assert everything["latency_p50_ms"] == 30.0 and everything["latency_p95_ms"] == 48.0
    assert by["odd"]["questions"] == 3 and by["even"]["declined"] == 1.0
    assert "odd" not in groups(rows, split="odd")  # a run of one split is not broken down by split
    assert aggregate([])["questions"] == 0 and aggregate([])["retrieval@5"] is None


def test_both_question_formats_normalise_to_one(tmp_path: Path) -> None:
    uv = question_from_record({"_id": "uv046", "question": "Q?", "kind": "multi", "gold_pages": ["a.md", "b/c.md"],
                               "answer_keys": ["exclude-newer"], "support": "s1 || s2"})
    assert uv == PageQuestion("uv046", "Q?", "multi", ("a.md", "b/c.md"), None, ("exclude-newer",), SUBSTRING, ALL,
                              "s1 || s2")
    od = question_from_record({"_id": "od007", "question": "Q?", "file": "pdf/fr.pdf", "page": 5,
                               "answer_keys": ["73"], "support": "73 airplanes"})
    assert (od.kind, od.gold_pages, od.gold_page_number, od.key_rule, od.gold_rule, od.answerable) == (
        "pdf", ("pdf/fr.pdf",), 5, WORD, ANY, True)
    bad = question_from_record({"_id": "od015", "question": "Q?", "file": "pdf/bad.pdf", "page": None,
                                "answer_keys": [], "support": ""})
    none = question_from_record({"_id": "od028", "question": "Q?", "file": None, "page": None,
                                 "answer_keys": [], "support": ""})
    assert (bad.kind, bad.answerable, none.kind, none.gold_pages) == ("bad_file", False, "no_answer", ())
    with pytest.raises(ValueError, match="neither"):
        question_from_record({"_id": "x1", "question": "Q?", "answers": ["a"]})

    assert (split_of("uv001"), split_of("uv010"), split_of("od030")) == ("odd", "even", "even")
    with pytest.raises(ValueError, match="does not end with a number"):
        split_of("5a8b57f2x")
    assert page_id("fs:default:uv_docs:concepts/projects/sync.md") == "concepts/projects/sync.md"

    root = tmp_path / "mini"
    (root / "files").mkdir(parents=True)
    assert not is_pages_layout(root)  # no questions.jsonl
    lines = [{"_id": f"od{n:03d}", "question": f"Q{n}?", "file": None, "page": None, "answer_keys": [],
              "support": ""} for n in range(1, 8)]
    (root / "questions.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert is_pages_layout(root)
    assert [x.id for x in load_pages(root, "even").questions] == ["od002", "od004", "od006"]
    dataset = load_pages(root, "odd", limit=2)
    assert [x.id for x in dataset.questions] == ["od001", "od003"] and dataset.total_questions == 7
    assert dataset.root == (root / "files").resolve() and dataset.name == "mini"


def test_a_questions_file_of_its_own_and_its_behaviours(tmp_path: Path) -> None:
    # `--questions FILE`: any folder is a pages dataset (its pages/ or files/, else itself), and a
    # record's `behaviour` gives a group of its own beside the kinds.
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nuv export writes requirements.\n")
    questions = tmp_path / "dev.jsonl"
    records = [
        {"_id": "pd-001", "question": "Q1?", "kind": "howto", "behaviour": "paraphrase", "gold_pages": ["a.md"],
         "answer_keys": ["uv export"], "support": "uv export writes requirements."},
        {"_id": "pd-002", "question": "Q2?", "kind": "near_topic", "behaviour": "fact_absent", "gold_pages": [],
         "answer_keys": [], "support": ""},
    ]
    questions.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert not is_pages_layout(docs)
    dataset = load_pages(docs, questions_file=questions)
    assert dataset.root == docs.resolve() and dataset.questions_file == questions.resolve()
    assert [(x.id, x.behaviour) for x in dataset.questions] == [("pd-001", "paraphrase"), ("pd-002", "fact_absent")]
    with pytest.raises(FileNotFoundError, match="no such questions file"):
        load_pages(docs, questions_file=tmp_path / "missing.jsonl")
    rows = [{**_row(x, "odd", "uv export [1]", ["a.md"], ["a.md"], False, 10.0), "behaviour": x.behaviour}
            for x in dataset.questions]
    assert list(groups(rows)) == ["howto", "near_topic", "paraphrase", "fact_absent", "all", "odd"]
    assert groups(rows)["fact_absent"]["declined"] == 0.0 and groups(rows)["paraphrase"]["key_hit"] == 1.0


def test_compare_judges_a_pages_run_by_kind_and_wrongly_declined_by_its_growth() -> None:
    figures = {"questions": 10, "answerable": 10, "retrieval@5": 0.9, "gold_found@5": None, "gold_cited": 0.8,
               "key_hit": 0.5, "wrongly_declined": 0.1, "declined": None, "latency_p50_ms": 100.0,
               "latency_p95_ms": 200.0}
    a = {"layout": "pages", "scores": {"howto": {"rag": figures}, "all": {"rag": figures}}}
    b = {"layout": "pages", "scores": {"howto": {"rag": figures | {"wrongly_declined": 0.3}},
                                       "all": {"rag": figures | {"key_hit": 0.4}}}}
    found = {(d.group, d.metric) for d in compare_runs(a, b) if d.regression}
    assert found == {("howto", "wrongly_declined"), ("all", "key_hit")}
    assert not any(d.regression for d in compare_runs(b, a))  # fewer wrong refusals is no regression
    assert {d.metric for d in compare_runs(a, a)} == set(PAGE_METRICS)


# ----- the command, end to end -----


def uv_slice(root: Path) -> Path:
    """A uv_docs-layout folder: the slice's questions, their gold pages and the distractors."""
    if not (UV_DOCS / "questions.jsonl").is_file():
        if os.environ.get("CI"):
            raise AssertionError(f"{UV_DOCS} is missing")
        pytest.skip(f"{UV_DOCS} is missing")
    wanted = {qid for ids in SLICE.values() for qid in ids}
    questions = [json.loads(line) for line in (UV_DOCS / "questions.jsonl").read_text().splitlines() if line.strip()]
    chosen = [x for x in questions if x["_id"] in wanted]
    assert len(chosen) == len(wanted)
    pages = {p for x in chosen for p in x["gold_pages"]} | set(DISTRACTORS)
    for page in pages:
        (root / "pages" / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(UV_DOCS / "pages" / page, root / "pages" / page)
    (root / "questions.jsonl").write_text("".join(json.dumps(x) + "\n" for x in chosen))
    return root


@dataclass(frozen=True)
class UvRun:
    dataset: Path
    home: Path  # kept: later runs find the slice ingested (a sync that changes nothing)
    out: Path
    summary: dict
    rows: dict[str, dict]


@pytest.fixture(scope="module")
def uv_run(tmp_path_factory: pytest.TempPathFactory) -> UvRun:
    """The slice through the real pipeline (extractive synthesizer), once for the module."""
    base = tmp_path_factory.mktemp("uv-pages")
    dataset, home, out = uv_slice(base / "uv_slice"), base / "home", base / "run"
    summary = run_json("--dataset", str(dataset), "--synthesizer", "extractive", "--judge", "none",
                       "--home", str(home), "--out", str(out))
    return UvRun(dataset, home, out, summary, read_rows(out))


def test_the_slice_end_to_end_reports_every_kind_and_split_with_consistent_scores(uv_run: UvRun) -> None:
    dataset, summary, rows, out = uv_run.dataset, uv_run.summary, uv_run.rows, uv_run.out
    assert summary == json.loads((out / "summary.json").read_text())
    assert (summary["layout"], summary["split"], summary["synthesizer"]) == ("pages", "all", "extractive")
    assert summary["questions"] == summary["dataset_questions"] == 12
    pages = sorted(p.relative_to(dataset / "pages").as_posix() for p in (dataset / "pages").rglob("*.md"))
    ingest = summary["ingest"]
    assert summary["corpus_records"] == ingest["pages"] == len(pages) == 17
    assert ingest["skipped"] == [] and ingest["failed"] == [] and ingest["questions_missing_gold_pages"] == []
    assert ingest["chunks"] > 0 and summary["seconds"]["ingest"] > 0

    scores = summary["scores"]
    assert list(scores) == ["howto", "fact", "multi", "near_topic", "all", "odd", "even"]
    assert all(list(systems) == ["rag"] and list(systems["rag"]) == list(PAGE_METRICS) for systems in scores.values())
    counts = {group: (s["rag"]["questions"], s["rag"]["answerable"]) for group, s in scores.items()}
    assert counts == {"howto": (6, 6), "fact": (2, 2), "multi": (2, 2), "near_topic": (2, 0), "all": (12, 10),
                      "odd": (8, 7), "even": (4, 3)}
    assert scores["near_topic"]["rag"]["retrieval@5"] is None and scores["howto"]["rag"]["declined"] is None
    assert scores["multi"]["rag"]["gold_found@5"] is not None and scores["howto"]["rag"]["gold_found@5"] is None
    assert scores["all"]["rag"]["retrieval@5"] > 0  # the weak sanity bound: search finds gold pages at all
    assert 0 < scores["all"]["rag"]["latency_p50_ms"] <= scores["all"]["rag"]["latency_p95_ms"]

    # Every row: the fields the issue asks for, page ids as paths in pages/, scores that follow from them.
    questions = {x.id: x for x in load_pages(dataset).questions}
    assert set(rows) == set(questions)
    for qid, row in rows.items():
        question = questions[qid]
        assert row["kind"] == question.kind and row["split"] == split_of(qid)
        assert set(row["cited_pages"]) <= set(pages) and set(row["top5_pages"]) <= set(pages)
        assert 1 <= len(row["top5_pages"]) <= 5
        assert row["declined"] == (row["answer"] == ABSTENTION or not row["cited_pages"])
        # uv_docs' support strings are copied from its pages: each is in its page's stored text (checked
        # for a question with one gold page).
        assert row["scores"]["text_found"] in ((1.0,) if question.support and len(question.gold_pages) == 1 else (None,))
        assert row["scores"] == score_question(question, row["answer"], row["cited_pages"], row["top5_pages"],
                                               row["declined"], found_text=row["scores"]["text_found"] == 1.0
                                               if row["scores"]["text_found"] is not None else None)
        text = strip_citations(row["answer"]).lower()
        assert row["key_hit"] == (any(k.lower() in text for k in question.answer_keys) if question.answerable else None)
        assert row["latency_ms"] > 0
    for group, systems in scores.items():
        chosen = [r for r in rows.values() if group in ("all", r["kind"], r["split"])]
        assert systems["rag"] == aggregate(chosen)

    report = (out / "report.md").read_text()
    header, table = pages_table_rows(summary)
    assert "| " + " | ".join(header) + " |" in report and len(table) == len(PAGE_METRICS)
    assert report == pages_markdown(summary)


def test_a_model_that_declines_is_declined_everywhere_and_search_is_unchanged(uv_run: UvRun) -> None:
    """litellm's mock answers every question with the abstention sentence: every near-topic question
    counts as declined, every answerable one as wrongly declined; the even split only."""
    out = uv_run.home.parent / "declines"
    summary = run_json("--dataset", str(uv_run.dataset), "--synthesizer", MOCK_MODEL, "--judge", "none", "--split", "even",
                       "--home", str(uv_run.home), "--out", str(out), env={"RAG_LLM__MOCK_RESPONSE": ABSTENTION})
    assert summary["synthesizer"] == f"llm:{MOCK_MODEL}" and summary["split"] == "even"
    rows = read_rows(out)
    assert sorted(rows) == ["uv030", "uv040", "uv044", "uv058"]
    assert list(summary["scores"]) == ["howto", "fact", "near_topic", "all"]  # one split: no split breakdown
    everything = summary["scores"]["all"]["rag"]
    assert (everything["declined"], everything["wrongly_declined"]) == (1.0, 1.0)
    assert (everything["gold_cited"], everything["key_hit"]) == (0.0, 0.0)
    assert summary["scores"]["near_topic"]["rag"]["declined"] == 1.0
    for qid, row in rows.items():
        assert row["declined"] and row["cited_pages"] == [] and row["answer"] == ABSTENTION
        assert row["top5_pages"] == uv_run.rows[qid]["top5_pages"]  # the synthesizer does not change search


def test_keys_are_matched_case_insensitively_in_a_model_answer_and_limit_counts_within_the_split(
    uv_run: UvRun,
) -> None:
    out = uv_run.home.parent / "answers"
    mock = "Set UV_ENV_FILE to load it; MACOS 13 is the oldest supported [1]."
    summary = run_json("--dataset", str(uv_run.dataset), "--synthesizer", MOCK_MODEL, "--judge", "none",
                       "--split", "even", "--limit", "3", "--home", str(uv_run.home), "--out", str(out), env={"RAG_LLM__MOCK_RESPONSE": mock})
    rows = read_rows(out)
    assert sorted(rows) == ["uv030", "uv040", "uv044"] and summary["questions"] == 3
    assert rows["uv030"]["key_hit"] and rows["uv040"]["key_hit"] and not rows["uv044"]["key_hit"]
    for row in rows.values():
        assert not row["declined"] and len(row["cited_pages"]) == 1
        assert row["scores"]["gold_cited"] == float(row["cited_pages"][0] in row["gold_pages"])
    assert summary["scores"]["all"]["rag"]["key_hit"] == pytest.approx(2 / 3, abs=1e-4)


def test_an_office_style_folder_matches_whole_words_and_names_what_it_could_not_ingest(tmp_path: Path) -> None:
    """files/ instead of pages/, `file` and `page` instead of gold_pages, whole-word keys: "73" is not
    in "737". A damaged PDF fails to ingest (with its reason); its question is listed as missing its page."""
    root = tmp_path / "office_mini"
    (root / "files" / "notes").mkdir(parents=True)
    (root / "files" / "pdf").mkdir()
    (root / "files" / "notes" / "fleet.md").write_text(
        "# Proposed airworthiness directive\n\nThe FAA estimates that this proposed AD affects 73 airplanes of "
        "U.S. registry. The Boeing 737 MAX fleet was grounded in March 2019.\n")
    (root / "files" / "pdf" / "scan.pdf").write_bytes(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\n")
    questions = [
        {"_id": "od001", "question": "How many airplanes of U.S. registry does the proposed directive affect?",
         "file": "notes/fleet.md", "page": None, "answer_keys": ["73"], "support": "affects 73 airplanes"},
        {"_id": "od002", "question": "What does the scanned report say about the 737 MAX?", "file": "pdf/scan.pdf",
         "page": 2, "answer_keys": ["grounded"], "support": "grounded"},
        {"_id": "od003", "question": "What was the total of firearm background checks in December 2015?",
         "file": None, "page": None, "answer_keys": [], "support": ""},
    ]
    (root / "questions.jsonl").write_text("".join(json.dumps(x) + "\n" for x in questions))
    out = tmp_path / "run"
    summary = run_json("--dataset", str(root), "--synthesizer", MOCK_MODEL, "--judge", "none", "--home",
                       str(tmp_path / "home"), "--out", str(out),
                       env={"RAG_LLM__MOCK_RESPONSE": "The directive covers the 737 fleet [1]."})
    ingest = summary["ingest"]
    assert ingest["folder"] == "files" and ingest["pages"] == 1
    assert ingest["skipped"] == []
    assert ingest["failed"] == [{"path": "pdf/scan.pdf", "error": "a damaged or truncated PDF that cannot be opened"}]
    assert ingest["questions_missing_gold_pages"] == ["od002"]
    assert list(summary["scores"]) == ["md", "pdf", "no_answer", "all", "odd", "even"]
    rows = read_rows(out)
    od001 = rows["od001"]
    assert od001["key_rule"] == "word" and od001["cited_pages"] == ["notes/fleet.md"]
    assert od001["key_hit"] is False and key_in("73", od001["answer"], SUBSTRING)  # 737 holds 73, not the word 73
    assert od001["scores"]["gold_cited"] == 1.0 and od001["scores"]["retrieval@5"] == 1.0
    assert rows["od002"]["gold_page_number"] == 2 and rows["od002"]["scores"]["retrieval@5"] == 0.0
    assert rows["od003"]["answerable"] is False
    assert rows["od003"]["scores"]["declined"] == float(rows["od003"]["declined"])


def test_options_of_one_layout_are_refused_on_the_other(tmp_path: Path) -> None:
    pages = tmp_path / "pages_layout"
    (pages / "pages").mkdir(parents=True)
    (pages / "questions.jsonl").write_text("")
    refused = rag_eval("--dataset", str(pages), "--unanswerable", "0.2")
    assert refused.exit_code == 2 and "--unanswerable applies to the HotpotQA layout" in refused.stderr
    hotpot = tmp_path / "hotpot_layout"
    hotpot.mkdir()
    (hotpot / "corpus.jsonl").write_text("")
    (hotpot / "questions.jsonl").write_text("")
    refused = rag_eval("--dataset", str(hotpot), "--split", "odd")
    assert refused.exit_code == 2 and "--split applies to a pages layout" in refused.stderr
    assert rag_eval("--dataset", str(pages), "--split", "third").exit_code == 2
