"""The model path over real HTTP: litellm's own OpenAI provider, HTTP client and SSE parsing talk to a
loopback OpenAI-compatible server (tests/support/llm_server.py) that plays scripted replies, through the real
service, the HTTP API (POST /v1/ask, the OpenAI-compatible chat completions with the `openai`
package) and the judge of `rag eval run`.

Nothing is mocked inside the process: retries, fallbacks, the deadline, a stream cut mid-answer and
a model that declines are all what the server did. Tests wait on the server's recorded requests,
never on a sleep.
"""

from __future__ import annotations

import json
import logging
import re
import time
from typing import Any, Iterator

import openai
import pytest

from rag.errors import Unavailable
from rag.models.llm import ChatModel
from rag.service import KnowledgeService, Principal
from rag.settings import LLMSettings, Settings
from rag.synthesize.types import ABSTENTION, Answer, AnswerEvent

from ..support.api_support import LEAVE_QUESTION, live_api, sse_events
from ..support.llm_server import Cut, Drip, LLMServer, Recorded, Slow, Status, Stream, Text

pytestmark = pytest.mark.filterwarnings("ignore:.*ReadOnly. qualifier:UserWarning")

KEY = "sk-test-http-SECRET"
MAIN, FALLBACK = "openai/main-model", "openai/fallback-model"  # the server sees them without "openai/"
READER = Principal.local_admin("default")
QUESTION = "How much annual leave and sick leave do employees earn each pay period?"
DOCS = {
    "annual-leave.md": "# Annual leave\n\nFull-time employees earn four hours of annual leave every pay period. "
                       "Unused annual leave carries over to the next leave year, up to 240 hours.\n",
    "sick-leave.md": "# Sick leave\n\nEvery employee earns four hours of sick leave each pay period, whatever "
                     "their length of service. Sick leave has no carry-over limit.\n",
    "parking.md": "# Parking\n\nParking at the Zephyr office is free for employees with a green permit.\n",
}
# Cites excerpt 2 first, then 1 and 99 (no such excerpt), then 2 and 1 together.
REPLY = "Employees earn four hours of annual leave a pay period [2]. Sick leave also accrues [1][99]. Both [2, 1]."
_EXCERPT = re.compile(r'<excerpt n="(\d+)" document="([^"]*)"')


# -- fixtures and helpers ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def llm() -> Iterator[LLMServer]:
    with LLMServer() as server:
        yield server


@pytest.fixture
def server(llm: LLMServer) -> Iterator[LLMServer]:
    """The module's server with an empty script and no requests, for one test."""
    llm.reset()
    yield llm
    llm.reset()


def llm_settings(server: LLMServer, **overrides: Any) -> LLMSettings:
    values: dict[str, Any] = {
        "api_base": f"{server.url}/v1", "api_key": KEY, "backoff_initial": 0.01, "backoff_max": 0.02,
        "max_attempts": 2, "timeout": 10.0, "deadline": 20.0,
    }
    return LLMSettings(**(values | overrides))


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """Three small published documents in a home of their own (no model configured yet)."""
    root = tmp_path_factory.mktemp("llm-http")
    pages = root / "pages"
    pages.mkdir()
    for name, text in DOCS.items():
        (pages / name).write_text(text)
    settings = Settings(home=root / "home")
    with KnowledgeService(settings) as writer:
        writer.ensure_workspace("default")
        assert not writer.ingest_directory(READER, pages).failed
    return settings


def service(home: Settings, server: LLMServer, **llm: Any) -> KnowledgeService:
    configured = home.model_copy(update={"llm_model": MAIN, "llm": llm_settings(server, **llm)})
    return KnowledgeService(configured, writer=False)


def excerpt_titles(request: Recorded) -> dict[int, str]:
    """Excerpt number -> document title, as the answer prompt that the server received numbered them."""
    return {int(n): title for n, title in _EXCERPT.findall(request.messages[-1]["content"])}


def expected_titles(request: Recorded, cited: list[int]) -> list[str]:
    """The sources' titles for excerpts cited in this order: one per document, first citation first."""
    titles = excerpt_titles(request)
    return list(dict.fromkeys(titles[n] for n in cited if n in titles))


def pieces(text: str, size: int = 3) -> list[str]:
    """The text as small deltas, so citations and words are split across SSE events."""
    return [text[i:i + size] for i in range(0, len(text), size)]


def streamed(events: Iterator[AnswerEvent]) -> tuple[str, Answer]:
    collected = list(events)
    assert [e.kind for e in collected[-2:]] == ["sources", "done"]
    assert {e.kind for e in collected[:-2]} == {"delta"}
    return "".join(e.text for e in collected if e.kind == "delta"), collected[-1].answer


