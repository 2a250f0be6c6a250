"""Conversations: the last question becomes a standalone one before retrieval.

With a model, the model rewrites it (prompts/rewrite_*.txt). Without one, a deterministic rule: a
follow-up (a pronoun, "what about …", or fewer than three content words) borrows the content words
of the previous user question that it does not already have.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Sequence

from rag.errors import InvalidArgument, Unavailable
from rag.models.llm import ChatModel
from rag.retrieve.text import porter_stem, query_terms, words
from rag.synthesize.prompts import render_prompt

log = logging.getLogger(__name__)

MAX_HISTORY_MESSAGES = 50
MAX_HISTORY_CHARS = 40_000
ROLES = ("user", "assistant")
_ANAPHORA = frozenset(
    "it its this that these those they them their theirs there he she him her his hers same former latter".split()
)
_FOLLOW_UP = re.compile(r"^\s*(and|what about|how about|also|or|but|then|so|same for)\b", re.IGNORECASE)


def validate_history(history: Any) -> list[dict[str, str]]:
    """A list of {"role": "user"|"assistant", "content": str}, oldest first; system messages are dropped."""
    if history is None:
        return []
    if not isinstance(history, (list, tuple)):
        raise InvalidArgument("`history` must be a list of messages")
    if len(history) > MAX_HISTORY_MESSAGES:
        raise InvalidArgument(f"`history` may hold at most {MAX_HISTORY_MESSAGES} messages")
    messages: list[dict[str, str]] = []
    total = 0
    for i, message in enumerate(history):
        if not isinstance(message, dict) or not isinstance(message.get("content"), str):
            raise InvalidArgument(f"`history[{i}]` must be an object with a string `content`")
        role = message.get("role")
        if role == "system":
            continue
        if role not in ROLES:
            raise InvalidArgument(f"`history[{i}].role` must be one of user, assistant, system")
        total += len(message["content"])
        messages.append({"role": role, "content": message["content"]})
    if total > MAX_HISTORY_CHARS:
        raise InvalidArgument(f"`history` may hold at most {MAX_HISTORY_CHARS} characters")
    return messages


def needs_context(question: str) -> bool:
    return (bool(_FOLLOW_UP.match(question)) or any(w in _ANAPHORA for w in words(question))
            or len(query_terms(question)) < 3)


def rule_rewrite(question: str, history: Sequence[dict[str, str]]) -> str:
    previous = [m["content"] for m in history if m["role"] == "user" and m["content"].strip()]
    if not previous or not needs_context(question):
        return question
    have = {porter_stem(t) for t in query_terms(question)}
    extra = [t for t in query_terms(previous[-1]) if porter_stem(t) not in have]
    return f"{question.strip()} ({' '.join(extra)})" if extra else question


def model_rewrite(question: str, history: Sequence[dict[str, str]], model: ChatModel) -> str:
    lines = [f"{m['role'].capitalize()}: {m['content'][:1000]}" for m in history[-10:]]
    messages = [
        {"role": "system", "content": render_prompt("rewrite_system")},
        {"role": "user", "content": render_prompt("rewrite_user", history="\n".join(lines), question=question)},
    ]
    try:
        reply = model.complete(messages)
    except Unavailable:
        log.warning("the model could not rewrite the question; the rule rewrites it instead")
        return rule_rewrite(question, history)
    line = next((ln.strip().strip("\"'“”") for ln in reply.splitlines() if ln.strip()), "")
    if not line or len(line) > 4 * len(question) + 400:
        return rule_rewrite(question, history)
    return line


def standalone_question(question: str, history: Sequence[dict[str, str]], model: ChatModel | None) -> str:
    if not any(m["role"] == "user" for m in history):
        return question
    return model_rewrite(question, history, model) if model else rule_rewrite(question, history)
