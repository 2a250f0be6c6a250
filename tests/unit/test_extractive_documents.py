"""Which document an extractive answer starts on (rag/synthesize/extractive/documents.py,
`by_holding_documents`): the handbook's question about a leaked API key was answered from the page
on signing keys, whose sentences sound alike ("public key", "GitHub"), while the retriever's first
excerpt, the page on sensitive information, holds most of what the question asks about."""

from __future__ import annotations

import numpy as np

from rag.retrieve.types import Hit
from rag.synthesize.extractive import Candidate
from rag.synthesize.extractive.documents import by_holding_documents, says_any_of, second_document
from rag.synthesize.extractive.question import question_weights

# The question's word weights (idf) in the handbook's knowledge base, as `question_weights` gives them there.
WEIGHTS = {"accident": 7.4, "push": 6.3, "api": 5.74, "kei": 4.48, "public": 3.3, "github": 3.59, "repo": 4.86,
           "quickli": 4.37, "report": 3.87}

QUESTION = "I accidentally pushed an API key to a public GitHub repo. How quickly do I have to report it, and to whom?"
SENSITIVE = """\
- [Install Caulking](https://github.com/cloud-gov/caulking). It's easy to accidentally push secrets to GitHub.
  Caulking checks for many common types of API tokens and other sensitive information before you commit.
  (This repo assumes MacOS with Homebrew installed.)
- **Do not store sensitive information in GitHub**, including environment variables, private configuration
  data, or sensitive information about the public (including but not limited to PII). In the event that such variables or configuration data is
  pushed to a GitHub repository accidentally, even momentarily, consider it compromised and revoke or change
  the credentials immediately.
"""
SIGNING = """\
## Add your key to GitHub

In order to verify your signed commits, you must associate the public key with your GitHub account.
Go to your GitHub SSH and GPG keys settings page.
"""


def hit(node: str, title: str, text: str) -> Hit:
    return Hit(0, 0.0, ["text"], node, "kb", f"corpus:w:kb:{node}", title, None, 1, [title], text, 0, len(text))


def candidate(excerpt: int, document: str, text: str, score: float) -> Candidate:
    return Candidate(excerpt, text, document, score=score, vector=np.ones(4) / 2)


def ranked() -> list[Candidate]:
    return [
        candidate(2, "signing", "In order to verify your signed commits, you must associate the public key with your GitHub account.", 0.74),
        candidate(2, "signing", "Go to your GitHub SSH and GPG keys settings page.", 0.66),
        candidate(1, "sensitive", "It's easy to accidentally push secrets to GitHub.", 0.62),
        candidate(1, "sensitive", "In the event that such variables or configuration data is pushed to a GitHub "
                                  "repository accidentally, consider it compromised.", 0.57),
    ]


def texts(found: list[Candidate]) -> list[str]:
    return [c.text for c in found]


def test_the_retrievers_first_page_holding_the_question_comes_first() -> None:
    hits = [hit("sensitive", "Sensitive information", SENSITIVE), hit("signing", "Git commit signing", SIGNING)]
    ordered = by_holding_documents(ranked(), hits, WEIGHTS)
    assert [c.document for c in ordered] == ["sensitive", "sensitive", "signing", "signing"]
    assert ordered[0].text.startswith("It's easy")  # by score within the page


def test_the_page_put_after_is_no_near_tie_of_the_first() -> None:
    # Its best sentence scores far above the first page's (0.74 against 0.62): not a second page of
    # the answer. One scoring within 5% either way is.
    hits = [hit("sensitive", "Sensitive information", SENSITIVE), hit("signing", "Git commit signing", SIGNING)]
    ordered = by_holding_documents(ranked(), hits, WEIGHTS)
    assert second_document(QUESTION, hits, ordered) is None
    for c in ordered:
        if c.document == "signing":
            c.score -= 0.14  # 0.60 and 0.52
    assert second_document(QUESTION, hits, ordered) == "signing"


def test_the_best_sentences_page_stays_first_where_the_retriever_ranks_it_first() -> None:
    hits = [hit("signing", "Git commit signing", SIGNING), hit("sensitive", "Sensitive information", SENSITIVE)]
    assert texts(by_holding_documents(ranked(), hits, WEIGHTS)) == texts(ranked())


def test_the_best_sentences_page_stays_first_where_it_holds_the_question_too() -> None:
    question = "How do I add my public key to GitHub to verify signed commits?"
    hits = [hit("sensitive", "Sensitive information", SENSITIVE), hit("signing", "Git commit signing", SIGNING)]
    assert texts(by_holding_documents(ranked(), hits, question_weights(question, None))) == texts(ranked())


# ------------------------------------------------------------------------------------- says_any_of

DETAILS = """\
## Details

Details last up to 120 days and can be extended up to another 120 days (not to exceed 240 days total).
The employee is detailed at the same (or lower) GS level.
"""


def test_an_answer_whose_sentences_hold_no_word_of_the_question_says_nothing_of_it() -> None:
    question = "How big is the cash bonus if someone I refer gets hired?"
    hits = [hit("details", "Hiring and details", DETAILS)]
    chosen = [candidate(1, "details", line, 0.5) for line in DETAILS.splitlines()[2:]]
    for c in chosen:
        c.context = "Details"
    assert not says_any_of(question_weights(question, None), chosen, hits, question)
    asked = "How long can a detail last?"
    assert says_any_of(question_weights(asked, None), chosen, hits, asked)


def test_the_title_of_a_page_the_question_names_counts_as_said() -> None:
    question = "Which actor does American Beauty and American Beauty have in common?"
    text = "It stars Kevin Spacey and Annette Bening."
    hits = [hit("film", "American Beauty (1999 film)", text)]
    chosen = [candidate(1, "film", text, 0.5)]
    assert says_any_of(question_weights(question, None), chosen, hits, question)
    hits = [hit("film", "Films of 1999", text)]
    assert not says_any_of(question_weights(question, None), chosen, hits, question)