def same_sources(a: Answer, b: Answer) -> bool:
    def key(answer: Answer) -> list[tuple[int, str, list[int]]]:
        return [(s.number, s.source_id, [h.chunk_id for h in s.hits]) for s in answer.sources]

    return key(a) == key(b)


# -- the service over HTTP ------------------------------------------------------------------------------


def test_answer_is_renumbered_and_cites_its_sources_in_order(home, server):
    server.script(Text(REPLY))
    with service(home, server) as svc:
        answer = svc.ask(READER, QUESTION)
    (request,) = server.requests
    assert request.path == "/v1/chat/completions" and request.model == "main-model" and not request.stream
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert [m["role"] for m in request.messages] == ["system", "user"]
    assert ABSTENTION in request.messages[0]["content"]  # the prompt spells out the sentence to decline with
    assert QUESTION in request.messages[1]["content"] and len(excerpt_titles(request)) >= 2
    assert answer.synthesizer == "llm:openai/main-model" and not answer.abstained
    # Excerpt 2's document is cited first, so it is [1]; [99] matches no excerpt and is gone.
    assert answer.text == (
        "Employees earn four hours of annual leave a pay period [1]. Sick leave also accrues [2]. Both [1][2]."
    )
    assert [s.title for s in answer.sources] == expected_titles(request, [2, 1])
    assert [s.number for s in answer.sources] == [1, 2]


def test_streamed_answer_is_the_whole_answer(home, server):
    server.script(Text(REPLY), Stream(pieces(REPLY)))
    with service(home, server) as svc:
        whole = svc.ask(READER, QUESTION)
        text, answer = streamed(svc.ask_stream(READER, QUESTION))
    assert [r.stream for r in server.requests] == [False, True]
    assert text == answer.text == whole.text and same_sources(answer, whole)
    assert answer.synthesizer == whole.synthesizer == "llm:openai/main-model"


@pytest.mark.parametrize("failure", [Status(429, retry_after="1"), Status(500)], ids=["429-retry-after", "500"])
def test_a_transient_failure_is_retried(home, server, failure, caplog):
    server.script(failure, Text(REPLY), failure, Stream(pieces(REPLY)))
    with caplog.at_level(logging.WARNING, logger="rag.models.llm"), service(home, server) as svc:
        whole = svc.ask(READER, QUESTION)
        assert len(server.requests) == 2  # one failure, one retry: litellm itself retried nothing
        text, answer = streamed(svc.ask_stream(READER, QUESTION))
    assert len(server.requests) == 4 and [r.model for r in server.requests] == ["main-model"] * 4
    assert whole.text.startswith("Employees earn four hours") and whole.sources
    assert text == answer.text == whole.text
    # The retries were ours (rag.models.llm's policy), one warning for each failed attempt.
    retried = [r for r in caplog.records if r.name == "rag.models.llm" and "failed" in r.getMessage()]
    assert len(retried) == 2 and KEY not in caplog.text


def model_counts() -> dict[tuple[str, str, str], float]:
    from prometheus_client import REGISTRY

    counts = {}
    for family in REGISTRY.collect():
        for sample in family.samples:
            if sample.name.startswith("rag_model_"):
                counts[(sample.name, sample.labels["model"], sample.labels.get("outcome", sample.labels.get("kind", "")))] \
                    = sample.value
            elif sample.name == "rag_stage_duration_seconds_count" and sample.labels["stage"] == "model":
                counts[(sample.name, "model", "")] = sample.value
    return counts


def test_persistent_failure_falls_back_to_the_next_model(home, server):
    server.script(Status(500), Status(503), Status(500), Status(503), model="main-model")
    server.script(Text(REPLY), Stream(pieces(REPLY)), model="fallback-model")
    before = model_counts()
    with service(home, server, fallbacks=[FALLBACK]) as svc:
        whole = svc.ask(READER, QUESTION)
        text, answer = streamed(svc.ask_stream(READER, QUESTION))
    models = [r.model for r in server.requests]
    assert models == ["main-model", "main-model", "fallback-model"] * 2
    # What /metrics shows (rag/telemetry.py): each call, retry and fallback, and the tokens reported.
    grown = {key: value - before.get(key, 0.0) for key, value in model_counts().items()}
    assert {key: value for key, value in grown.items() if value and not key[0].endswith("tokens_total")} == {
        ("rag_model_calls_total", MAIN, "error"): 4, ("rag_model_retries_total", MAIN, ""): 2,
        ("rag_model_fallbacks_total", FALLBACK, ""): 2, ("rag_model_calls_total", FALLBACK, "ok"): 2,
        ("rag_stage_duration_seconds_count", "model", ""): 6,
    }
    assert grown[("rag_model_tokens_total", FALLBACK, "prompt")] > 100  # the whole answer's (the stream's unreported)
    fallback = server.requests[2]
    assert fallback.headers["authorization"] == f"Bearer {KEY}" and fallback.messages == server.requests[0].messages
    assert whole.synthesizer == answer.synthesizer == "llm:openai/fallback-model"
    assert whole.sources and text == answer.text == whole.text


