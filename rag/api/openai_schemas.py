"""The OpenAI Chat Completions request, as far as a knowledge base can honour it.

Every field of OpenAI's request is accepted, so a chat app that sends its usual options (a
temperature, a max_tokens, a user id) works unchanged; those that do not apply to a cited answer
are ignored. Anything else is refused (422), as everywhere in this API.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rag.api.arguments import Strict
from rag.api.schemas import AnswerSource


class ContentPart(BaseModel):
    """A part of a message's content; only `text` parts carry what a knowledge base can read."""

    model_config = ConfigDict(extra="allow")
    type: str
    text: str | None = None


class ChatMessage(Strict):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    function_call: dict[str, Any] | None = None
    refusal: str | None = None
    audio: dict[str, Any] | None = None

    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(part.text or "" for part in self.content if part.type == "text")
        return self.content or ""


class StreamOptions(Strict):
    include_usage: bool | None = None
    include_obfuscation: bool | None = None


_IGNORED = "Accepted for compatibility and ignored."


class ChatCompletionRequest(Strict):
    model: str = Field(min_length=1, max_length=255, description="A knowledge base, as GET /v1/models lists them.")
    messages: list[ChatMessage] = Field(
        min_length=1, description="The conversation: the last user message is the question, the ones before it "
        "the conversation it follows (the most recent 10 are used).",
    )
    stream: bool | None = Field(False, description="Stream chat.completion.chunk objects as Server-Sent Events.")
    stream_options: StreamOptions | None = None
    n: int | None = Field(None, ge=1, le=1, description="One answer per request.")
    user: str | None = None
    # Sampling and tool options: a cited answer is made from the retrieved excerpts, not sampled.
    temperature: float | None = Field(None, description=_IGNORED)
    top_p: float | None = Field(None, description=_IGNORED)
    max_tokens: int | None = Field(None, description=_IGNORED)
    max_completion_tokens: int | None = Field(None, description=_IGNORED)
    stop: str | list[str] | None = Field(None, description=_IGNORED)
    presence_penalty: float | None = Field(None, description=_IGNORED)
    frequency_penalty: float | None = Field(None, description=_IGNORED)
    logit_bias: dict[str, float] | None = Field(None, description=_IGNORED)
    logprobs: bool | None = Field(None, description=_IGNORED)
    top_logprobs: int | None = Field(None, description=_IGNORED)
    seed: int | None = Field(None, description=_IGNORED)
    response_format: dict[str, Any] | None = Field(None, description=_IGNORED)
    tools: list[dict[str, Any]] | None = Field(None, description=_IGNORED)
    tool_choice: str | dict[str, Any] | None = Field(None, description=_IGNORED)
    parallel_tool_calls: bool | None = Field(None, description=_IGNORED)
    functions: list[dict[str, Any]] | None = Field(None, description=_IGNORED)
    function_call: str | dict[str, Any] | None = Field(None, description=_IGNORED)
    metadata: dict[str, str] | None = Field(None, description=_IGNORED)
    store: bool | None = Field(None, description=_IGNORED)
    service_tier: str | None = Field(None, description=_IGNORED)
    reasoning_effort: str | None = Field(None, description=_IGNORED)
    verbosity: str | None = Field(None, description=_IGNORED)
    modalities: list[str] | None = Field(None, description=_IGNORED)
    audio: dict[str, Any] | None = Field(None, description=_IGNORED)
    prediction: dict[str, Any] | None = Field(None, description=_IGNORED)
    web_search_options: dict[str, Any] | None = Field(None, description=_IGNORED)
    prompt_cache_key: str | None = Field(None, description=_IGNORED)
    safety_identifier: str | None = Field(None, description=_IGNORED)


class AssistantMessage(BaseModel):
    role: Literal["assistant"]
    content: str = Field(description="The answer with its [n] citations, a blank line, then `Sources:` lines.")
    refusal: str | None = None


class Choice(BaseModel):
    index: int
    message: AssistantMessage
    finish_reason: Literal["stop"]
    logprobs: None = None


class Usage(BaseModel):
    """Not counted: the extractive answer uses no model, and a model's counts stay with litellm."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[Choice]
    usage: Usage
    system_fingerprint: str | None = None
    sources: list[AnswerSource] = Field(description="Beyond OpenAI's fields: the cited sources in citation order.")


class ModelCard(BaseModel):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str


class ModelList(BaseModel):
    object: Literal["list"]
    data: list[ModelCard]
