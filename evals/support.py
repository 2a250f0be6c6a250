"""ALCE-style citation support (Gao et al. 2023, "Enabling LLMs to generate text with citations"),
judged per sentence by a model through litellm.

- Recall: a sentence counts when the excerpts it cites, together, entail it. A sentence that
  cites nothing counts 0.
- Precision: a citation of a supported sentence is needed unless it does not entail the sentence
  alone while the sentence's other citations still do without it (an over-citation). Every
  citation of an unsupported sentence counts 0.

Both are per answer (supported sentences / sentences, needed citations / citations), then
averaged over the answers that were given (a refusal has no sentence to judge).
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Callable, Mapping

from evals.answer_metrics import markers, strip_citations
from rag.models.llm import ChatModel
from rag.synthesize.prompts import render_prompt

Entails = Callable[[str, str], bool]  # (premise, claim) -> is the claim supported
# A sentence ends at . ! or ? with its citation markers, before white space and a capital or digit.
_SENTENCE_END = re.compile(r"[.!?](?:\s*\[\d+\])*(?=\s+[\"'“‘(]?[A-Z0-9]|\s*$)")


def cited_sentences(text: str) -> list[tuple[str, list[int]]]:
    """The answer's sentences, citations taken out, each with the numbers it cites (in order)."""
    pieces, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        pieces.append(text[start:match.end()])
        start = match.end()
    pieces.append(text[start:])
    sentences: list[tuple[str, list[int]]] = []
    for piece in pieces:
        claim = strip_citations(piece).strip()
        numbers = list(dict.fromkeys(markers(piece)))
        if claim:
            sentences.append((claim, numbers))
        elif numbers and sentences:  # markers written after the full stop belong to the sentence before
            sentences[-1][1].extend(n for n in numbers if n not in sentences[-1][1])
    return sentences


def model_entails(model: ChatModel, prompts_dir: Path | None = None) -> Entails:
    """The judge: the model answers yes or no; anything but a yes counts as no."""

    @lru_cache(maxsize=4096)  # the same (premise, claim) pair is asked once per run
    def entails(premise: str, claim: str) -> bool:
        messages = [
            {"role": "system", "content": render_prompt("support_system", prompts_dir)},
            {"role": "user", "content": render_prompt("support_user", prompts_dir, premise=premise, claim=claim)},
        ]
        reply = model.complete(messages).strip().lstrip("\"'*` ").lower()
        return reply.startswith("yes")

    return entails


def support_scores(text: str, premises: Mapping[int, str], entails: Entails) -> dict[str, float | int]:
    """One answer's support recall and precision. `premises` maps each source number to the text of
    its cited excerpts."""
    sentences = cited_sentences(text)
    supported = needed = citations = 0
    for claim, numbers in sentences:
        numbers = [n for n in numbers if n in premises]
        if not numbers:
            continue
        citations += len(numbers)

        def joined(subset: list[int]) -> str:
            return "\n\n".join(premises[n] for n in subset)

        if not entails(joined(numbers), claim):
            continue
        supported += 1
        if len(numbers) == 1:
            needed += 1
            continue
        for n in numbers:
            alone = entails(premises[n], claim)
            if alone or not entails(joined([m for m in numbers if m != n]), claim):
                needed += 1
    return {
        "support_recall": supported / len(sentences) if sentences else 0.0,
        "support_precision": needed / citations if citations else 0.0,
        "sentences": len(sentences),
    }
