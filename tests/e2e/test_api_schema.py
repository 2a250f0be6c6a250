"""schemathesis over the app's OpenAPI schema against a live server: generated requests, valid and
invalid, to every operation; no 5xx, and every response matches the schema (status, content type,
headers, body), and every request the schema forbids is refused with a 4xx."""

from __future__ import annotations

import datetime

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from rag.api import create_app

from ..support.api_support import LEAVE_QUESTION, live_api

CHECKS = [
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
    "negative_data_rejection",
]

# The schema is the one /openapi.json serves (the app builds it without starting). It is loaded
# eagerly: schemathesis's lazy fixture loader does not run under pytest 9.
schema = schemathesis.openapi.from_dict(create_app().openapi())
# The token is sent by the test itself (the Authorization header is not fuzzed; test_api_search_ask
# covers tokens), so schemathesis must not generate the security header either way.
schema.config.generation.update(modes=["positive", "negative"], max_examples=25, no_shrink=True,
                                with_security_parameters=False)
schema.config.phases.update(phases=["examples", "fuzzing"])
schema.config.checks.update(included_check_names=CHECKS)


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    yield from live_api(tmp_path_factory.mktemp("api-schema"))


def test_the_served_schema_is_the_tested_one(api):
    assert httpx.get(f"{api.url}/openapi.json").json() == create_app().openapi()


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_api_conforms_to_its_schema(case, api):
    case.call_and_validate(base_url=api.url, headers={"Authorization": f"Bearer {api.tokens['admin']}"}, timeout=120)


ANSWERS = [
    ("/v1/ask", {"query": LEAVE_QUESTION}),
    ("/v1/ask", {"query": LEAVE_QUESTION, "stream": True}),
    ("/v1/ask", {"query": "What is the capital of Mongolia?", "stream": True}),
    ("/v1/chat/completions", {"model": "default", "messages": [{"role": "user", "content": LEAVE_QUESTION}]}),
    ("/v1/chat/completions", {"model": "default", "messages": [{"role": "user", "content": LEAVE_QUESTION}],
                              "stream": True, "stream_options": {"include_usage": True}}),
]


@pytest.mark.parametrize("path, body", ANSWERS)
def test_real_answers_match_the_schema(api, path, body):
    """Generated requests rarely find an answer; these do, streamed and whole, and each event is
    checked against the stream's documented event schema."""
    case = schema[path]["POST"].Case(body=body, media_type="application/json")
    # The first chat completion imports litellm for its token counts: seconds on a loaded machine,
    # past the 10 s schemathesis waits by default.
    response = case.call_and_validate(base_url=api.url, headers={"Authorization": f"Bearer {api.tokens['viewer']}"},
                                      timeout=120)
    assert response.status_code == 200


def test_the_event_schema_is_not_vacuous(api):
    case = schema["/v1/ask"]["POST"].Case(body={"query": "x", "stream": True}, media_type="application/json")
    request = httpx.Request("POST", f"{api.url}/v1/ask")
    bad = httpx.Response(200, headers={"content-type": "text/event-stream"}, request=request,
                         content=b'event: delta\ndata: {"txt": "renamed field"}\n\n')
    bad.elapsed = datetime.timedelta(0)  # what a transport sets on a real response
    with pytest.raises(BaseExceptionGroup) as failures:
        case.validate_response(bad)
    assert [str(e).splitlines()[0] for e in failures.value.exceptions] == ["SSE event violates schema"]
