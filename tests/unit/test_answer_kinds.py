"""What counts as holding the answer a question asks for (rag/synthesize/extractive/kinds.py): a
number as a reader reads one, not the question's own words again, a number of what the question
counts; and the fact check that declines on them (steps.check_fact). The real sentence reader, no
model."""

from __future__ import annotations

import pytest

from rag.retrieve.text import stems
from rag.synthesize import declines
from rag.synthesize.extractive import Candidate, Draft
from rag.synthesize.extractive.features import kind_features
from rag.synthesize.extractive.kinds import KINDS, SHARE, MONEY, asks_for, counted, counts, holds, is_howto
from rag.synthesize.extractive.question import Question
from rag.synthesize.extractive.steps import Env, check_fact

NUMBER = next(k for k in KINDS if k.name == "number")
TIME = next(k for k in KINDS if k.name == "time")


@pytest.mark.parametrize("text", ["You can receive a maximum of 80 hours.", "Up to 2.1% of basic pay.",
                                  "It costs $3,000 with travel.", "Select by November 15th.", "Check it once a week."])
def test_a_number_a_reader_reads_is_held(text: str) -> None:
    assert holds(NUMBER, text)


@pytest.mark.parametrize("text", ["See google.com/file/d/13H21w1_D5V4/view?usp=sharing for the form.",
                                  "Once you've submitted the form, you get an email.", "Set the v2 flag."])
def test_the_digits_of_a_link_or_once_as_when_are_no_number(text: str) -> None:
    assert not holds(NUMBER, text)


def test_the_questions_own_words_again_hold_no_time() -> None:
    asked = stems("By when each week do I need to have my hours submitted?")
    assert not holds(TIME, "Make sure to track your hours each week.", asked)
    assert holds(TIME, "Submit your timecard by the end of the day on Friday.", asked)


def test_a_number_is_never_only_an_echo() -> None:
    asked = stems("How long must I stay at my grade before a job one grade higher?")
    assert holds(NUMBER, "Employees must be at their current level for one year.", asked)


@pytest.mark.parametrize("question, unit", [
    ("Is there a ceiling on how many of those hours I can get in a year?", "hour"),
    ("How many PIV card readers should I have?", "reader"),
    ("What's the maximum number of member packages a workspace can have?", "packag"),
    ("What is the default timeout, in seconds?", "second"),
    ("What percentage of each paycheck is withheld?", SHARE),
    ("What is the maximum monthly amount the subsidy will cover?", MONEY),
    ("How much does it cost?", MONEY),
    ("How much of my sick time can I use?", None),  # "time" names no unit
    ("How long does a review take?", None),
])
def test_what_a_number_question_counts(question: str, unit: str | None) -> None:
    assert counted(question) == unit


def test_a_number_of_the_unit_counted() -> None:
    assert counts("You can receive a maximum of 80 hours of award leave.", "hour")
    assert counts("Everyone should have two readers.", "reader")
    assert counts("Begin at least two weeks before your last day.", "dai")  # a time answers for a time
    assert not counts("Make a selection no later than November 15th.", "hour")
    assert counts("Employees contribute 0.8% of pay.", SHARE) and not counts("Employees contribute.", SHARE)
    assert counts("The subsidy covers up to $325 a month.", MONEY)
    # Not strict (the fact check): a number with no word of its own may be of the unit; one of
    # another unit is not.
    assert counts("As of the 2010 census, the county population was 9,984.", "inhabit", strict=False)
    assert not counts("As of the 2010 census, the county population was 9,984.", "inhabit")
    assert not counts("The client retries 3 times.", "second", strict=False)
    # A date says when, never how many.
    assert not counts("We are piloting this approach through March 31, 2022.", "option", strict=False)
    assert not counts("The pilot ends on 31 March 2022.", "option", strict=False)
    assert counts("The pilot ends in March with 31 options left.", "option")


def test_a_number_of_something_else_earns_no_type_bonus() -> None:
    question = "Is there a ceiling on how many of those hours I can get in a year?"
    date = Candidate(1, "Make a selection no later than November 15th.")
    hours = Candidate(1, "You can receive a maximum of 80 hours of award leave in a single fiscal year.")
    features = [kind_features(c, asks_for(question), stems(question), 0.5, unit=counted(question))["type"]
                for c in (date, hours)]
    assert features[0] == 0 < features[1]


def test_a_question_of_how_something_works_is_no_how_to() -> None:
    assert not is_howto("How are search results ranked?")
    assert not is_howto("How does the resolver pick versions?")
    assert is_howto("How do I install it?") and is_howto("How can I pin a version?")


def _checked(text: str, sentences: list[str], weights: dict[str, float] | None = None) -> Draft:
    from rag.synthesize.extractive.question import question_parts

    q = Question(text, weights=weights or {s: 1.0 for s in stems(text)}, asks=asks_for(text), unit=counted(text),
                 parts=question_parts(text))
    draft = Draft(q, [])
    draft.chosen = [Candidate(1, s) for s in sentences]
    return check_fact(draft, Env(embedder=None, settings=None))  # type: ignore[arg-type]


def test_a_number_of_another_unit_states_no_fact() -> None:
    asked = "How many seconds does the client wait for a slow index before it times out?"
    assert _checked(asked, ["The client retries a slow index 3 times before it gives up."]).declined \
        == declines.FACT_NOT_STATED
    assert _checked(asked, ["The client waits 30 seconds for a slow index before it times out."]).declined is None


def test_the_fact_is_weighed_against_the_sentence_that_asks_it() -> None:
    # The asker's context ("accepted a job somewhere else") is not what the answer must hold.
    text = "I've accepted a job with another agency far from here. How far ahead of my last day should I start?"
    assert _checked(text, ["Begin this process at least two weeks before your last day of work."]).declined is None
