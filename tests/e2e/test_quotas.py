"""Quotas per token (rag/service/quotas.py) over a real socket and over MCP, the cap on streams at
once, and counts and caps shared by two services on one PostgreSQL store (as `rag serve --workers 2`
and replicas share them)."""

from __future__ import annotations

import time

import httpx
import pytest
from sqlalchemy import text

from rag.service import KnowledgeService
from rag.service.slots import Full, StoreSlots
from rag.settings import LLMSettings, Settings

from ..support.llm_server import LLMServer, Slow, Stream
from ..support.api_support import STARTER_QUESTION, LiveServer, one_page_store
from ..support.mcp_support import http_session, run

QUESTION = STARTER_QUESTION


def store(home, **settings) -> KnowledgeService:
    svc = KnowledgeService(Settings(home=home, **settings))
    svc.ensure_workspace("default")
    return svc


def test_a_noisy_token_is_refused_with_retry_after_and_another_is_not(tmp_path) -> None:
    # 60 a minute with a 5 s burst: 5 at once, then one a second.
    with store(tmp_path / "home", quota={"search_per_minute": 60, "burst_seconds": 5}) as svc, LiveServer(svc) as server:
        noisy, _ = svc.create_token("default", "viewer", [], "all")
        quiet, _ = svc.create_token("default", "viewer", [], "all")

        def search(token: str) -> httpx.Response:
            return httpx.post(f"{server.url}/v1/search", json={"query": QUESTION},
                              headers={"Authorization": f"Bearer {token}"}, timeout=60)

        answers, took = [], []
        for _ in range(8):
            started = time.monotonic()
            answers.append(search(noisy))
            took.append(time.monotonic() - started)
        statuses = [a.status_code for a in answers]
        assert statuses[:5] == [200] * 5 and 429 in statuses[5:]
        refused = next(a for a in answers if a.status_code == 429)
        error = refused.json()["error"]
        assert (error["code"], error["type"]) == ("rate_limited", "rate_limit_error")
        assert error["message"].startswith("this token made more searches than its quota allows (60 a minute)")
        assert 1 <= int(refused.headers["retry-after"]) <= 2 and QUESTION not in refused.text
        # Called again at once, ignoring Retry-After: held until then, refused without the store's work.
        first = statuses.index(429)
        assert statuses[first + 1] == 429 and took[first + 1] >= 0.5 and took[first] < 0.5
        assert search(quiet).status_code == 200  # another token is not held back
        time.sleep(int(refused.headers["retry-after"]))  # the wait it was told: then it may again
        assert search(noisy).status_code == 200
        # Over MCP: the tool's error, with the same words.
        for _ in range(6):
            message = run(mcp_search, f"{server.url}/mcp", noisy)
            if message is not None:
                break
        assert message is not None and "more searches than its quota allows" in message


async def mcp_search(url: str, secret: str) -> str | None:
    async with http_session(url, secret) as session:
        result = await session.call("search_knowledge", {"query": QUESTION})
        return result.content[0].text if result.is_error else None


def test_a_token_streams_at_most_its_cap_at_once(tmp_path) -> None:
    # The model answers the first stream slowly, so that stream is surely still open when the
    # second request comes (an extractive answer can end before the second is sent).
    with LLMServer() as llm:
        model = {"llm_model": "openai/main-model", "llm": LLMSettings(
            api_base=f"{llm.url}/v1", api_key="sk-test", max_attempts=1, timeout=30.0, deadline=30.0)}
        with store(tmp_path / "home", quota={"streams_per_token": 1}, **model) as svc, LiveServer(svc) as server:
            _, token = one_page_store(svc)
            other, _ = svc.create_token("default", "viewer", [], "all")
            headers = {"Authorization": f"Bearer {token}"}
            body = {"query": QUESTION, "stream": True}
            llm.script(Slow(4.0, Stream(["The first ", "stream's answer [1]."])))
            with httpx.Client(base_url=server.url, timeout=60) as client:
                with client.stream("POST", "/v1/ask", json=body, headers=headers) as first:
                    assert first.status_code == 200
                    llm.wait_for(1)  # the first stream holds its slot while the model thinks
                    second = client.post("/v1/ask", json=body, headers=headers)
                    assert second.status_code == 429 and second.json()["error"]["code"] == "too_many_streams"
                    assert llm.count() == 1  # refused before any model call
                    llm.script(Stream(["Another ", "token's answer [1]."]))
                    assert client.post("/v1/ask", json=body, headers={"Authorization": f"Bearer {other}"}).status_code == 200
                    assert any("stream's answer" in line for line in first.iter_lines())
                llm.script(*[Stream(["Again [1]."])] * 200)
                deadline = time.monotonic() + 10  # the first's slot is given back as its stream ends
                while (again := client.post("/v1/ask", json=body, headers=headers)).status_code == 429:
                    assert time.monotonic() < deadline, "the stream's slot was not given back"
                    time.sleep(0.05)
                assert again.status_code == 200


