"""Which second document an extractive answer may cite, and which sentence answers each part of a
question (rag/synthesize/extractive.py), by hand."""

from __future__ import annotations

import numpy as np

from rag.retrieve.types import Hit
from rag.synthesize.extractive import Candidate, _with_parts, _words, leads_to, second_document


def hit(node: str, title: str, text: str) -> Hit:
    body = f"# {title}\n\n{text}"
    return Hit(0, 0.0, ["text"], node, "kb", f"corpus:w:kb:{node}", title, None, 1, [title], body, 0, len(body))


FILM = hit("film", "Kiss and Tell (1945 film)", "A comedy film starring Shirley Temple as Corliss Archer.")
ACTRESS = hit("actress", "Shirley Temple", "An actress who later served as Chief of Protocol.")
RADIO = hit("radio", "Meet Corliss Archer", "A radio show; its film adaptation was Kiss and Tell (1945 film).")


def test_a_bridge_leads_from_the_first_document_to_what_it_mentions() -> None:
    question = _words("What position was held by the woman who played Corliss Archer in Kiss and Tell?")
    assert leads_to(FILM, ACTRESS, question)  # named in the film's text, not in the question
    assert not leads_to(FILM, RADIO, question)  # neither named in the question nor in the film's text


def test_a_comparison_leads_to_the_other_document_the_question_names() -> None:
    question = _words("Were Shirley Temple and the star of Kiss and Tell the same person?")
    assert leads_to(FILM, ACTRESS, question) is False  # named by the question and by the film: same subject
    assert leads_to(ACTRESS, FILM, _words("Was Kiss and Tell made before Shirley Temple retired?"))


def test_a_page_that_names_the_first_one_back_is_not_a_link() -> None:
    radio_first = hit("radio", "Meet Corliss Archer", "A radio show starring Janet Waldo.")
    waldo = hit("waldo", "Janet Waldo", "Janet Waldo played the lead in Meet Corliss Archer.")
    assert not leads_to(radio_first, waldo, _words("Who starred in the radio show?"))


def test_second_document_prefers_a_link_then_a_near_tie() -> None:
    hits = [FILM, RADIO, ACTRESS]
    ranked = [Candidate(1, "s", "film", score=1.0), Candidate(2, "s", "radio", score=0.97),
              Candidate(3, "s", "actress", score=0.5)]
    question = "What position was held by the woman who played Corliss Archer in Kiss and Tell?"
    assert second_document(question, hits, ranked) == "actress"  # linked, though it scores lowest
    unlinked = [FILM, RADIO, hit("tea", "Tea", "A drink.")]
    ranked[2] = Candidate(3, "s", "tea", score=0.5)
    assert second_document("What is this film about?", unlinked, ranked) == "radio"  # 0.97 of the best: a near tie
    ranked[1].score = 0.9
    assert second_document("What is this film about?", unlinked, ranked) is None
    assert second_document("anything", hits, []) is None


def _sentence(n: int, text: str) -> Candidate:
    vector = np.zeros(8)
    vector[n] = 1.0  # every sentence says something different
    return Candidate(n, text, f"doc{n}", vector=vector)


def test_each_part_of_a_question_gets_its_best_sentence() -> None:
    first, second, third, other_part = (_sentence(i, f"sentence number {w}") for i, w in
                                        enumerate(["one", "two", "three", "four"]))
    # The first part is answered by the best sentence; the second part's best is not chosen yet.
    parts = [(first, {id(first)}), (other_part, {id(other_part)})]
    assert _with_parts([first, second], parts, limit=4) == [first, second, other_part]
    # At the limit, the last chosen sentence that answers no part gives way; the best always stays.
    assert _with_parts([first, second, third], parts, limit=3) == [first, second, other_part]
    # A part a chosen sentence answers about as well adds nothing.
    parts = [(first, {id(first)}), (other_part, {id(other_part), id(second)})]
    assert _with_parts([first, second], parts, limit=4) == [first, second]
