"""The OpenAI-compatible surface: POST /v1/chat/completions and GET /v1/models, so a chat app built
on an OpenAI client can use a knowledge base as its model.

The last user message is the question and the messages before it are the conversation; the
answer is the service's cited answer (svc.ask / svc.ask_stream), its text followed by the
`Sources:` lines of ask_knowledge, and the sources again, structured, in the extra field
`sources`.
"""

from __future__ import annotations

import secrets
import time
from datetime import timezone
from functools import partial
from typing import Any, Callable, Iterator

from fastapi import APIRouter
from fastapi.responses import JSONResponse, StreamingResponse

from rag.api.concurrency import caller_key, stream_limiter
from rag.api.auth import Caller, Service
from rag.api.errors import ERROR_RESPONSES, ModelNotFound
from rag.api.openai_schemas import ChatCompletion, ChatCompletionRequest, ChatMessage, ModelCard, ModelList
from rag.api.sse import event_stream, json_data, ref, sse, stream_doc
from rag.errors import InvalidArgument, NotFound
from rag.render import answer_response, source_payload, sources_text
from rag.service import KnowledgeService, Principal
from rag.store.models import KnowledgeBase
from rag.synthesize.conversation import MAX_HISTORY_CHARS
from rag.synthesize.types import AnswerEvent

router = APIRouter(prefix="/v1", tags=["OpenAI-compatible"], responses=ERROR_RESPONSES)

# A chat app resends the whole conversation each turn; the rewrite of a follow-up reads the last
# ten messages at most, so only those are passed on and a long chat never hits the history bound.
HISTORY_WINDOW = 10
_STREAM_DOC = (
    "With `stream: true`: `data: <chat.completion.chunk>` events (the role, the answer's text, the `Sources:` "
    "lines, then an empty delta with `finish_reason: stop` and the extra field `sources`), then `data: [DONE]`. "
    "A failure after the first chunk is a last `data: {\"error\": …}` event."
)
_CHUNK = {
    "type": "object", "required": ["id", "object", "created", "model", "choices"],
    "properties": {
        "id": {"type": "string"}, "object": {"const": "chat.completion.chunk"}, "created": {"type": "integer"},
        "model": {"type": "string"},
        "choices": {"type": "array", "maxItems": 1, "items": {
            "type": "object", "required": ["index", "delta", "finish_reason"],
            "properties": {
                "index": {"const": 0}, "finish_reason": {"enum": ["stop", None]},
                "delta": {"type": "object", "additionalProperties": False, "properties": {
                    "role": {"const": "assistant"}, "content": {"type": "string"}}},
            },
        }},
        "usage": ref("Usage"),
        "sources": {"type": "array", "items": ref("AnswerSource")},
    },
}
_CHAT_EVENT = {
    "type": "object", "required": ["data"],
    "properties": {"data": {"anyOf": [{"const": "[DONE]"}, json_data({"anyOf": [_CHUNK, ref("ErrorBody")]})]}},
}


class InvalidMessages(InvalidArgument):
    param = "messages"


def conversation(messages: list[ChatMessage]) -> tuple[str, list[dict[str, str]]]:
    """(question, history): the last user message, and the user and assistant messages before it,
    the most recent HISTORY_WINDOW of them within the service's character bound."""
    last = max((i for i, m in enumerate(messages) if m.role == "user"), default=None)
    if last is None:
        raise InvalidMessages("`messages` must hold a user message: the last one is the question")
    earlier = [{"role": m.role, "content": m.text()} for m in messages[:last] if m.role in ("user", "assistant")]
    history: list[dict[str, str]] = []
    chars = 0
    for message in reversed(earlier):
        chars += len(message["content"])
        if len(history) == HISTORY_WINDOW or chars > MAX_HISTORY_CHARS:
            break
        history.append(message)
    return messages[last].text(), history[::-1]


def token_usage(model: str | None, messages: list[ChatMessage], completion: str) -> dict[str, int]:
    """OpenAI's `usage`: the tokens of the messages as sent and of the content returned, counted with
    the tokenizer of the configured model (RAG_LLM_MODEL) where litellm knows it, else with
    litellm's default (OpenAI's cl100k_base), which is then an estimate. docs/api.md."""
    from litellm import token_counter

    sent = [{"role": m.role, "content": m.text()} for m in messages]
    prompt = token_counter(model=model or "", messages=sent)
    answered = token_counter(model=model or "", text=completion, count_response_tokens=True) if completion else 0
    return {"prompt_tokens": prompt, "completion_tokens": answered, "total_tokens": prompt + answered}


