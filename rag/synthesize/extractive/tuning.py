"""Every number of the extractive answer, in one place, each with the evaluation that set it.

What an operator would change (how many sentences an answer has, how many are embedded per question,
when the relevance check abstains) stays in `AnswerSettings`; everything else is here. A number is
read as `tuning.<name>` by the step that uses it, and `Tuning(**changes)` (or `dataclasses.replace`)
gives a variant for a sweep: `python -m evals.calibrate_decline` passes its grid this way.

"Dev questions" below means the development split: the handbook fixture
(evals/fixtures/handbook_questions.yaml) and the odd-numbered uv_docs questions; "HotpotQA" the
odd-numbered questions of hotpotqa_dev500. A number marked *hand-set* was chosen once by reading
those answers and never swept; the issue that fits the scorer (issue 30, part 2) replaces them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any


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
    restates_new_words: int = _n(3, "hand-set: a sentence adding at most this many words to the question's ...")
    restates_share: float = _n(0.6, "hand-set: ... while this share of its words are the question's restates it")
    # --- which sentences and documents make the answer (steps.py)
    max_answer_chars: int = _n(1200, "hand-set: about four sentences with one code block")
    stop_ratio: float = _n(0.75, "hand-set: sentences scoring under this share of the best are left out")
    repeat_similarity: float = _n(0.85, "hand-set: a sentence this close in meaning to a chosen one repeats it")
    repeat_jaccard: float = _n(0.6, "hand-set: ... or sharing this share of its stemmed words")
    near_tie: float = _n(0.95, "dev questions: the right page, when second, scored 0.98-0.99 of the best")
    new_part: float = _n(0.2, "HotpotQA sweep: 0.25/0.3/0.4 lost recall (benchmarks-history.md)")
    part_tie: float = _n(0.95, "hand-set: a chosen sentence scoring this share of a part's best answers that part")
    more_for_subject: int = _n(2, "hand-set: the other side of 'X or Y?' (HotpotQA comparisons)")
    more_for_how: int = _n(2, "hand-set: the lead-in and code before, or the next sentence")
    how_elsewhere: float = _n(0.8, "hand-set (commit 95b9a46): another page's sentence that says how, at this share of the best")
    weak_document: float = _n(
        0.4, "dev questions: took a right page at 0.365; nearest made worse at 0.421 and 0.443; HotpotQA once (0.374)")
    min_part_words: int = _n(3, "hand-set: a shorter part ('How do I set that up?') belongs to the one before")
    # --- what the question is about (subject.py) and when the answer is declined for not naming it
    min_subject_coverage: float = _n(0.5, "python -m evals.calibrate_decline (dev questions, grid 0.3/0.5/0.7)")
    named_page_coverage: float = _n(0.3, "hand-set on HotpotQA: 'Ed Wood' in 'Were Scott Derrickson and Ed Wood ...?'")
    subject_free_similarity: float = _n(0.75, "hand-set (benchmarks-history.md: 'an identifier is never said in other words')")
    paraphrase_similarity: float = _n(0.6, "python -m evals.calibrate_decline (grid 0.45-0.6)")
    unused_word_similarity: float = _n(0.55, "python -m evals.calibrate_decline (grid 0.5-0.65)")
    subject_max_share: float = _n(0.05, "python -m evals.calibrate_decline (grid 0.02/0.05/0.1)")
    min_rare_length: int = _n(4, "hand-set: shorter words are too often abbreviations")
    near_spelling: float = _n(0.8, "hand-set on HotpotQA: 'Apatim' for 'Apratim' (difflib ratio)")
    min_misspelt_length: int = _n(6, "hand-set: shorter words are one letter from too many others")

    @classmethod
    def provenance(cls) -> dict[str, str]:
        """Each number's name and the evaluation that set it."""
        return {f.name: f.metadata["set_by"] for f in fields(cls)}


TUNING = Tuning()
