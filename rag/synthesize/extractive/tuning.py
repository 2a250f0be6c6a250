"""Every number of the extractive answer, in one place, each with the evaluation that set it.

What an operator would change (how many sentences an answer has, how many are embedded per question,
when the relevance check abstains) stays in `AnswerSettings`; everything else is here. A number is
read as `tuning.<name>` by the step that uses it, and `Tuning(**changes)` (or `dataclasses.replace`)
gives a variant for a sweep.

Two layers. `HAND` holds the values as first set by hand or by a sweep, each with the evaluation
that set it. `fitted.json` beside this file holds what `python -m evals.fit_answers --write` fitted
on the development splits (the sentence score's weights and the decline thresholds named in
`FITTED` there), with the command, the data, the date and the figures; `TUNING`, what every answer
uses, is `HAND` with those values laid over it. A number the fit moved says so in `provenance()`.

"Dev questions" below means the development split: the handbook fixture
(evals/fixtures/handbook_questions.yaml) and the odd-numbered uv_docs questions; "HotpotQA" the
odd-numbered questions of hotpotqa_dev500. A number marked *hand-set* was chosen once by reading
those answers and never swept.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

FITTED_FILE = Path(__file__).with_name("fitted.json")


def _n(value: Any, set_by: str) -> Any:
    return field(default=value, metadata={"set_by": set_by})


@dataclass(frozen=True)
class Tuning:
    # --- the sentence score: meaning + LEXICAL * held + the kind bonuses + the retriever's order
    lexical: float = _n(0.25, "hand-set with the first sentence scorer (commit 5bfd926)")
    rank_prior: float = _n(0.05, "hand-set: the retriever's order breaks near-ties only")
    prior_held: float = _n(0.5, "hand-set: the cheap score that picks which sentences to embed")
    prior_excerpt: float = _n(0.5, "hand-set: as prior_held")
    min_words: int = _n(5, "hand-set: a sentence of fewer words is a fragment (heading, label)")
    min_words_fallback: int = _n(2, "hand-set: excerpts of short lines only take what there is")
    # --- what kind of sentence it is (features.py; each bonus times min(1, relevant_scale * held))
    relevant_scale: float = _n(2.0, "hand-set: a sentence holding half the question's weight earns the whole bonus")
    step_penalty: float = _n(0.1, "dev questions: 0.1 and 0.15 tie")
    type_bonus: float = _n(0.08, "hand-set (commit 5bfd926)")
    code_bonus: float = _n(0.06, "hand-set (commit 5bfd926)")
    howto_bonus: float = _n(0.08, "hand-set (commit 5bfd926)")
    action_bonus: float = _n(0.03, "hand-set")
    pointer_penalty: float = _n(0.25, "hand-set (commit 86c5bba: pointers; handbook fact 0.750 -> 0.775 with the step rule)")
    intro_penalty: float = _n(0.1, "hand-set")
    restates_penalty: float = _n(0.15, "hand-set")
    fix_bonus: float = _n(0.05, "hand-set with issue 30: a step, for a question that describes a failure")
    restates_new_words: int = _n(3, "hand-set: a sentence adding at most this many words to the question's ...")
    restates_share: float = _n(0.6, "hand-set: ... while this share of its words are the question's restates it")
    confirm_alone: int = _n(8, "issue 33, handbook_ask: with sentence vectors pooled, the best this many by score "
                                 "are embedded alone before the choice")
    # --- which sentences and documents make the answer (steps.py)
    max_answer_chars: int = _n(1200, "hand-set: about four sentences with one code block")
    stop_ratio: float = _n(0.75, "hand-set: sentences scoring under this share of the best are left out")
    repeat_similarity: float = _n(0.85, "hand-set: a sentence this close in meaning to a chosen one repeats it")
    repeat_jaccard: float = _n(0.6, "hand-set: ... or sharing this share of its stemmed words")
    near_tie: float = _n(0.95, "dev questions: the right page, when second, scored 0.98-0.99 of the best")
    new_part: float = _n(0.2, "HotpotQA sweep: 0.25/0.3/0.4 lost recall (benchmarks-history.md)")
    fact_held: float = _n(0.2, "hand-set with issue 30: the share of the question's weight a sentence stating the asked value holds")
    fact_share: float = _n(0.7, "hand-set with issue 30: a retrieved sentence stating the asked value, at this share of the best, joins the answer")
    canonical_margin: float = _n(0.25, "hand-set with issue 30: how much more of the question a page's title must name to be cited instead")
    part_uncovered: float = _n(0.35, "hand-set with issue 30: a part whose best sentence is further in meaning is not covered")
    part_held: float = _n(0.5, "hand-set with issue 30: ... and holds under this share of the part's words")
    part_tie: float = _n(0.95, "hand-set: a chosen sentence scoring this share of a part's best answers that part")
    more_for_subject: int = _n(2, "hand-set: the other side of 'X or Y?' (HotpotQA comparisons)")
    more_neighbours: int = _n(2, "hand-set: the lead-in and code before, the value or the fix after")
    how_elsewhere: float = _n(0.8, "hand-set (commit 95b9a46): another page's sentence that says how, at this share of the best")
    weak_document: float = _n(
        0.4, "dev questions: took a right page at 0.365; nearest made worse at 0.421 and 0.443; HotpotQA once (0.374)")
    min_part_words: int = _n(3, "hand-set: a shorter part ('How do I set that up?') belongs to the one before")
    # --- what the question is about (subject.py) and when the answer is declined for not naming it
    min_subject_coverage: float = _n(0.5, "the decline sweep of 2026-12-02 (dev questions, grid 0.3/0.5/0.7)")
    named_page_coverage: float = _n(0.3, "hand-set on HotpotQA: 'Ed Wood' in 'Were Scott Derrickson and Ed Wood ...?'")
    subject_free_similarity: float = _n(0.75, "hand-set (benchmarks-history.md: 'an identifier is never said in other words')")
    paraphrase_similarity: float = _n(0.6, "the decline sweep of 2026-12-02 (grid 0.45-0.6)")
    unused_word_similarity: float = _n(0.55, "the decline sweep of 2026-12-02 (grid 0.5-0.65)")
    subject_max_share: float = _n(0.05, "the decline sweep of 2026-12-02 (grid 0.02/0.05/0.1)")
    min_rare_length: int = _n(4, "hand-set: shorter words are too often abbreviations")
    near_spelling: float = _n(0.8, "hand-set on HotpotQA: 'Apatim' for 'Apratim' (difflib ratio)")
    min_misspelt_length: int = _n(6, "hand-set: shorter words are one letter from too many others")

    @classmethod
    def provenance(cls) -> dict[str, str]:
        """Each number's name and the evaluation that set it."""
        return {f.name: f.metadata["set_by"] for f in fields(cls)}


