"""Helpers for the editor's in-process tests (tests/service/test_editor_pages.py,
tests/service/test_editor_sources.py): a TestClient signed in with a person's token, the page's
CSRF token, the flash messages a page shows, and `LinkedPages`, a connector whose items carry the
URL of their original, run through the service's own sync engine."""

from __future__ import annotations

import hashlib
import html
import re
from typing import Any, Iterator, Mapping

from fastapi.testclient import TestClient

from rag.api import create_app
from rag.service import KnowledgeService, Principal
from rag.service.sources.engine import SyncReport, Target
from rag.sources.base import Connector, Fetched, Item, SourceConfig, SyncContext


def signed_in(svc: KnowledgeService, token: str | None) -> TestClient:
    """A client of the editor; signed in with `token` unless it is None. The caller closes it
    (`with`), or the test process does."""
    client = TestClient(create_app(service=svc), follow_redirects=False)
    client.__enter__()
    if token is not None:
        signed = sign_in(client, token)
        assert signed.status_code == 303, signed.text
    return client


def sign_in(client: TestClient, token: str):
    form = client.get("/signin")
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text).group(1)
    return client.post("/signin", data={"token": token, "csrf": csrf})


def page_csrf(client: TestClient, path: str = "/") -> str:
    return re.search(r'name="csrf-token" content="([^"]+)"', client.get(path).text).group(1)


def flashes(client: TestClient, path: str) -> list[str]:
    return [html.unescape(m) for m in re.findall(r'class="flash (?:ok|error)"[^>]*>([^<]*)<', client.get(path).text)]


class LinkedPages(Connector):
    """Markdown pages, each with the URL of its original (any string: the test picks hostile ones).
    A real connector run by the real engine, standing in for the website and Git connectors."""

    kind = "linked-pages"
    provider = "web"
    Config = SourceConfig

    def __init__(self, pages: Mapping[str, tuple[str, str]]) -> None:
        super().__init__(SourceConfig(), SyncContext(source_name="linked", workspace="default"))
        self.pages = dict(pages)  # item id -> (url, markdown)

    def items(self) -> Iterator[Item]:
        for item_id, (url, body) in self.pages.items():
            yield Item(id=item_id, version=hashlib.sha256(body.encode()).hexdigest(), filename=f"{item_id}.md", url=url, label=item_id)

    def fetch(self, item: Item, previous: Mapping[str, Any] | None) -> Fetched:
        return Fetched(data=self.pages[item.id][1].encode())


def sync_linked_pages(svc: KnowledgeService, kb_name: str, pages: Mapping[str, tuple[str, str]]) -> SyncReport:
    """Sync `pages` into the knowledge base's folder `linked` with the service's sync engine."""
    kb = svc.knowledge_base(Principal.local_admin("default"), kb_name, create=True)
    connector = LinkedPages(pages)
    target = Target(kb=kb, folder=("linked",), root_key="source:linked-pages", provider=connector.provider,
                    id_prefix="web:default:linked:")
    report = svc.sources.engine.run(target, connector, lambda *_: None)
    assert report.error is None and not report.failed, (report.error, report.failed)
    return report
