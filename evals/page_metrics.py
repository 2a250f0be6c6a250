"""Scores of one answer on a pages-plus-questions dataset (evals/pages.py), and their means by group.

Over the answerable questions (those with answer keys):
- retrieval@5: a gold page is among the documents of the top 5 search results; a question that
  needs all its gold pages (uv_docs' multi) needs all of them there;
- gold_found@5: the fraction of its gold pages in the top 5, for those all-pages questions only;
- gold_cited: a gold page is among the cited pages (all of them for an all-pages question);
- key_hit: the answer, citation markers taken out, contains an answer key: a case-insensitive
  substring (uv_docs) or a case-insensitive whole word, not inside a longer word or number
  (office_docs: "73" is in "73 airplanes", not in "737");
- wrongly_declined: the answer declined (abstained, or cites nothing);
- text_found: for a question with a support string (office_docs), the file's stored text holds it
  (letters and digits compared, case-insensitive: whitespace, punctuation, Markdown markup and a PDF's
  dot leaders do not count); for a PDF question with a page, on that page's part of the text;
- page_cited: for a question whose answer is on a given page of a PDF (office_docs' `page`), the
  answer cites an excerpt of the gold file that lies on that page (1-based physical pages).

Over the questions without answer keys (near_topic, no_answer, bad_file):
- declined: the answer declined, as above.

Latency p50 / p95 is over every question of the group.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from evals.answer_metrics import _mean, _percentile, strip_citations
from evals.pages import ALL, WORD, PageQuestion

TOP = 5
PAGE_METRICS = (
    "questions", "answerable", "retrieval@5", "gold_found@5", "gold_cited", "text_found", "page_cited", "key_hit",
    "wrongly_declined", "declined", "latency_p50_ms", "latency_p95_ms",
)
SCORES = ("retrieval@5", "gold_found@5", "gold_cited", "text_found", "page_cited", "key_hit", "wrongly_declined",
          "declined")
_NOT_ALNUM = re.compile(r"[^0-9a-z]+")
LOWER_IS_BETTER = frozenset({"wrongly_declined"})


def key_in(key: str, text: str, rule: str) -> bool:
    """Whether `key` is in `text`, case-insensitive: anywhere (substring), or as a whole word (word:
    office_docs' check.py `key_in`, not preceded or followed by a letter or digit)."""
    key, text = key.lower(), text.lower()
    if not key:
        return False
    if rule == WORD:
        return re.search(r"(?<![0-9a-z])" + re.escape(key) + r"(?![0-9a-z])", text) is not None
    return key in text


def text_found(support: str, body: str, pages: Sequence[Sequence[int]] | None, page: int | None) -> bool:
    """Whether the stored text (of `page`, for a paged file) holds the support string, letters and
    digits compared."""
    if page is not None and pages:
        body = "".join(body[s:e] for s, e, p in pages if p == page)
    wanted = _NOT_ALNUM.sub("", support.lower())
    return bool(wanted) and wanted in _NOT_ALNUM.sub("", body.lower())


def key_hit(answer: str, keys: Sequence[str], rule: str) -> bool:
    text = strip_citations(answer)
    return any(key_in(k, text, rule) for k in keys)


def score_question(
    q: PageQuestion, answer: str, cited: Sequence[str], top: Sequence[str], declined: bool,
    cited_page_numbers: Mapping[str, Sequence[int]] | None = None, found_text: bool | None = None,
) -> dict[str, float | None]:
    """One question's scores. `cited` are the pages the answer cites, `top` the pages of the top 5
    search results, `cited_page_numbers` the PDF pages of the cited excerpts of each cited file,
    `found_text` whether the stored text holds the support (`text_found`; None: not checked);
    None where a score is not defined for the question."""
    scores: dict[str, float | None] = dict.fromkeys(SCORES)
    if not q.answerable:
        scores["declined"] = float(declined)
        return scores
    gold = list(dict.fromkeys(q.gold_pages))
    if found_text is not None:
        scores["text_found"] = float(found_text)
    need = all if q.gold_rule == ALL else any
    if gold:
        found = [g in set(top) for g in gold]
        scores["retrieval@5"] = float(need(found))
        scores["gold_cited"] = float(need(g in set(cited) for g in gold))
        if q.gold_rule == ALL:
            scores["gold_found@5"] = sum(found) / len(gold)
        if q.gold_page_number is not None:
            numbers = cited_page_numbers or {}
            scores["page_cited"] = float(any(q.gold_page_number in numbers.get(g, ()) for g in gold))
    scores["key_hit"] = float(key_hit(answer, q.answer_keys, q.key_rule))
    scores["wrongly_declined"] = float(declined)
    return scores


def aggregate(rows: Sequence[Mapping[str, Any]]) -> dict[str, float | int | None]:
    """A group's figures from its rows (each with "answerable", "scores" and "latency_ms")."""
    result: dict[str, float | int | None] = {
        "questions": len(rows), "answerable": sum(bool(r["answerable"]) for r in rows),
    }
    for key in SCORES:
        result[key] = _mean(r["scores"][key] for r in rows)
    latencies = [r["latency_ms"] for r in rows if r.get("latency_ms") is not None]
    result["latency_p50_ms"] = _percentile(latencies, 50)
    result["latency_p95_ms"] = _percentile(latencies, 95)
    return {key: result[key] for key in PAGE_METRICS}


def groups(rows: Sequence[Mapping[str, Any]], split: str = "all") -> dict[str, dict[str, float | int | None]]:
    """Figures by kind (in order of first appearance), then over all questions; when the run took
    every question, also over each split (odd: calibration, even: held out)."""
    kinds = list(dict.fromkeys(r["kind"] for r in rows))
    result = {kind: aggregate([r for r in rows if r["kind"] == kind]) for kind in kinds}
    # The dev questions' behaviours (paraphrase, two_part, …), each a group of its own after the kinds.
    for behaviour in dict.fromkeys(r["behaviour"] for r in rows if r.get("behaviour")):
        if behaviour not in result:
            result[behaviour] = aggregate([r for r in rows if r.get("behaviour") == behaviour])
    result["all"] = aggregate(rows)
    if split == "all":
        for part in ("odd", "even"):
            chosen = [r for r in rows if r.get("split") == part]
            if chosen:
                result[part] = aggregate(chosen)
    return result
