"""The extractive answer as named steps (rag/synthesize/extractive/): every step is recorded, a
decline is named on the answer and stops the steps, the question's vocabulary is read once, every
number lives in `Tuning` with the evaluation that set it, and the synthesizer declares what the
publisher embeds. Real store, real embedding model, no LLM."""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path

import pytest

from rag.service import KnowledgeService, Principal
from rag.settings import Settings
from rag.synthesize import declines
from rag.synthesize.extractive import TUNING, ExtractiveSynthesizer, Tuning
from rag.synthesize.extractive.question import Question
from rag.synthesize.extractive.steps import STEPS

PAGES = {
    "sync.md": "# Locking and syncing\n\nTo disable automatic locking, use the `--locked` option:\n\n"
               "```console\n$ uv run --locked ...\n```\n\nIf the lockfile is not up-to-date, uv will raise an error "
               "instead of updating the lockfile.\n",
    "cache.md": "# Caching\n\nuv keeps a cache of downloaded wheels so that installs are fast. The cache directory "
                "can be moved with the `UV_CACHE_DIR` environment variable.\n",
    "python.md": "# Python versions\n\nA project's Python version is pinned with `uv python pin`, which writes a "
                 "`.python-version` file next to the project.\n",
}


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("steps")
    pages = root / "pages"
    pages.mkdir()
    for name, text in PAGES.items():
        (pages / name).write_text(text)
    with KnowledgeService(Settings(home=root / "home")) as service:
        service.ensure_workspace("default")
        service.ingest_directory(Principal.local_admin("default"), pages)
        yield service


def draft(svc: KnowledgeService, question: str):
    synthesizer = svc.engines.synthesizer
    query = svc.engines.retriever.query(question)
    hits = svc.engines.retriever.retrieve(query, svc.scope(Principal.local_admin("default")), 8)
    return synthesizer, query, hits, synthesizer.draft(query, hits)


def test_every_step_is_recorded_in_order_on_an_answer(svc) -> None:
    _, _, _, found = draft(svc, "How do I move the cache directory somewhere else?")
    assert found.declined is None and found.chosen
    assert [r.step for r in found.trace] == [step.__name__ for step in STEPS]
    added = [text for record in found.trace for text in record.added]
    assert {c.text for c in found.chosen} <= set(added)  # each chosen sentence: a step says it added it
    assert any("UV_CACHE_DIR" in c.text for c in found.chosen)
    answer = svc.ask(Principal.local_admin("default"), "How do I move the cache directory somewhere else?")
    assert not answer.abstained and answer.declined is None


def test_a_subject_the_answer_does_not_name_declines_by_name(svc) -> None:
    synthesizer, query, hits, found = draft(svc, "How do I migrate my Pipenv project to uv?")
    assert hits, "the relevance check let it through: the extractive steps decide"
    assert found.declined == declines.SUBJECT_NOT_COVERED and not found.chosen
    assert found.trace[-1].step == "check_subject" and found.trace[-1].declined == declines.SUBJECT_NOT_COVERED
    answer = synthesizer.answer(query, hits)
    assert answer.abstained and answer.declined == declines.SUBJECT_NOT_COVERED and answer.sources == []


def test_nothing_relevant_is_off_topic_before_any_synthesizer(svc) -> None:
    answer = svc.ask(Principal.local_admin("default"), "What is the capital of Mongolia?")
    assert answer.abstained and answer.declined == declines.OFF_TOPIC
    assert declines.describe(answer.declined)


def test_a_tuning_variant_changes_the_decline(svc) -> None:
    synthesizer, query, hits, _ = draft(svc, "How do I migrate my Pipenv project to uv?")
    lenient = ExtractiveSynthesizer(synthesizer.embedder, synthesizer.settings, synthesizer.doc_freq,
                                    replace(TUNING, min_subject_coverage=0.0))
    assert lenient.draft(query, hits).declined is None  # the same question, the threshold off


def test_the_question_reads_the_vocabulary_once(svc) -> None:
    calls = []

    def counting(words):
        calls.append(list(words))
        return svc.engines.retriever.doc_freq(words)

    q = Question.analyse("Can I run pytest-cov on Heroku with uv's cache?", counting)
    assert len(calls) == 1
    assert {"heroku", "pytest", "cov"} <= set(calls[0])
    assert q.weights and {t.text for t in q.terms} >= {"pytest-cov"}


def test_every_number_says_what_set_it() -> None:
    provenance = Tuning.provenance()
    assert set(provenance) == {f.name for f in fields(Tuning)}
    assert all(note.strip() for note in provenance.values())
    assert all(isinstance(getattr(TUNING, name), (int, float)) for name in provenance)


def test_the_synthesizer_declares_what_is_embedded_at_publish(tmp_path: Path) -> None:
    text = PAGES["cache.md"]
    indexed = "Docs > Caching\n\n" + text  # the chunk as the lanes see it: its heading path first
    spans = ExtractiveSynthesizer.publish_sentences(indexed, text, ["Docs", "Caching"])
    assert spans and all(s.key.startswith("Caching: ") for s in spans)
    for span in spans:  # each found where the chunk says it: its heading, then its own words
        assert span.ranges, span.key
        (h0, h1), (s0, s1) = span.ranges
        assert indexed[h0:h1] == "Caching" and h1 <= s0
        said = span.key.removeprefix("Caching: ")
        assert indexed[s0:s1].split()[0] == said.split()[0] and indexed[s0:s1].rstrip(".").split()[-1] == said.rstrip(".").split()[-1]
    with KnowledgeService(Settings(home=tmp_path / "a")) as extractive:
        assert extractive.publisher.sentences is ExtractiveSynthesizer.publish_sentences
    with KnowledgeService(Settings(home=tmp_path / "b", llm_model="openai/never-called")) as model:
        assert model.publisher.sentences is None  # a model's answer embeds nothing ahead


def test_sentences_are_found_in_any_script_and_beside_tables() -> None:
    """Letters whose lower case is longer ("İ"), Markdown marks the reader drops and a table row
    (written under its header: embedded alone) do not mislead where a sentence lies."""
    text = ("# İstanbul office\n\nThe **İstanbul** office opens at [nine](https://example.org) every weekday. "
            "Visitors sign in at the front desk on the ground floor.\n\n"
            "| Day | Hours |\n| --- | --- |\n| Saturday | closed all day long |\n")
    spans = ExtractiveSynthesizer.publish_sentences(text, text, ["İstanbul office"])
    located = {s.key.split(": ", 1)[1]: s.ranges for s in spans}
    opens = next(r for k, r in located.items() if k.startswith("The İstanbul office"))
    assert text[opens[-1][0]:opens[-1][1]].startswith("The **İstanbul** office opens")
    assert text[opens[-1][0]:opens[-1][1]].endswith("every weekday")
    desk = next(r for k, r in located.items() if k.startswith("Visitors"))
    assert text[desk[-1][0]:desk[-1][1]] == "Visitors sign in at the front desk on the ground floor"
    assert all(not r for k, r in located.items() if "Saturday" in k)