def _knowledge_base(svc: KnowledgeService, principal: Principal, model: str) -> KnowledgeBase:
    try:
        return svc.resolve_kb(principal, model)
    except NotFound:
        raise ModelNotFound(f"The model '{model}' does not exist or you do not have access to it.") from None


def _ask(call: Any, *args: Any, **kwargs: Any) -> Any:
    """The service's call, with its `query` messages said in this surface's words."""
    try:
        return call(*args, **kwargs)
    except InvalidArgument as exc:
        if exc.message.startswith("`query`"):
            raise InvalidMessages(exc.message.replace("`query`", "the last user message", 1)) from None
        raise


@router.post(
    "/chat/completions", response_model=ChatCompletion, summary="OpenAI-compatible chat completion",
    responses={200: stream_doc(_CHAT_EVENT, _STREAM_DOC)},
)
def chat_completions(body: ChatCompletionRequest, svc: Service,
                     principal: Caller) -> JSONResponse | StreamingResponse:
    """A cited answer to the last user message, from the knowledge base `model` names."""
    kb = _knowledge_base(svc, principal, body.model)
    question, history = conversation(body.messages)
    completion_id, created = f"chatcmpl-{secrets.token_hex(12)}", int(time.time())
    chars = svc.settings.retrieve.excerpt_chars
    if not body.stream:
        answer = _ask(svc.ask, principal, question, kb_name=kb.name, history=history)
        payload, text = answer_response(answer, chars)
        return JSONResponse({
            "id": completion_id, "object": "chat.completion", "created": created, "model": body.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": None},
                         "finish_reason": "stop", "logprobs": None}],
            "usage": token_usage(svc.settings.llm_model, body.messages, text), "system_fingerprint": None,
            "sources": payload["sources"],
        })
    release = stream_limiter(svc).acquire(caller_key(principal))  # this endpoint runs on a thread
    try:
        events = _ask(svc.ask_stream, principal, question, kb_name=kb.name, history=history)
    except BaseException:
        release()
        raise
    usage = None
    if body.stream_options and body.stream_options.include_usage:
        usage = partial(token_usage, svc.settings.llm_model, body.messages)
    head = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": body.model}
    return event_stream(_chunks(events, head, chars, usage), sse, svc.settings.http.ping_seconds, on_end=release)


def _chunks(events: Iterator[AnswerEvent], head: dict[str, Any], chars: int,
            usage: Callable[[str], dict[str, int]] | None) -> Iterator[str]:
    def chunk(delta: dict[str, str], finish: str | None = None, **extra: Any) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return sse(head | {"choices": [choice]} | extra)

    yield chunk({"role": "assistant", "content": ""})
    content: list[str] = []  # what the client was sent, for `usage`
    for event in events:
        if event.kind == "delta" and event.text:
            content.append(event.text)
            yield chunk({"content": event.text})
        elif event.kind == "done" and event.answer is not None:
            sources = event.answer.sources
            if sources:
                content.append(f"\n\n{sources_text(sources)}")
                yield chunk({"content": content[-1]})
            yield chunk({}, "stop", sources=[source_payload(s, chars) for s in sources])
    if usage is not None:
        yield sse(head | {"choices": [], "usage": usage("".join(content))})
    yield "data: [DONE]\n\n"


def _card(model_id: str, kb: KnowledgeBase) -> dict[str, Any]:
    created = kb.created_at if kb.created_at.tzinfo else kb.created_at.replace(tzinfo=timezone.utc)
    return {"id": model_id, "object": "model", "created": int(created.timestamp()), "owned_by": "rag"}


@router.get("/models", response_model=ModelList, summary="The caller's knowledge bases, as models")
def list_models(svc: Service, principal: Caller) -> JSONResponse:
    """The default knowledge base as `default`, then every other one the token can see, by name."""
    visible = svc.list_models(principal)
    return JSONResponse({"object": "list", "data": [_card(model_id, kb) for model_id, kb in visible.items()]})


@router.get("/models/{model_id}", response_model=ModelCard, summary="One knowledge base, as a model")
def get_model(model_id: str, svc: Service, principal: Caller) -> JSONResponse:
    kb = _knowledge_base(svc, principal, model_id)
    return JSONResponse(_card(model_id, kb))
