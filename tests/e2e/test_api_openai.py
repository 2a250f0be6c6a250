"""The OpenAI-compatible endpoints, driven by the official `openai` package over a real socket,
with a language model configured (litellm's mock_response stands in for it, the only fake)."""

from __future__ import annotations

import json
import re
from typing import Any

import openai
import pytest

from rag.settings import LLMSettings, Settings

from ..support.api_support import LEAVE_QUESTION, live_api, sse_events

pytestmark = pytest.mark.filterwarnings("ignore:.*ReadOnly. qualifier:UserWarning")

REPLY = "New employees earn 4 hours of annual leave a pay period [3]. It grows with service [1][99]."
LEAVE_DOC = "fs:default:default:travel-and-leave/leave.md"


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    root = tmp_path_factory.mktemp("api-openai")
    settings = Settings(
        home=root / "home", llm_model="openai/gpt-4o-mini",
        llm=LLMSettings(mock_response=REPLY, backoff_initial=0.01, backoff_max=0.02),
    )
    yield from live_api(root, settings)


@pytest.fixture
def reply(api, monkeypatch: pytest.MonkeyPatch):
    """Make the model answer something else (or fail) for one test."""

    def set_reply(text: str, **llm: Any) -> None:
        model = api.svc.chat_model
        monkeypatch.setattr(model, "settings", model.settings.model_copy(update={"mock_response": text, **llm}))

    return set_reply


def client_for(api, who: str = "viewer") -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{api.url}/v1", api_key=api.tokens[who], max_retries=0, timeout=120)


def test_models_are_the_callers_knowledge_bases(api):
    assert [m.id for m in client_for(api, "admin").models.list()] == ["default", "cafeteria"]
    assert [m.id for m in client_for(api, "folder").models.list()] == ["default"]  # its folder is in default
    assert client_for(api).models.retrieve("cafeteria").owned_by == "rag"
    with pytest.raises(openai.NotFoundError) as missing:
        client_for(api, "folder").models.retrieve("cafeteria")  # exists, but not for this token
    assert missing.value.code == "model_not_found" and missing.value.param == "model"


def test_chat_completion_answers_with_citations_and_sources(api, calls):
    completion = client_for(api).chat.completions.create(
        model="default", messages=[{"role": "user", "content": LEAVE_QUESTION}],
        temperature=0.2, max_tokens=300, user="someone",  # a chat app's usual options are accepted
    )
    assert completion.object == "chat.completion" and completion.model == "default"
    choice = completion.choices[0]
    assert choice.finish_reason == "stop" and choice.message.role == "assistant"
    answer, sources_block = choice.message.content.split("\n\nSources:\n")
    # The model cited excerpts [3], [1] and [99]: sources are numbered by document in order of first
    # citation, and [99], which matches no excerpt, is gone.
    assert answer.startswith("New employees earn 4 hours of annual leave a pay period [1]. It grows with service [")
    assert "[99]" not in answer and "[3]" not in answer
    sources = completion.model_extra["sources"]
    numbers = sorted({int(n) for n in re.findall(r"\[(\d+)\]", answer)})
    assert numbers == list(range(1, len(sources) + 1))
    lines = sources_block.splitlines()
    assert [line.split("] ", 1)[0] for line in lines] == [f"[{n}" for n in numbers]
    assert all(f"({s['document_id']}, score " in line for s, line in zip(sources, lines))
    assert sources[0]["excerpts"][0]["char_end"] > sources[0]["excerpts"][0]["char_start"]
    assert len(calls) == 1 and calls[0]["messages"][1]["content"].count('<excerpt n="') >= 3


