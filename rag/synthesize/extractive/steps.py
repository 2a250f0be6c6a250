"""The extractive answer's steps, in order (`STEPS`): each takes the draft and gives it back with
what it added, dropped or declined recorded. docs/architecture.md states each rule once.

1. `score_sentences`: every sentence of the excerpts scored cheaply (`prior`), the best
   `extractive_embed` (and each document's best) embedded and scored by meaning too.
2. `lead_with_holding_document`: the retriever's first document first, where it holds the most of
   the question's words and the best sentence's document far less.
3. `answer_parts`: for a question of several parts, each part's best sentence, or the part noted as
   not covered where no sentence is close to it.
4. `choose`: the best sentences of the best sentence's document, of the document it leads to (or a
   near tie), of a document holding a part of the question the others do not, and each part's best.
5. `prefer_canonical`: a sentence another document repeats, where that document's title names
   more of the question, is cited from that document (the topic's own page over a sibling).
6. `add_neighbours`: a chosen sentence gets the neighbour under its heading that completes it: for a
   how-to question the one that says how, for a question asking a value (a number, a port, a flag)
   the one that states it, and after a failure the step that resolves it.
7. `add_subject`: a page named after a subject term the answer leaves out gives its best sentence.
8. `keep_named_pages`: an answer quoting two or more pages the question names keeps only those.
9. `check_words`: declines when the sentences hold none of the question's words.
10. `check_subject`: declines when they do not name what the question is about, or another period.
11. `check_fact`: where the question asks for a value of a kind an answer must state (a maximum,
    a percentage, a port) and no chosen sentence states one, takes the best retrieved one that
    does, or declines when none does.
12. `reading_order`: the best sentence's excerpt first, each excerpt's sentences as written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from rag.models.embed import Embedder, embed_sentences
from rag.retrieve.text import stems
from rag.retrieve.types import Hit
from rag.settings import AnswerSettings
from rag.synthesize import declines
from rag.synthesize.extractive.documents import (
    by_holding_documents, named_only, names_a_subject_page, said, says_any_of, second_document,
)
from rag.synthesize.extractive.draft import Candidate, Draft
from rag.synthesize.extractive.features import held_share, holds_asked, kind_features, says_how, sentence_score, weigh
from rag.synthesize.extractive.kinds import FAILURE, FIX, INSTRUCTION, KINDS, asks_for
from rag.synthesize.extractive.question import Question
from rag.synthesize.extractive.subject import Term, other_period, subject_coverage
from rag.synthesize.extractive.text import embedded_text
from rag.synthesize.extractive.tuning import TUNING, Tuning
from rag.synthesize.sentences import sentences as excerpt_sentences


@dataclass(frozen=True)
class Env:
    """What the steps work with besides the draft."""

    embedder: Embedder
    settings: AnswerSettings
    tuning: Tuning = TUNING


# ----------------------------------------------------------------------------- sentences

def find_sentences(hits: Sequence[Hit], tuning: Tuning = TUNING) -> list[Candidate]:
    """Every sentence of the excerpts, in order; fragments (under `min_words`) left out unless the
    excerpts hold nothing else (lists and short lines only: take what there is)."""
    def collect(min_words: int) -> list[Candidate]:
        found = []
        for i, hit in enumerate(hits, start=1):
            fallback = hit.heading_path[-1] if hit.heading_path else ""
            for position, s in enumerate(excerpt_sentences(hit.text, min_words)):
                found.append(Candidate(i, s.text, hit.node_id, s.heading or fallback, position, s.attachment,
                                       table=s.table))
        return found

    return collect(tuning.min_words) or collect(tuning.min_words_fallback)


def _text_stems(c: Candidate) -> set[str]:
    return stems(f"{c.context} {c.text} {c.attachment}")


def shortlist(found: list[Candidate], limit: int) -> list[Candidate]:
    """Each document's best sentence by the cheap score, then the best of the rest, to `limit`."""
    by_prior = sorted(found, key=lambda c: -c.prior)
    chosen: list[Candidate] = []
    documents: set[str] = set()
    for c in by_prior:
        if c.document not in documents:
            documents.add(c.document)
            chosen.append(c)
    limit = max(limit, len(chosen))
    for c in by_prior:
        if len(chosen) >= limit:
            break
        if c not in chosen:
            chosen.append(c)
    return chosen