HAND = Tuning()


class FittedFileError(ValueError):
    """fitted.json names a number Tuning does not have, or gives one of the wrong type."""


def load_fitted(path: Path = FITTED_FILE, start: Tuning = HAND) -> tuple[Tuning, dict[str, Any]]:
    """`start` with the values of a fitted file laid over it, and the file's record (command, date,
    data, figures); `start` itself and an empty record when there is no file."""
    if not path.is_file():
        return start, {}
    record = json.loads(path.read_text(encoding="utf-8"))
    values = record.get("values")
    if not isinstance(values, dict):
        raise FittedFileError(f"{path.name}: no 'values' object")
    known = {f.name: f for f in fields(Tuning)}
    changes: dict[str, Any] = {}
    for name, value in values.items():
        if name not in known:
            raise FittedFileError(f"{path.name}: {name!r} is not a Tuning number")
        wanted = type(getattr(start, name))
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (wanted is int and value != int(value)):
            raise FittedFileError(f"{path.name}: {name} must be a {wanted.__name__}, not {value!r}")
        changes[name] = wanted(value)
    return replace(start, **changes), record


TUNING, FITTED_RECORD = load_fitted()


def provenance(tuning: Tuning = TUNING, record: dict[str, Any] | None = None) -> dict[str, str]:
    """Each number's name and the evaluation that set it: the fit, for the numbers it moved."""
    record = FITTED_RECORD if record is None else record
    found = Tuning.provenance()
    for name in found:
        if getattr(tuning, name) != getattr(HAND, name) and record:
            found[name] = f"{record.get('command', 'python -m evals.fit_answers')} ({record.get('date', '')})"
    return found