def test_two_services_on_one_postgresql_store_share_the_counts(postgres, chroma_server, tmp_path) -> None:
    shared = {"database_url": postgres.new_database(), "chroma_url": chroma_server,
              "quota": {"search_per_minute": 60, "burst_seconds": 4}}  # 4 at once across both
    with store(tmp_path / "a", **shared) as first:
        token, _ = first.create_token("default", "viewer", [], "all")
        with store(tmp_path / "b", **shared) as second:
            principal = first.authenticate(token)
            outcomes = []
            for n in range(6):
                try:
                    (first if n % 2 == 0 else second).search(principal, QUESTION)
                    outcomes.append("ok")
                except Exception as exc:  # noqa: BLE001 - the refusal is what is counted
                    outcomes.append(getattr(exc, "code", repr(exc)))
    assert outcomes[:4] == ["ok"] * 4 and outcomes[4:] == ["rate_limited"] * 2


def test_two_services_on_one_postgresql_store_share_the_stream_cap(postgres, chroma_server, tmp_path) -> None:
    # As `rag serve --workers 2` or two replicas: a stream open on one counts on the other.
    with LLMServer() as llm:
        shared = {"database_url": postgres.new_database(), "chroma_url": chroma_server,
                  "quota": {"streams_per_token": 1}, "llm_model": "openai/main-model",
                  "llm": LLMSettings(api_base=f"{llm.url}/v1", api_key="sk-test", max_attempts=1, timeout=30.0,
                                     deadline=30.0)}
        with store(tmp_path / "a", **shared) as first, LiveServer(first) as one:
            _, token = one_page_store(first)
            with store(tmp_path / "b", **shared) as second, LiveServer(second) as two:
                headers = {"Authorization": f"Bearer {token}"}
                body = {"query": QUESTION, "stream": True}
                llm.script(Slow(4.0, Stream(["The first ", "stream's answer [1]."])))
                with httpx.Client(timeout=60) as client:
                    with client.stream("POST", f"{one.url}/v1/ask", json=body, headers=headers) as streaming:
                        assert streaming.status_code == 200
                        llm.wait_for(1)
                        refused = client.post(f"{two.url}/v1/ask", json=body, headers=headers)
                        assert refused.status_code == 429 and refused.json()["error"]["code"] == "too_many_streams"
                        assert llm.count() == 1
                        assert any("stream's answer" in line for line in streaming.iter_lines())
                    llm.script(*[Stream(["Again [1]."])] * 200)
                    deadline = time.monotonic() + 10  # given back on the store as the stream ends
                    while (again := client.post(f"{two.url}/v1/ask", json=body, headers=headers)).status_code == 429:
                        assert time.monotonic() < deadline, "the stream's slot was not given back"
                        time.sleep(0.05)
                    assert again.status_code == 200


def test_a_killed_process_slots_lapse_and_a_live_one_keeps_its_own(postgres, tmp_path) -> None:
    with store(tmp_path / "home", database_url=postgres.new_database()) as svc:
        # Renewed ten times a lease: a busy machine stalling the renewing thread a second changes nothing.
        live = StoreSlots(svc.db, lease_s=2.0, renew_s=0.2)
        dead = StoreSlots(svc.db, lease_s=2.0, renew_s=3600)  # never renews: as a process killed
        held = live.acquire("k", 2)
        dead.acquire("k", 2)
        with pytest.raises(Full) as full:
            live.acquire("k", 2)
        assert full.value.held == 2
        time.sleep(2.5)  # past the lease: the dead one's row lapsed, the live one's was renewed
        released = live.acquire("k", 2)
        with pytest.raises(Full):
            dead.acquire("k", 2)
        held()
        released()
        deadline = time.monotonic() + 5  # given back by the renewing thread, at once
        while True:
            try:
                again = [dead.acquire("k", 2), dead.acquire("k", 2)]
                break
            except Full:
                assert time.monotonic() < deadline, "the slots given back were not deleted"
                time.sleep(0.05)
        other = StoreSlots(svc.db).acquire("other", 1)  # another key counts alone
        unlimited = live.acquire("k", 0)  # no limit: nothing is counted, nothing written
        for release in (*again, other, unlimited):
            release()
        deadline = time.monotonic() + 5
        while rows(svc) != 0:  # every row given back is gone; the dead process's lapsed one too
            assert time.monotonic() < deadline, f"{rows(svc)} rows left"
            time.sleep(0.05)


def rows(svc: KnowledgeService) -> int:
    with svc.db.engine.connect() as connection:
        return connection.execute(text("SELECT count(*) FROM call_slots")).scalar_one()
