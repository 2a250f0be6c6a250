"""The chat model client: retries, fallbacks, the deadline and safe errors, on litellm's own mock path.

No network is needed: every call goes through the real ``litellm.completion`` with a
``mock_response``, which litellm turns into a text answer, a stream, or a raised exception. The
``script`` fixture picks a different ``mock_response`` per call to play a sequence of outcomes.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import litellm
import pytest

from rag.errors import Unavailable
from rag.models.llm import ChatModel, build_chat_model
from rag.settings import LLMSettings, Settings

MAIN = "gpt-4o-mini"
FALLBACK = "gpt-4o"
KEY = "sk-test-SECRET"
PROMPT = "What is the travel allowance for Zanzibar?"
MESSAGES = [{"role": "user", "content": PROMPT}]
RATE_LIMITED = "litellm.RateLimitError"

# litellm's own response types trip this pydantic warning the first time they are built: noise here.
pytestmark = pytest.mark.filterwarnings("ignore:.*ReadOnly. qualifier:UserWarning")


def llm_settings(**overrides: Any) -> LLMSettings:
    # Tiny waits keep the retry tests fast; the schedule's shape is what is under test.
    values: dict[str, Any] = {"api_key": KEY, "backoff_initial": 0.01, "backoff_max": 0.02, "max_attempts": 3}
    return LLMSettings(**(values | overrides))


@dataclass
class StopsAfterFirstDelta:
    """A scripted stream that yields its first delta, then loses the connection."""

    text: str


Script = Callable[..., list[dict[str, Any]]]


@pytest.fixture
def script(monkeypatch: pytest.MonkeyPatch) -> Script:
    """`script(r1, r2, ...)` answers call n with r_n (the last one repeats); a dict scripts per model.

    Returns the list of keyword arguments each call received.
    """
    original = litellm.completion

    def install(*responses: Any) -> list[dict[str, Any]]:
        calls: list[dict[str, Any]] = []

        def completion(**kwargs: Any) -> Any:
            calls.append(kwargs)
            if isinstance(responses[0], dict):
                own = responses[0][kwargs["model"]]
                n = sum(1 for c in calls if c["model"] == kwargs["model"])
            else:
                own, n = responses, len(calls)
            response = own[min(n, len(own)) - 1]
            if isinstance(response, StopsAfterFirstDelta):
                return _stops_after_first(original(**{**kwargs, "mock_response": response.text}), kwargs["model"])
            return original(**{**kwargs, "mock_response": response})

        monkeypatch.setattr(litellm, "completion", completion)
        return calls

    return install


def _stops_after_first(chunks: Any, model: str) -> Any:
    yield next(iter(chunks))
    raise litellm.exceptions.APIConnectionError(message="connection reset", llm_provider="openai", model=model)


def test_complete_and_stream_give_the_same_text() -> None:
    model = ChatModel(MAIN, llm_settings(mock_response="Up to 75 dollars a day, see excerpt [1]."))
    text = model.complete(MESSAGES)
    deltas = list(model.stream(MESSAGES))
    assert text == "Up to 75 dollars a day, see excerpt [1]."
    assert len(deltas) > 1 and all(isinstance(d, str) and d for d in deltas)
    assert "".join(deltas) == text
    assert model.name == MAIN and model.last_model == MAIN


def test_request_parameters(script: Script) -> None:
    calls = script("ok")
    settings = llm_settings(api_base="http://localhost:11434", temperature=0.3, max_tokens=200, timeout=7.0)
    ChatModel(MAIN, settings).complete(MESSAGES)
    (call,) = calls
    assert call["model"] == MAIN and call["messages"] == MESSAGES
    assert call["num_retries"] == 0  # tenacity retries, litellm must not
    assert call["api_key"] == KEY and call["api_base"] == "http://localhost:11434"
    assert call["temperature"] == 0.3 and call["max_tokens"] == 200 and call["stream"] is False
    assert 0 < call["timeout"] <= 7.0


@pytest.mark.parametrize(
    "failure",
    [
        RATE_LIMITED,
        "litellm.InternalServerError",
        litellm.exceptions.Timeout(message="timed out", llm_provider="openai", model=MAIN),
        litellm.exceptions.APIConnectionError(message="refused", llm_provider="openai", model=MAIN),
        litellm.exceptions.ServiceUnavailableError(message="busy", llm_provider="openai", model=MAIN),
        litellm.exceptions.APIError(status_code=529, message="overloaded", llm_provider="anthropic", model=MAIN),
    ],
    ids=["rate-limit", "internal", "timeout", "connection", "unavailable", "status-529"],
)
def test_transient_failures_are_retried(script: Script, failure: Any) -> None:
    calls = script(failure, failure, "Seventy-five dollars.")
    assert ChatModel(MAIN, llm_settings()).complete(MESSAGES) == "Seventy-five dollars."
    assert len(calls) == 3


def test_persistent_failure_gives_a_safe_message(script: Script, caplog: pytest.LogCaptureFixture) -> None:
    calls = script(RATE_LIMITED)
    with caplog.at_level(logging.WARNING, logger="rag.models.llm"), pytest.raises(Unavailable) as info:
        ChatModel(MAIN, llm_settings(max_attempts=4)).complete(MESSAGES)
    assert len(calls) == 4
    message = str(info.value)
    assert message == f"the language model is unavailable (rate limited; tried {MAIN})"
    assert KEY not in message and PROMPT not in message and "Traceback" not in message
    levels = [r.levelname for r in caplog.records if r.name == "rag.models.llm"]
    assert levels == ["WARNING"] * 4 + ["ERROR"]
    assert KEY not in caplog.text


@pytest.mark.parametrize(
    ("failure", "category"),
    [
        (litellm.exceptions.AuthenticationError(message="bad key", llm_provider="openai", model=MAIN),
         "authentication failed"),
        ("litellm.ContextWindowExceededError", "rejected the request"),
        (litellm.exceptions.NotFoundError(message="no such model", llm_provider="openai", model=MAIN),
         "rejected the request"),
        ("", "returned an empty answer"),
    ],
    ids=["auth", "context-window", "not-found", "empty"],
)
def test_non_transient_failure_is_not_retried(script: Script, failure: Any, category: str) -> None:
    calls = script(failure, "never reached")
    with pytest.raises(Unavailable, match=f"^the language model is unavailable \\({category}; tried {MAIN}\\)$"):
        ChatModel(MAIN, llm_settings()).complete(MESSAGES)
    assert len(calls) == 1


def test_fallback_answers_when_the_main_model_fails(script: Script) -> None:
    calls = script({MAIN: [RATE_LIMITED], FALLBACK: ["From the fallback."]})
    model = ChatModel(MAIN, llm_settings(fallbacks=[FALLBACK]))
    assert model.complete(MESSAGES) == "From the fallback."
    assert model.last_model == FALLBACK and model.name == MAIN
    assert [c["model"] for c in calls] == [MAIN, MAIN, MAIN, FALLBACK]


def test_fallback_follows_a_non_transient_failure_at_once(script: Script) -> None:
    auth = litellm.exceptions.AuthenticationError(message="bad key", llm_provider="openai", model=MAIN)
    calls = script({MAIN: [auth], FALLBACK: [RATE_LIMITED]})
    with pytest.raises(Unavailable) as info:
        ChatModel(MAIN, llm_settings(fallbacks=[FALLBACK])).complete(MESSAGES)
    assert [c["model"] for c in calls] == [MAIN, FALLBACK, FALLBACK, FALLBACK]
    assert str(info.value) == f"the language model is unavailable (rate limited; tried {MAIN}, {FALLBACK})"


def test_deadline_cuts_the_backoff_schedule_short(script: Script) -> None:
    # Waits would be 0.4, 0.8, 1.6...: after the first wait the next one would end past the 1 s
    # deadline, so it gives up after two calls instead of ten, without sleeping past the deadline.
    calls = script(RATE_LIMITED)
    settings = llm_settings(deadline=1.0, backoff_initial=0.4, backoff_max=10.0, max_attempts=10)
    start = time.monotonic()
    with pytest.raises(Unavailable, match="rate limited"):
        ChatModel(MAIN, settings).complete(MESSAGES)
    elapsed = time.monotonic() - start
    assert len(calls) == 2
    assert 0.4 <= elapsed < 1.0
    assert all(c["timeout"] <= 1.0 for c in calls)  # no request may outlive the deadline either


def test_stream_failing_mid_answer_is_not_retried(script: Script) -> None:
    calls = script(StopsAfterFirstDelta("Seventy-five dollars a day."), "never reached")
    deltas: list[str] = []
    with pytest.raises(Unavailable, match="^the language model stopped in the middle of the answer$"):
        for delta in ChatModel(MAIN, llm_settings()).stream(MESSAGES):
            deltas.append(delta)
    assert deltas == ["Sev"]  # litellm's mock streams three characters at a time
    assert len(calls) == 1 and calls[0]["stream"] is True


def test_stream_failing_before_the_first_delta_is_retried(script: Script) -> None:
    # The first fails when the request is made, the second once the stream is read.
    calls = script(RATE_LIMITED, "Exception: mock_streaming_error", "Seventy-five dollars.")
    model = ChatModel(MAIN, llm_settings())
    assert "".join(model.stream(MESSAGES)) == "Seventy-five dollars."
    assert len(calls) == 3


def test_stream_falls_back_and_gives_up_like_complete(script: Script) -> None:
    calls = script({MAIN: ["Exception: mock_streaming_error"], FALLBACK: ["From the fallback."]})
    model = ChatModel(MAIN, llm_settings(fallbacks=[FALLBACK]))
    assert "".join(model.stream(MESSAGES)) == "From the fallback."
    assert model.last_model == FALLBACK
    assert len(calls) == 4

    script(RATE_LIMITED)
    with pytest.raises(Unavailable, match=f"rate limited; tried {MAIN}, {FALLBACK}"):
        list(model.stream(MESSAGES))


def test_build_chat_model(tmp_path: Any) -> None:
    assert build_chat_model(Settings(home=tmp_path)) is None
    model = build_chat_model(Settings(home=tmp_path, llm_model=MAIN, llm=LLMSettings(fallbacks=[FALLBACK])))
    assert model is not None and model.name == MAIN and model.models == [MAIN, FALLBACK]


def test_import_leaves_litellm_unloaded() -> None:
    code = "import sys, rag.models.llm; print('litellm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