def test_streamed_chat_matches_the_whole_one(api):
    client = client_for(api)
    messages = [{"role": "user", "content": LEAVE_QUESTION}]
    whole = client.chat.completions.create(model="default", messages=messages)
    chunks = list(client.chat.completions.create(
        model="default", messages=messages, stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    final = [c for c in chunks if c.choices and c.choices[0].finish_reason == "stop"]
    assert len(final) == 1 and final[0].model_extra["sources"] == whole.model_extra["sources"]
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert len({c.id for c in chunks}) == 1 and chunks[0].object == "chat.completion.chunk"


def test_earlier_messages_are_the_conversation(api, calls, reply):
    reply("How much sick leave do employees earn each pay period?")
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Tell me about annual leave."},
        {"role": "assistant", "content": "You earn it every pay period [1].\n\nSources:\n[1] Leave types (x)"},
        {"role": "user", "content": [{"type": "text", "text": "And sick leave?"}]},
    ]
    client_for(api).chat.completions.create(model="default", messages=messages)
    rewrite = calls[0]["messages"][1]["content"]
    assert "Tell me about annual leave." in rewrite and "And sick leave?" in rewrite
    assert "You are a helpful assistant." not in rewrite  # system messages are not conversation
    assert "sick leave" in calls[1]["messages"][1]["content"].lower()  # retrieval used the rewrite


def test_bad_chat_requests_are_openai_errors(api):
    client = client_for(api)
    with pytest.raises(openai.NotFoundError) as unknown:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert unknown.value.code == "model_not_found" and "gpt-4o" in unknown.value.body["message"]
    with pytest.raises(openai.BadRequestError) as no_question:
        client.chat.completions.create(model="default", messages=[{"role": "system", "content": "hi"}])
    assert no_question.value.param == "messages"
    with pytest.raises(openai.BadRequestError) as long_question:
        client.chat.completions.create(model="default", messages=[{"role": "user", "content": "x" * 4001}])
    assert long_question.value.body["message"] == "the last user message must be at most 4000 characters"
    with pytest.raises(openai.UnprocessableEntityError) as two:
        client.chat.completions.create(model="default", messages=[{"role": "user", "content": "hi"}], n=2)
    assert two.value.param == "n"
    with pytest.raises(openai.UnprocessableEntityError) as unknown_field:
        client.chat.completions.create(model="default", messages=[{"role": "user", "content": "hi"}],
                                       extra_body={"temprature": 1})
    assert unknown_field.value.body["message"] == "unknown field `temprature`"
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{api.url}/v1", api_key="rag_wrong", max_retries=0).models.list()


def test_a_model_that_fails_mid_stream_ends_with_an_error_event(api, reply):
    reply("litellm.RateLimitError", max_attempts=1)
    client = client_for(api)
    stream = client.chat.completions.create(
        model="default", messages=[{"role": "user", "content": LEAVE_QUESTION}], stream=True)
    first = next(iter(stream))
    assert first.choices[0].delta.role == "assistant"  # the stream had started: 200 and a first chunk
    with pytest.raises(openai.APIError) as failed:
        list(stream)
    assert failed.value.message.startswith("the language model is unavailable (rate limited")
    assert "Traceback" not in failed.value.message and "annual leave" not in failed.value.message
    with pytest.raises(openai.InternalServerError) as whole:  # 503, not streamed
        client.chat.completions.create(model="default", messages=[{"role": "user", "content": LEAVE_QUESTION}])
    assert whole.value.status_code == 503

    with api.client("viewer") as http, http.stream("POST", "/v1/ask", json={"query": LEAVE_QUESTION, "stream": True}) as response:
        assert response.status_code == 200
        events = sse_events(response)
    assert [name for name, _ in events] == ["error"]
    error = json.loads(events[0][1])["error"]
    assert error["code"] == "unavailable" and error["type"] == "service_unavailable"


def test_ask_with_the_model_streams_its_deltas(api):
    with api.client("viewer") as http, http.stream("POST", "/v1/ask", json={"query": LEAVE_QUESTION, "stream": True}) as response:
        events = sse_events(response)
    deltas = [json.loads(data)["text"] for name, data in events if name == "delta"]
    done = json.loads(events[-1][1])
    assert len(deltas) > 1 and "".join(deltas) == done["answer"] and done["synthesizer"] == "llm:openai/gpt-4o-mini"
    assert done["answer"].startswith("New employees earn 4 hours of annual leave a pay period [1].")
    assert "[99]" not in done["answer"] and len(done["sources"]) >= 1