def test_a_slow_model_is_a_clean_unavailable_within_the_deadline(home, server):
    server.script(*[Slow(60)] * 4)  # the server stops waiting when it stops: nothing lingers
    with service(home, server, timeout=0.4, deadline=1.0, max_attempts=2) as svc:
        for call in (lambda: svc.ask(READER, QUESTION), lambda: list(svc.ask_stream(READER, QUESTION))):
            started = time.monotonic()
            with pytest.raises(Unavailable) as failure:
                call()
            assert time.monotonic() - started < 5
            message = failure.value.message
            assert message == "the language model is unavailable (timed out; tried openai/main-model)"
            assert "leave" not in message and "Traceback" not in message and KEY not in message
        outcomes = [a.outcome for a in svc.activity(READER, 5) if a.action == "ask"]
    assert outcomes[:2] == ["unavailable", "unavailable"]
    assert 2 <= len(server.requests) <= 4


def test_a_stream_cut_mid_answer_ends_with_unavailable(home, server):
    server.script(Cut(["Employees earn ", "four hours ", "of annual"]))
    with service(home, server) as svc:
        events = svc.ask_stream(READER, QUESTION)
        deltas: list[str] = []
        with pytest.raises(Unavailable) as failure:
            for event in events:
                assert event.kind == "delta"  # never sources or done
                deltas.append(event.text)
    assert "".join(deltas).startswith("Employees earn")
    assert failure.value.message == "the language model stopped in the middle of the answer"
    assert len(server.requests) == 1  # text was already out: no retry, which would repeat it


DECLINES = [
    ABSTENTION,
    f"{ABSTENTION} [1]",
    "The knowledge base has nothing on this question",
    "  the knowledge base has nothing on this question!\n",
    f'"{ABSTENTION}" [2][99]',
    f"**{ABSTENTION}**",
]


@pytest.mark.parametrize("reply", DECLINES, ids=range(len(DECLINES)))
def test_a_model_that_declines_abstains_with_no_sources(home, server, reply):
    server.script(Text(reply), Stream(pieces(reply, 4)))
    with service(home, server) as svc:
        whole = svc.ask(READER, QUESTION)
        text, answer = streamed(svc.ask_stream(READER, QUESTION))
    for declined in (whole, answer):
        assert declined.abstained and declined.sources == [] and declined.text == ABSTENTION
        assert declined.synthesizer == "llm:openai/main-model"
    assert text == ABSTENTION  # the held-back opening never streamed as anything else


@pytest.mark.parametrize("reply", [
    f"{ABSTENTION[:-1]}, but annual leave is four hours a pay period [1].",
    "The knowledge base says four hours a pay period [1].",
    "The",
], ids=["more-than-the-sentence", "same-opening", "one-word"])
def test_an_answer_that_only_starts_like_the_sentence_is_an_answer(home, server, reply):
    server.script(Text(reply), Stream(pieces(reply, 4)))
    with service(home, server) as svc:
        whole = svc.ask(READER, QUESTION)
        text, answer = streamed(svc.ask_stream(READER, QUESTION))
    assert not whole.abstained and not answer.abstained
    assert text == answer.text == whole.text == reply and same_sources(answer, whole)
    assert bool(whole.sources) == ("[1]" in reply)


def test_the_api_base_can_come_from_the_environment(home, server, monkeypatch):
    monkeypatch.setenv("RAG_HOME", str(home.home))
    monkeypatch.setenv("RAG_LLM_MODEL", MAIN)
    monkeypatch.setenv("RAG_LLM__API_BASE", f"{server.url}/v1")
    monkeypatch.setenv("RAG_LLM__API_KEY", KEY)
    monkeypatch.setenv("RAG_LLM__BACKOFF_INITIAL", "0.01")
    monkeypatch.setenv("RAG_LLM__BACKOFF_MAX", "0.02")
    settings = Settings()
    assert settings.llm.api_base == f"{server.url}/v1" and settings.home == home.home
    server.script(Status(429, retry_after="1"), Text(REPLY))
    with KnowledgeService(settings, writer=False) as svc:
        answer = svc.ask(READER, QUESTION)
    assert answer.text.startswith("Employees earn four hours") and answer.sources
    assert [r.headers["authorization"] for r in server.requests] == [f"Bearer {KEY}"] * 2


