"""The chat model behind synthesis: litellm, with our own retries, fallbacks and one overall deadline.

litellm's built-in retries are switched off so one policy holds for every provider: transient
failures (rate limits, timeouts, 5xx) are retried with exponential backoff, anything else moves on
to the next fallback model at once, and all of it fits inside ``settings.deadline``. The caller
only ever sees ``Unavailable`` with a short, safe message; the details go to the log.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from rag import telemetry
from rag.errors import Unavailable
from rag.settings import LLMSettings, Settings

log = logging.getLogger(__name__)

T = TypeVar("T")

# Looked up by name: BadGatewayError is missing from older litellm releases.
_TRANSIENT_NAMES = (
    "RateLimitError",
    "Timeout",
    "APIConnectionError",
    "InternalServerError",
    "ServiceUnavailableError",
    "BadGatewayError",
)


def _litellm() -> Any:
    """Imported on first call: the import takes seconds, and most commands never talk to a model."""
    import litellm

    # Its "Give Feedback / Get Help" banner and its INFO lines go to stdout, which the CLI and the
    # MCP server own: its records go to our log file instead, warnings and up.
    litellm.suppress_debug_info = True
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
        logger.propagate = True
        logger.setLevel(logging.WARNING)
    return litellm


class _EmptyAnswer(Exception):
    """The model answered with no text: a retry rarely helps, a fallback might."""


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def is_transient(exc: BaseException) -> bool:
    """Worth another attempt on the same model: rate limits, timeouts, lost connections, 5xx."""
    exceptions = _litellm().exceptions
    transient = tuple(getattr(exceptions, name) for name in _TRANSIENT_NAMES if hasattr(exceptions, name))
    if isinstance(exc, transient):
        return True
    status = _status(exc)
    return status is not None and (status == 429 or status >= 500)


def failure_category(exc: BaseException) -> str:
    """A few words for the caller: never the provider's message, which may quote the prompt."""
    if isinstance(exc, _EmptyAnswer):
        return "returned an empty answer"
    exceptions = _litellm().exceptions
    status = _status(exc)
    if isinstance(exc, exceptions.RateLimitError) or status == 429:
        return "rate limited"
    if isinstance(exc, exceptions.Timeout):
        return "timed out"
    if isinstance(exc, exceptions.APIConnectionError):
        return "could not connect"
    if isinstance(exc, (exceptions.AuthenticationError, exceptions.PermissionDeniedError)) or status in (401, 403):
        return "authentication failed"
    if is_transient(exc):
        return "server error"
    if status is not None and 400 <= status < 500:
        return "rejected the request"
    return "failed"