def score_sentences(draft: Draft, env: Env) -> Draft:
    t, hits, q = env.tuning, draft.hits, draft.question
    draft.pool = find_sentences(hits, t)
    if not draft.pool:
        return draft
    asked = set(q.weights)
    for c in draft.pool:
        hit = hits[c.excerpt - 1]
        held = held_share(q.weights, _text_stems(c))
        rank = 1 - (c.excerpt - 1) / len(hits)
        kinds = kind_features(c, q.asks, asked, held, t, q.problem, q.unit)
        c.features = {**kinds, "held": held, "rank": rank}
        c.base = weigh(kinds, t) + t.rank_prior * rank  # the retriever's order breaks near-ties
        c.prior = t.prior_held * held + t.prior_excerpt * (hit.vector_similarity or 0.0) + c.base
        c.score = sentence_score(c.features, t)
    listed = shortlist(draft.pool, env.settings.extractive_embed)
    query = q.vector if q.vector is not None else env.embedder.embed_query(q.text)
    vectors = _unit(embed_sentences(env.embedder, [embedded_text(c.context, c.text) for c in listed]))
    query = query / (np.linalg.norm(query) or 1.0)
    _set_similarity(listed, vectors, query, t)
    if getattr(env.embedder, "pooled_sentences", False) and t.confirm_alone:
        # Vectors pooled out of a chunk's pass pick the candidates; the best few are embedded
        # alone (and cached, as any text), so that the answer's choice and its checks read the
        # vectors the thresholds were fitted on.
        best = sorted(listed, key=lambda c: -c.score)[:t.confirm_alone]
        _set_similarity(best, _unit(env.embedder.embed([embedded_text(c.context, c.text) for c in best])), query, t)
    draft.ranked = sorted(listed, key=lambda c: -c.score)
    return draft


def _unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


def _set_similarity(listed: Sequence[Candidate], vectors: np.ndarray, query: np.ndarray, t: Tuning) -> None:
    for c, sim, vector in zip(listed, vectors @ query, vectors):
        c.similarity = float(sim)
        c.features["similarity"] = c.similarity
        c.score = sentence_score(c.features, t)
        c.vector = vector


def lead_with_holding_document(draft: Draft, env: Env) -> Draft:
    draft.ranked = by_holding_documents(draft.ranked, draft.hits, draft.question.weights, env.tuning)
    return draft


# ----------------------------------------------------------------------------- choosing

def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


def _shown_in(c: Candidate, other: Candidate) -> bool:
    """Is `c`'s sentence shown already inside what `other` introduces (a list item of it)?"""
    return bool(other.attachment) and " ".join(c.text.split()).rstrip(".") in " ".join(other.attachment.split())


def repeats(c: Candidate, chosen: Sequence[Candidate], tuning: Tuning = TUNING) -> bool:
    """Says what a chosen sentence says already (close in meaning, or mostly the same words), or
    is shown already in what one introduces (an item of its list), or shows one in its own list."""
    words = stems(c.text)
    return any((c.vector is not None and other.vector is not None
                and float(c.vector @ other.vector) > tuning.repeat_similarity)
               or _jaccard(words, stems(other.text)) > tuning.repeat_jaccard
               or _shown_in(c, other) or _shown_in(other, c) for other in chosen)


def once(chosen: Sequence[Candidate]) -> list[Candidate]:
    """The chosen sentences, none twice: a sentence shown already in a list another introduces, or
    written the same as one before it, is left out."""
    kept: list[Candidate] = []
    for c in chosen:
        if any(c.text == o.text for o in kept) or any(_shown_in(c, o) for o in chosen if o is not c):
            continue
        kept.append(c)
    return kept


