"""Which documents an extractive answer draws on, read from their titles and text.

One notion runs through it: *the question names a page by its title* (`names_page`): the page's
title, without a trailing qualifier ("Kiss and Tell (1945 film)" is named "Kiss and Tell"), stands
in the question as whole words. A page the question names is what it asks about; a page the first
page names is where the question leads (`leads_to`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Sequence

from rag.retrieve.text import WORD, stems
from rag.retrieve.types import Hit
from rag.synthesize.extractive.features import held_share
from rag.synthesize.extractive.tuning import TUNING, Tuning

if TYPE_CHECKING:
    from rag.synthesize.extractive.draft import Candidate

QUALIFIER = re.compile(r"\s*\([^()]*\)\s*$")  # "Kiss and Tell (1945 film)" is named "Kiss and Tell"


def words_of(text: str) -> str:
    """Lower-case words between single spaces, padded, so that `f" {name} " in` matches whole words."""
    return " " + " ".join(WORD.findall(text.lower())) + " "


def title_words(hit: Hit) -> str:
    """The words of the page's title without its qualifier: its name."""
    return words_of(QUALIFIER.sub("", hit.title)).strip()


def prose(hit: Hit) -> str:
    """The excerpt's words without its heading lines (a heading repeats the document's own name)."""
    return words_of("\n".join(line for line in hit.text.splitlines() if not line.lstrip().startswith("#")))


def says_name(name: str, words: str) -> bool:
    """Do the padded `words` hold the name (a page's `title_words`) as whole words?"""
    return bool(name) and f" {name} " in words


def names_page(hit: Hit, words: str) -> bool:
    """Do the padded `words` (of a question, or an answer sentence) name this page by its title?"""
    return says_name(title_words(hit), words)


def leads_to(first: Hit, other: Hit, question_words: str) -> bool:
    """Does `first` (the best sentence's excerpt) lead to `other`'s document?

    A question that names two things (a comparison) is answered by the documents named after
    them; a question about something the first document only mentions (a bridge: "the woman who
    played X") is answered by the document named after what it mentions. A document that the
    question names and the first one mentions as well is rather another page about the question's
    own subject, and one that names the first document back is rather a page that refers to it.
    Among the top 8 excerpts of the HotpotQA dev questions, a document linked the first way is gold
    91% of the time, the second way 72%, and in the two cases left out under 30%.
    """
    if names_page(other, question_words):
        return not names_page(other, prose(first))
    return names_page(other, prose(first)) and not names_page(first, prose(other))


def named_only(chosen: list[Candidate], hits: Sequence[Hit], question_words: str) -> list[Candidate]:
    """Where the answer quotes two or more pages the question names by their titles ("Which band,
    Letters to Cleo or Screaming Trees, had more members?"), only those: what the question compares
    is on them, and another page ("Screaming Trees discography", a page that merely scores well) is
    beside the point."""
    named = {c.document for c in chosen if names_page(hits[c.excerpt - 1], question_words)}
    if len(named) < 2:
        return chosen
    return [c for c in chosen if c.document in named]


def second_document(question: str, hits: Sequence[Hit], ranked: Sequence[Candidate],
                    tuning: Tuning = TUNING) -> str | None:
    """The node id of the document the best sentence's document leads to (the first such in the
    order of the candidates' scores), else of the next document if its best sentence is a near
    tie (within `near_tie`, either way); None when there is neither."""
    if not ranked:
        return None
    first = hits[ranked[0].excerpt - 1]
    question_words = words_of(question)
    others = [c for c in ranked if c.document != first.node_id]
    for c in others:
        if leads_to(first, hits[c.excerpt - 1], question_words):
            return c.document
    tie = tuning.near_tie
    if others and tie * ranked[0].score <= others[0].score <= ranked[0].score / tie:
        return others[0].document  # (higher only where `by_holding_documents` put a document first)
    return None


def by_holding_documents(ranked: list[Candidate], hits: Sequence[Hit], weights: dict[str, float],
                         tuning: Tuning = TUNING) -> list[Candidate]:
    """The candidates, those of the retriever's first document first, when that document's
    excerpts hold the most of the question's words (weighed by rarity) and the best sentence's
    document holds far less (under `weak_document` of it). Both the retriever and the question's
    words then point at one page, and the best sentence only sounds alike: "I accidentally pushed
    an API key to a public GitHub repo. How quickly do I have to report it?" is about leaked
    secrets ("accidentally", "push", "API", "repo"), not the page on signing keys ("public key",
    "GitHub"). The other documents stay: a page the first one leads to may hold few of the
    question's words (on HotpotQA, leaving them out lost "Juliet" beside "Romeo")."""
    if not ranked or not weights or not hits:
        return ranked
    texts: dict[str, list[str]] = {}
    for hit in hits:
        texts.setdefault(hit.node_id, [hit.title]).append(hit.text)
    held = {document: held_share(weights, stems(" ".join(parts))) for document, parts in texts.items()}
    first = hits[0].node_id
    if held[first] < max(held.values()) or held.get(ranked[0].document, 0.0) >= tuning.weak_document * held[first]:
        return ranked
    return sorted(ranked, key=lambda c: c.document != first)  # stable: by score within


def said(c: Candidate, hits: Sequence[Hit]) -> str:
    """What a sentence says with what it stands under: its document's title and its heading."""
    return f"{hits[c.excerpt - 1].title} {c.context} {c.text} {c.attachment}"


def says_any_of(weights: dict[str, float], chosen: Sequence[Candidate], hits: Sequence[Hit], question: str) -> bool:
    """Do the answer's sentences themselves (not only their headings and titles) hold a word of the
    question? "How big is the cash bonus if someone I refer gets hired?" answered with "Details
    last up to 120 days …" (a page on details, under a heading on hiring) holds none: it is about
    something else, however its page is titled. The title of a page the question names counts as
    said ("Which actor does American Beauty ...?": "It stars Kevin Spacey" on the page "American
    Beauty (1999 film)")."""
    if not weights:
        return True
    question_words = words_of(question)
    texts = []
    for c in chosen:
        hit = hits[c.excerpt - 1]
        texts.append(f"{hit.title} {c.text} {c.attachment}" if names_page(hit, question_words) else f"{c.text} {c.attachment}")
    return held_share(weights, stems(" ".join(texts))) > 0


def names_a_subject_page(question: str, terms: Sequence, chosen: Sequence[Candidate], hits: Sequence[Hit]) -> bool:
    """Does the question name, by its whole title, a page the answer quotes, a title holding one
    of its subject terms ("Were Scott Derrickson and Ed Wood of the same nationality?", answered
    from the page "Ed Wood")? The knowledge base then has a page on what the question asks about."""
    question_words = words_of(question)
    for c in chosen:
        hit = hits[c.excerpt - 1]
        title = stems(QUALIFIER.sub("", hit.title))
        if names_page(hit, question_words) and any(t.stems <= title for t in terms):
            return True
    return False
