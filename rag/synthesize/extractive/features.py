"""A sentence's features, computed once, and the score they make: how much of the question the
sentence holds, how close it is in meaning, where the retriever ranked its excerpt, and what kind
of sentence it is (kinds.py holds the English cue patterns).

The answer to a how-to question names a mechanism (a command, flag, setting or file, often in
code); the answer to a "how many" or "when" question holds a number or a date; a sentence that
points elsewhere ("see below") or introduces a page answers nothing by itself, and one that adds
almost nothing to the question's own words restates it. Every bonus grows with how much of the
question the sentence holds (`relevant`): code or a number about something else says nothing.

The score is one weighted sum of declared features, `SCORE_WEIGHTS · features`: the meaning
(cosine similarity, weight 1: the scale the others are read in), the share of the question's
words held (`lexical`), the retriever's order (`rank_prior`) and the kind features below. Their
weights are fitted by `python -m evals.fit_answers` (tuning.py, fitted.json).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rag.retrieve.text import STOPWORDS, WORD, porter_stem
from rag.synthesize.extractive.kinds import (ACTION, CODE, FAILURE, FIX, INTRO, KINDS, NEGATION, NUMBER_TOKEN, POINTER,
                                            STEP, holds)
from rag.synthesize.extractive.tuning import TUNING, Tuning

if TYPE_CHECKING:
    from rag.synthesize.extractive.draft import Candidate

# Each kind feature and the tuning number that weighs it (a penalty weighs minus it).
KIND_WEIGHTS: dict[str, tuple[str, float]] = {
    "code": ("code_bonus", 1.0),  # names a mechanism (times relevant)
    "howto_code": ("howto_bonus", 1.0),  # ... and the question asks how (times relevant)
    "howto_action": ("action_bonus", 1.0),  # an action verb in a how-to answer (times relevant)
    "type": ("type_bonus", 1.0),  # holds the kind of answer a fact question asks for (times relevant)
    "lead": ("type_bonus", 1.0),  # holds the span of time ahead a lead question asks for (times relevant)
    "pointer": ("pointer_penalty", -1.0),
    "intro": ("intro_penalty", -1.0),
    "step": ("step_penalty", -1.0),
    "restates": ("restates_penalty", -1.0),
    "fixes": ("fix_bonus", 1.0),  # gives a step, where the question describes a failure (times relevant)
}
# The whole score: meaning, the words held and the retriever's order, then the kinds.
SCORE_WEIGHTS: dict[str, tuple[str | None, float]] = {
    "similarity": (None, 1.0),
    "held": ("lexical", 1.0),
    "rank": ("rank_prior", 1.0),
    **KIND_WEIGHTS,
}


def held_share(weights: dict[str, float], text_stems: set[str]) -> float:
    """The share of the question's word weight whose stems the text holds."""
    total = sum(weights.values())
    return sum(w for stem, w in weights.items() if stem in text_stems) / total if total else 0.0


_ORDINALS = frozenset("first second third fourth fifth sixth seventh eighth ninth tenth".split())


def _names_or_numbers(text: str) -> set[str]:
    """The stems of the words a reader takes for a name or a number: capitalised after a sentence's
    first word ("the Marvel Comics character"), digits, number words and ordinals."""
    found = set()
    end = None  # where the word before ends
    for match in WORD.finditer(text):
        word, lower = match.group(0), match.group(0).lower()
        starts = end is None or text[end:match.start()].rstrip().endswith((".", "!", "?", ":"))
        if (word[0].isupper() and not starts) or NUMBER_TOKEN.fullmatch(lower) or lower in _ORDINALS:
            found.add(porter_stem(lower))
        end = match.end()
    return found


