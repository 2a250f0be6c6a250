"""The citation contract on its own: forms, validation, renumbering, sources, streaming."""

from __future__ import annotations

import pytest

from rag.render import answer_text
from rag.retrieve.types import Hit
from rag.synthesize.citations import CitationStream, apply_citations, cited_numbers
from rag.synthesize.types import Answer


def hit(chunk_id: int, doc: str, score: float = 0.03) -> Hit:
    return Hit(
        chunk_id=chunk_id, score=score, retrievers=["vector"], node_id=doc, kb_id="kb", source_id=f"fs:w:kb:{doc}.md",
        title=doc.title(), source=f"fs:{doc}.md", version=1, heading_path=[doc.title()], text=f"text {chunk_id}",
        char_start=10 * chunk_id, char_end=10 * chunk_id + 9,
    )


# Excerpts 1..5: documents a, b, a, c, d (excerpts 1 and 3 are two chunks of one document).
EXCERPTS = [hit(1, "a", 0.030), hit(2, "b"), hit(3, "a", 0.032), hit(4, "c"), hit(5, "d")]


@pytest.mark.parametrize(
    ("raw", "expected", "docs"),
    [
        ("Leave is 4 hours [2].", "Leave is 4 hours [1].", ["b"]),
        ("One [2][4]. Two [4].", "One [1][2]. Two [2].", ["b", "c"]),
        ("One [2, 4].", "One [1][2].", ["b", "c"]),
        ("One [4-5] then [2].", "One [1][2] then [3].", ["c", "d", "b"]),
        ("Range with a dash [4–5].", "Range with a dash [1][2].", ["c", "d"]),
        ("Spaces [ 2 , 4 ] inside.", "Spaces [1][2] inside.", ["b", "c"]),
        ("Adjacent with space [2] [4].", "Adjacent with space [1][2].", ["b", "c"]),
    ],
)
def test_every_citation_form_is_read_and_renumbered(raw, expected, docs):
    text, sources = apply_citations(raw, EXCERPTS)
    assert text == expected
    assert [s.first.node_id for s in sources] == docs
    assert [s.number for s in sources] == list(range(1, len(docs) + 1))


def test_unknown_numbers_are_dropped_with_their_space():
    text, sources = apply_citations("Fact one [9]. Fact two [0][2]. Fact three [7, 8]. Zero [6-7].", EXCERPTS)
    assert text == "Fact one. Fact two [1]. Fact three. Zero."
    assert [s.first.node_id for s in sources] == ["b"]


def test_repeated_numbers_and_excerpts_of_one_document_share_a_source():
    text, sources = apply_citations("A [3]. B [1]. C [3][1]. D [5]. E [1, 3, 3].", EXCERPTS)
    assert text == "A [1]. B [1]. C [1]. D [2]. E [1]."
    first, second = sources
    assert first.first.node_id == "a" and second.first.node_id == "d"
    # Both cited chunks of document a, in order of first citation, each once.
    assert [h.chunk_id for h in first.hits] == [3, 1]
    assert first.score == pytest.approx(0.032)  # a document's score is its best cited excerpt's


def test_first_citation_in_the_text_is_number_one():
    text, sources = apply_citations("Later doc first [5]. Then [1]. Then [2].", EXCERPTS)
    assert text == "Later doc first [1]. Then [2]. Then [3]."
    assert [s.title for s in sources] == ["D", "A", "B"]


def test_an_answer_that_cites_nothing_has_no_sources():
    text, sources = apply_citations("The excerpts do not say.", EXCERPTS)
    assert (text, sources) == ("The excerpts do not say.", [])
    assert answer_text(Answer(text, sources)) == "The excerpts do not say."


def test_text_that_only_looks_like_a_citation_is_left_alone():
    raw = "See [the guide](https://example.org) and [Note] and a[b] and [1 2] and 3 [x]."
    text, sources = apply_citations(raw, EXCERPTS)
    assert text == raw and sources == []


def test_huge_ranges_and_numbers_cite_nothing():
    text, sources = apply_citations("A [1-100000]. B [99999999999999999999].", EXCERPTS)
    assert text == "A. B." and sources == []
    assert cited_numbers("1-2-3") == []


def test_text_block_lists_sources_in_citation_order():
    text, sources = apply_citations("X [4]. Y [2].", EXCERPTS)
    rendered = answer_text(Answer(text, sources))
    assert rendered == (
        "X [1]. Y [2].\n\nSources:\n[1] C (fs:w:kb:c.md, score 0.0300)\n[2] B (fs:w:kb:b.md, score 0.0300)"
    )


ANSWER = "  [9] Annual leave starts at 4 hours [3][1] per pay period [2, 9].\nSick leave [4-5] too [7]. [1]  \n"


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 1000])
def test_streamed_and_whole_answers_are_identical_at_any_split(size):
    whole, whole_sources = apply_citations(ANSWER, EXCERPTS)
    stream = CitationStream(EXCERPTS)
    parts = [stream.feed(ANSWER[i:i + size]) for i in range(0, len(ANSWER), size)]
    parts.append(stream.finish())
    assert "".join(parts) == whole
    assert [(s.number, [h.chunk_id for h in s.hits]) for s in stream.sources] == [
        (s.number, [h.chunk_id for h in s.hits]) for s in whole_sources
    ]
    assert whole == "Annual leave starts at 4 hours [1] per pay period [2].\nSick leave [3][4] too. [1]"


def test_streaming_holds_back_only_an_open_citation():
    stream = CitationStream(EXCERPTS)
    assert stream.feed("Leave is 4 hours [") == "Leave is 4 hours"
    assert stream.feed("2") == ""
    assert stream.feed("] per pay") == " [1] per pay"
    assert stream.finish() == ""