def answer_parts(draft: Draft, env: Env) -> Draft:
    """For a question that asks several things, each part's best sentence, scored as every
    sentence is but against the part alone, with the ids of the sentences that answer that part
    about as well (within `part_tie`); none for a question of one part. A part whose best sentence
    is under `part_uncovered` in meaning and holds under `part_held` of the part's words is noted in
    `uncovered` instead (unless no part is answered), and the answer says the knowledge base does
    not cover it."""
    q, t = draft.question, env.tuning
    if len(q.parts) < 2 or not draft.ranked:
        return draft
    for part in q.parts:
        vector = env.embedder.embed_query(part)
        vector = vector / (np.linalg.norm(vector) or 1.0)
        part_stems = stems(part)
        part_weights = {s: w for s, w in q.weights.items() if s in part_stems}
        scored = [
            (float(c.vector @ vector) + t.lexical * held_share(part_weights, _text_stems(c)) + c.base, c)
            for c in draft.ranked if c.vector is not None
        ]
        top = max(score for score, _ in scored)
        best = next(c for score, c in scored if score == top)
        if float(best.vector @ vector) < t.part_uncovered and held_share(part_weights, _text_stems(best)) < t.part_held:
            draft.uncovered.append(part)  # nothing here answers this part: the answer says so
            continue
        draft.parts.append((best, {id(c) for score, c in scored if score >= t.part_tie * top}))
    if len(draft.uncovered) == len(q.parts):
        draft.uncovered = []  # no part answered: the checks after decide
    return draft


def with_parts(chosen: list[Candidate], parts: Sequence[tuple[Candidate, set[int]]], limit: int,
               tuning: Tuning = TUNING) -> list[Candidate]:
    """Each part's best sentence added where no chosen sentence answers that part about as well,
    in place of the last chosen sentences that answer no part (the best sentence always stays)."""
    for best, as_good in parts:
        if any(id(c) in as_good for c in chosen) or repeats(best, chosen, tuning):
            continue
        keep = [c for c in chosen[1:] if any(id(c) in good for _, good in parts)]
        while len(chosen) >= limit and len(chosen) > 1 + len(keep):
            chosen.remove(next(c for c in reversed(chosen[1:]) if c not in keep))
        if len(chosen) < limit:
            chosen.append(best)
    return chosen


def select(ranked: list[Candidate], limit: int, tuning: Tuning = TUNING, second: str | None = None,
           weights: dict[str, float] | None = None, parts: Sequence[tuple[Candidate, set[int]]] = (),
           howto: bool = False) -> list[Candidate]:
    """The best sentences (at most `limit`) of the best sentence's document, of the `second` one
    (which gives at least its best sentence whatever its score: a link is evidence enough), of any
    other document that holds a part of the question (by its word `weights`) the chosen sentences
    do not, of another document whose sentence says how (for a how-to question), and each of the
    question's `parts` answered (its best sentence, unless one chosen answers it about as well)."""
    if not ranked:
        return []
    t = tuning
    allowed = {ranked[0].document, second}
    weights = weights or {}
    chosen: list[Candidate] = []
    used = 0

    def adds_a_part(c: Candidate) -> bool:
        if not weights or not chosen:
            return False
        covered = set().union(*(stems(f"{o.context} {o.text}") for o in chosen))
        new = stems(f"{c.context} {c.text}") - covered
        return held_share(weights, new) >= t.new_part

    for c in ranked:
        if len(chosen) >= limit or (chosen and c.score < t.stop_ratio * chosen[0].score):
            break
        if repeats(c, chosen, t) or (chosen and used + c.size > t.max_answer_chars):
            continue
        if c.document not in allowed:
            if not (adds_a_part(c) or (howto and says_how(c) and c.score >= t.how_elsewhere * chosen[0].score)):
                continue
            allowed.add(c.document)
        chosen.append(c)
        used += c.size
    room = limit - 1  # the best sentence always stays
    if second is not None and room and all(c.document != second for c in chosen):
        best = next((c for c in ranked if c.document == second and not repeats(c, chosen, t)), None)
        if best is not None:
            del chosen[room:]
            chosen.append(best)
    return with_parts(chosen, parts, limit, t)