class ChatModel:
    """One main model and its fallbacks, called through litellm."""

    def __init__(self, model: str, settings: LLMSettings) -> None:
        self._model = model
        self.settings = settings
        self.last_model: str | None = None

    @property
    def name(self) -> str:
        return self._model

    @property
    def models(self) -> list[str]:
        return [self._model, *self.settings.fallbacks]

    def complete(self, messages: list[dict[str, str]]) -> str:
        """The whole answer text."""

        def call(model: str, timeout: float) -> str:
            response = self._request(model, messages, timeout, stream=False)
            usage = getattr(response, "usage", None)
            for kind in ("prompt", "completion"):
                tokens = getattr(usage, f"{kind}_tokens", None)
                if isinstance(tokens, int) and tokens > 0:
                    telemetry.count(telemetry.MODEL_TOKENS, model, kind, amount=tokens)
            text = response.choices[0].message.content
            if not text:
                raise _EmptyAnswer(f"{model} returned an empty answer")
            return text

        return self._with_fallbacks(call)

    def stream(self, messages: list[dict[str, str]]) -> Iterator[str]:
        """The answer as non-empty text deltas.

        Retries and fallbacks cover everything up to the first delta; after that a failure ends the
        answer, because starting over would repeat text the caller already has.
        """

        def open_stream(model: str, timeout: float) -> tuple[str, Iterator[str], Any]:
            chunks = self._request(model, messages, timeout, stream=True)
            deltas = _deltas(chunks)
            try:
                first = next(deltas, None)
            except BaseException:
                _close(chunks)
                raise
            if first is None:
                _close(chunks)
                raise _EmptyAnswer(f"{model} returned an empty answer")
            return first, deltas, chunks

        first, deltas, chunks = self._with_fallbacks(open_stream)
        model = self.last_model
        try:
            yield first
            try:
                yield from deltas
            except Exception as exc:  # noqa: BLE001 - logged in full, the caller gets a safe message
                log.error("language model %s stopped mid-answer: %s", model, self._describe(exc, full=True))
                raise Unavailable("the language model stopped in the middle of the answer") from exc
        finally:
            _close(chunks)

    def _request(self, model: str, messages: list[dict[str, str]], timeout: float, *, stream: bool) -> Any:
        s = self.settings
        kwargs: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "temperature": s.temperature,
            "max_tokens": s.max_tokens,
            "timeout": timeout,
            "num_retries": 0,  # the retry policy is ours, see _with_fallbacks
            "stream": stream,
        }
        if s.api_base:
            kwargs["api_base"] = s.api_base
        if s.api_key is not None:
            kwargs["api_key"] = s.api_key.get_secret_value()
        if s.mock_response is not None:
            kwargs["mock_response"] = s.mock_response
        return _litellm().completion(**kwargs)

    def _with_fallbacks(self, call: Callable[[str, float], T]) -> T:
        """`call(model, timeout)` on each model in turn until one succeeds within the deadline."""
        from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

        s = self.settings
        deadline_at = time.monotonic() + s.deadline

        def past_deadline(state: Any) -> bool:
            # Checked after the wait is chosen: no backoff may end beyond the deadline.
            return time.monotonic() + state.upcoming_sleep >= deadline_at

        attempts: dict[str, int] = {}

        def attempt(model: str) -> T:
            # A request never runs past the deadline either, whatever the per-request timeout.
            timeout = max(min(s.timeout, deadline_at - time.monotonic()), 0.001)
            attempts[model] = attempts.get(model, 0) + 1
            if attempts[model] > 1:
                telemetry.count(telemetry.MODEL_RETRIES, model)
            elif model != self._model:
                telemetry.count(telemetry.MODEL_FALLBACKS, model)
            try:
                with telemetry.stage("model"):
                    result = call(model, timeout)
            except Exception as exc:
                telemetry.count(telemetry.MODEL_CALLS, model, "error")
                log.warning("language model %s failed: %s", model, self._describe(exc))
                raise
            telemetry.count(telemetry.MODEL_CALLS, model, "ok")
            return result

        tried: list[str] = []
        last: BaseException | None = None
        for model in self.models:
            if tried and time.monotonic() >= deadline_at:
                break
            tried.append(model)
            retrying = Retrying(
                retry=retry_if_exception(is_transient),
                wait=wait_exponential(multiplier=s.backoff_initial, max=s.backoff_max),
                stop=stop_after_attempt(s.max_attempts) | past_deadline,
                reraise=True,
            )
            try:
                result = retrying(attempt, model)
            except Exception as exc:  # noqa: BLE001 - the next model may still answer
                last = exc
                continue
            self.last_model = model
            return result

        assert last is not None  # the main model is always tried
        category = failure_category(last)
        log.error("language model unavailable after trying %s: %s", ", ".join(tried), self._describe(last, full=True))
        raise Unavailable(f"the language model is unavailable ({category}; tried {', '.join(tried)})") from last

    def _describe(self, exc: BaseException, *, full: bool = False) -> str:
        """The exception for the log, with the API key blanked out should a provider echo it."""
        text = "".join(traceback.format_exception(exc)) if full else f"{type(exc).__name__}: {exc}"
        key = self.settings.api_key.get_secret_value() if self.settings.api_key is not None else ""
        return text.replace(key, "***") if key else text


def _deltas(chunks: Any) -> Iterator[str]:
    for chunk in chunks:
        if not chunk.choices:
            continue  # usage-only chunks
        text = chunk.choices[0].delta.content
        if text:
            yield text


def _close(chunks: Any) -> None:
    """Release the HTTP connection of a stream the caller abandoned or that failed."""
    close = getattr(chunks, "close", None)
    if callable(close):
        try:
            close()
        except Exception:  # noqa: BLE001 - cleanup must not hide the real outcome
            log.debug("closing the model stream failed", exc_info=True)


def build_chat_model(settings: Settings) -> ChatModel | None:
    """None without ``RAG_LLM_MODEL``: synthesis then answers extractively."""
    if not settings.llm_model:
        return None
    return ChatModel(settings.llm_model, settings.llm)