def restates(text: str, question_stems: set[str], tuning: Tuning = TUNING) -> bool:
    """Most of the sentence's words are the question's, and it adds at most a few of its own, none
    of them a name or a number: "The song is based on the Marvel Comics character" adds the one
    thing asked, as a bridge sentence does. A sentence that denies something ("Term renewals are not
    automatic") answers a yes/no question."""
    if NEGATION.search(text):
        return False
    content = {porter_stem(w) for w in WORD.findall(text.lower()) if w not in STOPWORDS}
    new_words = content - question_stems
    if len(new_words) > tuning.restates_new_words or len(content & question_stems) < tuning.restates_share * len(content):
        return False
    return not new_words & _names_or_numbers(text)  # short: it is mostly the question's words


def says_how(c: Candidate) -> bool:
    """The sentence names a mechanism: code, a flag, a setting or a file, or it introduces code."""
    return bool(CODE.search(c.text)) or c.attachment.startswith("```")


def kind_features(c: Candidate, asks: set[str], question_stems: set[str], held: float,
                  tuning: Tuning = TUNING, problem: bool = False, unit: str | None = None) -> dict[str, float]:
    """The sentence's kind features (the names of `KIND_WEIGHTS`), 0 where absent; `unit` is what a
    "how many" question counts (kinds.counted)."""
    relevant = min(1.0, tuning.relevant_scale * held)
    howto = "howto" in asks
    has_code = says_how(c)
    asked = [kind for kind in KINDS if kind.name in asks and kind.holds is not None]
    has_type = any(holds(kind, c.text, question_stems, unit) for kind in asked if kind.feature == "type")
    has_lead = any(holds(kind, c.text, question_stems) for kind in asked if kind.feature == "lead")
    # "Wednesday" after the question's own words is the answer, not a restatement.
    restated = not (c.attachment or has_code or has_type) and restates(c.text, question_stems, tuning)
    return {
        "code": relevant if has_code else 0.0,
        "howto_code": relevant if has_code and howto else 0.0,
        "howto_action": relevant if howto and ACTION.search(c.text) else 0.0,
        "type": relevant if has_type else 0.0,
        "lead": relevant if has_lead else 0.0,
        "pointer": 1.0 if POINTER.search(c.text) else 0.0,
        "intro": 1.0 if INTRO.search(c.text) else 0.0,
        "step": 1.0 if STEP.search(c.text) else 0.0,
        "restates": 1.0 if restated else 0.0,
        "fixes": relevant if problem and (FIX.search(c.text) or has_code) and not FAILURE.search(c.text) else 0.0,
    }


def weigh(features: dict[str, float], tuning: Tuning = TUNING) -> float:
    """Kind features weighed by `KIND_WEIGHTS`: what they add to a sentence's score."""
    return sum(sign * getattr(tuning, name) * features[feature]
               for feature, (name, sign) in KIND_WEIGHTS.items() if features.get(feature))


def sentence_score(features: dict[str, float], tuning: Tuning = TUNING) -> float:
    """The sentence score: every declared feature times its weight (`SCORE_WEIGHTS`)."""
    return sum(sign * (getattr(tuning, name) if name else 1.0) * features[feature]
               for feature, (name, sign) in SCORE_WEIGHTS.items() if features.get(feature))


def holds_asked(c: Candidate, asks: set[str], question_stems: set[str] | frozenset[str] = frozenset(),
                unit: str | None = None, strict: bool = False) -> bool | None:
    """Does the sentence (or what it introduces) state what the question asks for, more than the
    question's own words, and a number that may be of the `unit` it counts (`kinds.holds`; one of
    it, `strict`), where the question asks for a kind an answer must state (`Kind.required`)? None when
    it asks for none."""
    required = [kind for kind in KINDS if kind.name in asks and kind.required and kind.holds is not None]
    if not required:
        return None
    code = c.attachment.startswith("```")
    return any(holds(kind, f"{c.text} {c.attachment}" if kind.in_code or not code else c.text, question_stems, unit,
                     strict)
               for kind in required)


def kind_score(c: Candidate, asks: set[str], question_stems: set[str], held: float, tuning: Tuning = TUNING) -> float:
    """What the sentence's kind adds to its score."""
    return weigh(kind_features(c, asks, question_stems, held, tuning), tuning)