def choose(draft: Draft, env: Env) -> Draft:
    q = draft.question
    second = second_document(q.text, draft.hits, draft.ranked, env.tuning)
    draft.chosen = select(draft.ranked, env.settings.extractive_sentences, env.tuning, second, q.weights,
                          draft.parts, q.howto)
    if not draft.chosen:
        draft.declined = declines.NO_SENTENCES
    return draft


def _title_share(c: Candidate, hits: Sequence[Hit], weights: dict[str, float]) -> float:
    return held_share(weights, stems(hits[c.excerpt - 1].title))


def canonical(chosen: list[Candidate], ranked: Sequence[Candidate], hits: Sequence[Hit], weights: dict[str, float],
              tuning: Tuning = TUNING) -> list[Candidate]:
    """Each chosen sentence, or in its place the same thing said on the topic's own page: a
    sentence of another document that repeats it (`repeat_similarity` in meaning) where that
    document's title holds at least `canonical_margin` more of the question's weight. A guide that
    repeats the reference page's sentence then cites the reference page."""
    found = list(chosen)
    documents = {c.document for c in chosen}
    for n, c in enumerate(chosen):
        if c.vector is None:
            continue
        own = _title_share(c, hits, weights)
        for other in ranked:
            if (other.document in documents or other.vector is None
                    or float(other.vector @ c.vector) <= tuning.repeat_similarity):
                continue
            if _title_share(other, hits, weights) >= own + tuning.canonical_margin:
                found[n] = other
                documents.add(other.document)
                break
    return found


def prefer_canonical(draft: Draft, env: Env) -> Draft:
    if draft.question.weights:
        draft.chosen = canonical(draft.chosen, draft.ranked, draft.hits, draft.question.weights, env.tuning)
    return draft


def neighbour(c: Candidate, at: dict[tuple[int, int], Candidate], question: Question) -> Candidate | None:
    """The sentence next to `c` under the same heading that completes it, if any:
    - for a how-to question, where `c` says what happens but not how ("If the lockfile is not
      up-to-date, uv will raise an error"): the lead-in and code right before it, else the next
      sentence when that names a command, flag, setting or file, or is a step the reader takes
      ("Submit a request to be upgraded") where `c` is not one;
    - for a question asking a value an answer must state (a port, a flag, a maximum), where `c`
      names the topic but not the value: the sentence after (else before) that states one;
    - for a question that describes a failure or asks how, where `c` describes a failure and gives
      no step: the next sentence when it gives the step that resolves it."""
    before, after = at.get((c.excerpt, c.position - 1)), at.get((c.excerpt, c.position + 1))
    before = before if before is not None and before.context == c.context else None
    after = after if after is not None and after.context == c.context else None
    if question.howto and not says_how(c):
        if before is not None and before.attachment.startswith("```"):
            return before
        if after is not None and (says_how(after) or (INSTRUCTION.search(after.text)
                                                       and not INSTRUCTION.search(c.text))):
            return after
    asked = set(question.weights)
    if holds_asked(c, question.asks, asked, question.unit) is False:
        for other in (after, before):
            if other is not None and holds_asked(other, question.asks, asked, question.unit):
                return other
    if ((question.problem or question.howto) and after is not None and FAILURE.search(c.text)
            and not FIX.search(c.text) and (FIX.search(after.text) or says_how(after))):
        return after
    return None


def with_neighbours(chosen: list[Candidate], pool: Sequence[Candidate], question: Question,
                    tuning: Tuning = TUNING) -> list[Candidate]:
    """Each chosen sentence followed by its `neighbour` where it has one not chosen already; at
    most `more_neighbours` are added, within `max_answer_chars`: where one does not fit, the last
    chosen sentences after the one it completes make room (it completes a better sentence)."""
    at = {(c.excerpt, c.position): c for c in pool}
    taken = {(c.excerpt, c.position) for c in chosen}
    kept = list(chosen)
    added: list[Candidate] = []
    for c in chosen:
        if len(added) >= tuning.more_neighbours:
            break
        extra = neighbour(c, at, question) if c in kept else None
        if extra is None or (extra.excerpt, extra.position) in taken:
            continue
        spare = kept[kept.index(c) + 1:]
        over = sum(o.size for o in kept + added) + extra.size - tuning.max_answer_chars
        if over > sum(o.size for o in spare):
            continue
        while over > 0:
            dropped = spare.pop()
            kept.remove(dropped)
            over -= dropped.size
        taken.add((extra.excerpt, extra.position))
        added.append(extra)
    return kept + added