def test_the_eval_judge_reads_its_verdicts_from_the_server(server):
    from evals.support import model_entails, support_scores

    server.script(Text("Yes."), Text("**No** - the premise says nothing about it."))
    entails = model_entails(ChatModel("openai/judge-model", llm_settings(server)))
    premises = {1: "Employees earn four hours of annual leave each pay period.", 2: "Parking is free."}
    scores = support_scores("Employees earn four hours a pay period [1]. Parking costs 5 dollars [2].",
                            premises, entails)
    assert scores == {"support_recall": 0.5, "support_precision": 0.5, "sentences": 2}
    first, second = server.wait_for(2)
    assert first.model == second.model == "judge-model"
    assert premises[1] in first.messages[1]["content"] and "Parking costs 5 dollars" in second.messages[1]["content"]


# -- the HTTP API over HTTP -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def api(tmp_path_factory, llm):
    root = tmp_path_factory.mktemp("api-llm-http")
    settings = Settings(home=root / "home", llm_model=MAIN, llm=llm_settings(llm))
    yield from live_api(root, settings)


@pytest.fixture
def model_settings(api, monkeypatch: pytest.MonkeyPatch):
    """Change the API's model settings for one test."""

    def update(**llm: Any) -> None:
        model = api.svc.chat_model
        monkeypatch.setattr(model, "settings", model.settings.model_copy(update=llm))

    return update


def openai_client(api) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{api.url}/v1", api_key=api.tokens["viewer"], max_retries=0, timeout=60)


def test_api_ask_whole_and_streamed(api, server):
    server.script(Text(REPLY), Stream(pieces(REPLY)))
    with api.client("viewer") as http:
        whole = http.post("/v1/ask", json={"query": LEAVE_QUESTION})
        with http.stream("POST", "/v1/ask", json={"query": LEAVE_QUESTION, "stream": True}) as response:
            assert response.status_code == 200
            events = sse_events(response)
    assert whole.status_code == 200, whole.text
    payload = whole.json()
    request = server.requests[0]
    assert payload["answer"].startswith("Employees earn four hours of annual leave a pay period [1].")
    assert "[99]" not in payload["answer"] and payload["abstained"] is False
    assert payload["synthesizer"] == "llm:openai/main-model"
    assert [s["title"] for s in payload["sources"]] == expected_titles(request, [2, 1])
    names = [name for name, _ in events]
    assert names[-2:] == ["sources", "done"] and set(names[:-2]) == {"delta"} and len(names) > 3
    text = "".join(json.loads(data)["text"] for name, data in events if name == "delta")
    assert text == payload["answer"] and json.loads(events[-1][1]) == payload
    assert [r.stream for r in server.requests] == [False, True]


def test_api_chat_completions_with_the_openai_client(api, server):
    server.script(Text(REPLY), Stream(pieces(REPLY)))
    client = openai_client(api)
    messages = [{"role": "user", "content": LEAVE_QUESTION}]
    whole = client.chat.completions.create(model="default", messages=messages)
    chunks = list(client.chat.completions.create(model="default", messages=messages, stream=True))
    content = whole.choices[0].message.content
    answer, sources_block = content.split("\n\nSources:\n")
    assert answer.startswith("Employees earn four hours of annual leave a pay period [1].")
    sources = whole.model_extra["sources"]
    assert [s["title"] for s in sources] == expected_titles(server.requests[0], [2, 1])
    assert len(sources_block.splitlines()) == len(sources)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == content
    assert chunks[-1].model_extra["sources"] == sources


def test_api_slow_model_is_503_with_a_safe_message(api, server, model_settings):
    model_settings(timeout=0.4, deadline=1.0, max_attempts=1)
    server.script(*[Slow(60)] * 2)
    started = time.monotonic()
    with api.client("viewer") as http:
        response = http.post("/v1/ask", json={"query": LEAVE_QUESTION})
    assert time.monotonic() - started < 10
    assert response.status_code == 503
    error = response.json()["error"]
    assert error == {"message": "the language model is unavailable (timed out; tried openai/main-model)",
                     "type": "service_unavailable", "code": "unavailable", "param": None}
    assert "annual leave" not in response.text and "Traceback" not in response.text and KEY not in response.text
    with pytest.raises(openai.InternalServerError) as chat:
        openai_client(api).chat.completions.create(model="default", messages=[{"role": "user", "content": LEAVE_QUESTION}])
    assert chat.value.status_code == 503 and chat.value.body["code"] == "unavailable"
    assert len(server.wait_for(2)) == 2


