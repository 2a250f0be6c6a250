"""Every reason an answer declines, by name.

A declined answer gives the one sentence `types.ABSTENTION` and cites nothing; `Answer.declined`
names why, and the JSON and structured outputs, the eval report and the editor show that name. The
relevance check (relevance.py) runs in front of both synthesizers: with nothing relevant retrieved,
the answer declines as `OFF_TOPIC` and no model is called.
"""

from __future__ import annotations

OFF_TOPIC = "off_topic"
NO_SENTENCES = "no_sentences"
NO_SENTENCE_ANSWERS = "no_sentence_answers"
SUBJECT_NOT_COVERED = "subject_not_covered"
OTHER_PERIOD = "other_period"
FACT_NOT_STATED = "fact_not_stated"
MODEL_DECLINED = "model_declined"

REASONS: dict[str, str] = {
    OFF_TOPIC: "nothing retrieved is about the question (no excerpt is similar enough or holds enough of its words)",
    NO_SENTENCES: "the relevant excerpts hold no sentence to quote",
    NO_SENTENCE_ANSWERS: "the best sentences hold none of the question's words (only their headings or titles do)",
    SUBJECT_NOT_COVERED: "the best sentences do not name what the question is about (its names, identifiers, rare words)",
    OTHER_PERIOD: "the best sentences are about another month than the one asked about",
    FACT_NOT_STATED: "the best sentences are on the topic but state no value of the kind asked for (a number, a date, a setting)",
    MODEL_DECLINED: "the model found no answer in the excerpts",
}


def describe(reason: str | None) -> str:
    """The reason in words, for a person reading an answer; empty when it did not decline."""
    return REASONS.get(reason or "", "")