def add_neighbours(draft: Draft, env: Env) -> Draft:
    draft.chosen = with_neighbours(draft.chosen, draft.pool, draft.question, env.tuning)
    return draft


def _named(c: Candidate, hits: Sequence[Hit]) -> set[str]:
    return stems(said(c, hits))


def complete(terms: Sequence[Term], chosen: list[Candidate], ranked: Sequence[Candidate], hits: Sequence[Hit],
             tuning: Tuning = TUNING) -> list[Candidate]:
    """The chosen sentences, plus (at most `more_for_subject`) the best sentence of a page named
    after each subject term they leave out, heaviest first: a comparison answered from one side
    only gets the other side ("Who was born first, X or Y?")."""
    chosen = list(chosen)
    named = set().union(*(_named(c, hits) for c in chosen)) if chosen else set()
    added = 0
    for term in sorted(terms, key=lambda t: -t.weight):
        if added >= tuning.more_for_subject or term.stems <= named:
            continue
        # A page named after the term (on HotpotQA, pages that only mention it were the wrong
        # source four times in five).
        extra = next((c for c in ranked if c not in chosen and term.stems <= stems(hits[c.excerpt - 1].title)), None)
        if extra is not None:
            chosen.append(extra)
            named |= _named(extra, hits)
            added += 1
    return chosen


def add_subject(draft: Draft, env: Env) -> Draft:
    draft.chosen = complete(draft.question.terms, draft.chosen, draft.ranked, draft.hits, env.tuning)
    return draft


def keep_named_pages(draft: Draft, env: Env) -> Draft:
    draft.chosen = named_only(draft.chosen, draft.hits, draft.question.words)
    return draft


# ----------------------------------------------------------------------------- checks

def check_words(draft: Draft, env: Env) -> Draft:
    q = draft.question
    if not says_any_of(q.weights, draft.chosen, draft.hits, q.text):
        draft.declined = declines.NO_SENTENCE_ANSWERS
    return draft


def subject_decline(terms: Sequence[Term], chosen: Sequence[Candidate], hits: Sequence[Hit],
                    tuning: Tuning = TUNING, months: frozenset[str] = frozenset(), question: str = "") -> str | None:
    """Why the chosen sentences (with their headings and titles) do not answer what the question is
    about, or None when they do: they state another period than the months it asks about, or name
    under `min_subject_coverage` of its subject terms' weight. A smaller share
    (`named_page_coverage`) is enough where the question names one of the quoted pages by its
    title: its other names are then about what the answer leads to or stands beside."""
    named = set().union(*(_named(c, hits) for c in chosen))
    if other_period(months, named):
        return declines.OTHER_PERIOD
    if not terms:
        return None
    closest = max(c.similarity for c in chosen)
    if closest >= tuning.subject_free_similarity and not any(t.identifier for t in terms):
        return None  # a sentence so close in meaning that other words say it (an identifier never is)
    paraphrased = closest >= tuning.paraphrase_similarity
    reworded = closest >= tuning.unused_word_similarity
    text = " ".join(said(c, hits) for c in chosen)
    coverage = subject_coverage(terms, named, paraphrased, text, reworded)
    if coverage >= tuning.min_subject_coverage:
        return None
    if coverage >= tuning.named_page_coverage and names_a_subject_page(question, terms, chosen, hits):
        return None
    return declines.SUBJECT_NOT_COVERED


def check_subject(draft: Draft, env: Env) -> Draft:
    """As `subject_decline`, on the subject terms of the parts the answer answers: a part it says
    it does not cover is not held against the others."""
    q = draft.question
    terms = q.terms
    if draft.uncovered:
        left_out = stems(" ".join(draft.uncovered)) - stems(" ".join(p for p in q.parts if p not in draft.uncovered))
        terms = [t for t in terms if not t.stems <= left_out]
    draft.declined = subject_decline(terms, draft.chosen, draft.hits, env.tuning, q.months, q.text)
    return draft