def test_api_stream_cut_mid_answer_ends_with_an_error_event(api, server):
    server.script(Cut(["Employees earn ", "four hours ", "of annual"]), Cut(["Employees earn ", "four hours "]))
    with api.client("viewer") as http, http.stream("POST", "/v1/ask", json={"query": LEAVE_QUESTION, "stream": True}) as response:
        assert response.status_code == 200
        events = sse_events(response)
    names = [name for name, _ in events]
    assert names[-1] == "error" and set(names[:-1]) == {"delta"}
    assert "".join(json.loads(data)["text"] for name, data in events[:-1]).startswith("Employees earn")
    error = json.loads(events[-1][1])["error"]
    assert error["code"] == "unavailable" and error["type"] == "service_unavailable"
    assert error["message"] == "the language model stopped in the middle of the answer"

    stream = openai_client(api).chat.completions.create(
        model="default", messages=[{"role": "user", "content": LEAVE_QUESTION}], stream=True)
    received: list[str] = []
    with pytest.raises(openai.APIError) as failed:
        for chunk in stream:
            received.append(chunk.choices[0].delta.content or "")
    assert "".join(received).startswith("Employees earn")
    assert failed.value.message == "the language model stopped in the middle of the answer"
    assert len(server.requests) == 2


def test_api_stream_is_pinged_while_the_model_thinks(api, server, monkeypatch: pytest.MonkeyPatch):
    """A model slow to start (2 s) behind a proxy that closes quiet connections: comment lines keep
    the stream alive, and the answer follows whole."""
    monkeypatch.setattr(api.svc.settings.http, "ping_seconds", 0.5)
    server.script(Slow(2.0, Stream(pieces(REPLY))))
    with api.client("viewer") as http, http.stream("POST", "/v1/ask", json={"query": LEAVE_QUESTION, "stream": True}) as response:
        lines = [line for line in response.iter_lines() if line]
    first_event = next(i for i, line in enumerate(lines) if line.startswith("event:"))
    assert lines[:first_event].count(": ping") >= 2 and lines[first_event] == "event: delta"
    assert lines[-2] == "event: done" and ": ping" not in lines[first_event:]


def test_api_a_client_that_goes_away_stops_the_model_call(api, server):
    """The client reads one delta and leaves: the model's stream is closed at its next delta (the
    model server sees its connection closed), not read to its end for nobody."""
    server.script(Drip(["word "] * 200, every=0.05))
    with api.client("viewer") as http, http.stream("POST", "/v1/ask", json={"query": LEAVE_QUESTION, "stream": True}) as response:
        for line in response.iter_lines():
            if line.startswith("event: delta"):
                break
    (sent,) = server.wait_abandoned(1, timeout=15)
    assert sent < 100  # 200 deltas take 10 s; the stream was let go within a few of the client


def test_api_a_model_that_declines(api, server):
    reply = f"{ABSTENTION} [1]"
    server.script(Text(reply), Stream(pieces(reply)), Text(reply), Stream(pieces(reply)))
    with api.client("viewer") as http:
        whole = http.post("/v1/ask", json={"query": LEAVE_QUESTION}).json()
        with http.stream("POST", "/v1/ask", json={"query": LEAVE_QUESTION, "stream": True}) as response:
            events = sse_events(response)
    assert whole | {"text": ""} == {"answer": ABSTENTION, "sources": [], "synthesizer": "llm:openai/main-model",
                                    "abstained": True, "declined": "model_declined", "text": ""}
    assert [json.loads(data) for name, data in events if name != "delta"] == [{"sources": []}, whole]
    assert "".join(json.loads(data)["text"] for name, data in events if name == "delta") == ABSTENTION
    client = openai_client(api)
    messages = [{"role": "user", "content": LEAVE_QUESTION}]
    chat = client.chat.completions.create(model="default", messages=messages)
    assert chat.choices[0].message.content == ABSTENTION and chat.model_extra["sources"] == []
    chunks = list(client.chat.completions.create(model="default", messages=messages, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == ABSTENTION
    assert len(server.requests) == 4


def test_the_server_stops_at_once_with_a_request_waiting():
    """A slow reply never holds the test run: stopping the server ends its wait."""
    import httpx

    with LLMServer() as local:
        local.script(Slow(60))
        with httpx.Client(timeout=0.2) as client, pytest.raises(httpx.ReadTimeout):
            client.post(f"{local.url}/v1/chat/completions", json={"model": "m", "messages": []})
        local.wait_for(1)
        started = time.monotonic()
    assert time.monotonic() - started < 2
