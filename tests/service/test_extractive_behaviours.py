"""Issue 30's answer behaviours through `rag ask`'s whole pipeline (the real store, retriever and
local model, the extractive synthesizer): the value asked for is in the answer, a failure comes
with its fix, a two-part question whose second part nothing covers says so, and a question asking
for a maximum the pages never state declines by name."""

from __future__ import annotations


import pytest

from rag.service import KnowledgeService, Principal
from rag.settings import Settings
from rag.synthesize import declines

SERVER = """\
# Running the server

The server is the part of the service that answers requests from chat apps and agents.

## Listening address

The server listens on the loopback interface unless you tell it otherwise at start-up.
By default it binds port 8000 on 127.0.0.1 and serves the API under /v1.

## When the server does not start

If another program already uses the port, the server fails to start with an address-in-use error.
To fix this, pass `--port 8001` or stop the other program first.
"""

UPLOADS = """\
# Uploads

People and agents upload files through the editor or the API.

## Size

Uploads larger than the configured size are refused with a clear message to the caller.
The size is checked before the file is parsed, so a refused upload costs nothing.
"""


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("behaviours")
    pages = root / "pages"
    pages.mkdir()
    (pages / "server.md").write_text(SERVER)
    (pages / "uploads.md").write_text(UPLOADS)
    with KnowledgeService(Settings(home=root / "home")) as svc:
        svc.ensure_workspace("default")
        svc.ingest_directory(Principal.local_admin("default"), pages)
        yield svc


def ask(svc: KnowledgeService, question: str):
    return svc.ask(Principal.local_admin("default"), question)


def test_the_value_asked_for_is_in_the_answer(service: KnowledgeService) -> None:
    answer = ask(service, "Which port does the server listen on by default?")
    assert not answer.abstained
    assert "8000" in answer.text
    assert [s.title for s in answer.sources] == ["Running the server"]


def test_a_failure_comes_with_its_fix(service: KnowledgeService) -> None:
    answer = ask(service, "The server won't start because the address is already in use. How do I fix that?")
    assert not answer.abstained
    assert "address-in-use error" in answer.text
    assert "--port 8001" in answer.text


def test_a_part_nothing_covers_is_named(service: KnowledgeService) -> None:
    answer = ask(service, "Which port does the server listen on, and how do I rotate the Kerberos keytab?")
    assert not answer.abstained
    assert "8000" in answer.text
    assert "does not say" in answer.text and "Kerberos keytab" in answer.text
    assert "port" not in answer.text.split("does not say")[1]


def test_a_maximum_the_pages_never_state_declines(service: KnowledgeService) -> None:
    answer = ask(service, "What is the maximum upload size in megabytes?")
    assert answer.abstained
    assert answer.declined == declines.FACT_NOT_STATED
    assert answer.sources == []