def asking_weights(q: Question) -> dict[str, float]:
    """The question's word weights, of the sentence of it that asks for the value an answer must
    state ("How far ahead of my last day ...?" after "I've accepted a job elsewhere."; "How many
    readers ...?" of a two-part question); all of them where no one sentence does."""
    required = {kind.name for kind in KINDS if kind.required} & q.asks
    for part in q.parts:
        for clause in re.split(r"(?<=[.?!])\s+", part):
            if asks_for(clause) & required:
                clause_stems = stems(clause)
                weights = {s: w for s, w in q.weights.items() if s in clause_stems}
                if weights:
                    return weights
    return q.weights


def check_fact(draft: Draft, env: Env) -> Draft:
    """A question asking for a value an answer must state (kinds.py: a maximum, a percentage, a
    port, a flag; not a how-to, whose answer is a procedure) is answered by a sentence that states
    one (more than the question's own words) and holds `fact_held` of the question's weight, or of
    the weight of its sentence that asks it (a number about something else is not the one asked). Where no chosen
    sentence does, the best retrieved sentence of a chosen document that does (a number of the unit
    asked, where the question counts one), scoring `fact_share` of the best, joins the answer (in
    place of the last where `max_answer_chars` leaves no room); where none does, the topic is there
    and the fact is not: the answer declines as `fact_not_stated`."""
    q, t = draft.question, env.tuning
    asked = set(q.weights)
    if q.howto or not draft.chosen or all(holds_asked(c, q.asks, asked) is None for c in draft.chosen):
        return draft
    weights = asking_weights(q)

    def states(c: Candidate) -> bool:
        text = _text_stems(c)
        held = max(held_share(q.weights, text), held_share(weights, text)) if q.weights else 1.0
        return bool(holds_asked(c, q.asks, asked, q.unit)) and held >= t.fact_held

    if any(states(c) for c in draft.chosen):
        return draft
    best = draft.chosen[0].score
    documents = {c.document for c in draft.chosen}
    found = next((c for c in draft.ranked if c not in draft.chosen and c.document in documents and states(c)
                  and (q.unit is None or holds_asked(c, q.asks, asked, q.unit, strict=True))
                  and c.score >= t.fact_share * best and not repeats(c, draft.chosen, t)), None)
    if found is None:
        draft.declined = declines.FACT_NOT_STATED
        return draft
    if sum(c.size for c in draft.chosen) + found.size > t.max_answer_chars and len(draft.chosen) > 1:
        draft.chosen = draft.chosen[:-1]  # no room: it takes the last one's place
    draft.chosen = [*draft.chosen, found]
    return draft


def reading_order(draft: Draft, env: Env) -> Draft:
    """The best sentence's excerpt first; within an excerpt, sentences in the order they are
    written; no sentence twice (`once`)."""
    draft.chosen = once(draft.chosen)
    first_rank: dict[int, int] = {}
    for rank, c in enumerate(draft.chosen):
        first_rank.setdefault(c.excerpt, rank)
    draft.chosen = sorted(draft.chosen, key=lambda c: (first_rank[c.excerpt], c.position))
    return draft


Step = Callable[[Draft, Env], Draft]
STEPS: tuple[Step, ...] = (
    score_sentences, lead_with_holding_document, answer_parts, choose, prefer_canonical, add_neighbours, add_subject,
    keep_named_pages, check_words, check_subject, check_fact, reading_order,
)


def run(draft: Draft, env: Env, steps: Sequence[Step] = STEPS) -> Draft:
    """The steps in order, each recorded; a step that declines ends the run (no sentences are kept)."""
    for step in steps:
        before = list(draft.chosen)
        draft = step(draft, env)
        if draft.declined:
            draft.chosen = []
        draft.record(step.__name__, before)
        if draft.declined:
            break
    return draft
