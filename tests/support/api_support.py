"""A live API for the tests: a real uvicorn server on a free port, in a thread of the test
process, over one KnowledgeService that the tests also call directly (to make tokens, to wait for
publishing). The requests go over a real socket."""

from __future__ import annotations

import shutil
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import httpx
import uvicorn
from sqlalchemy import func, select

from rag.api import create_app
from rag.service import KnowledgeService, Principal
from rag.settings import Settings
from rag.store.models import DocumentOriginal, Node

from .paths import HANDBOOK, SMALL_SET

LEAVE_QUESTION = "How much annual leave do I earn each pay period?"
# One published page and a question it answers, for a test that needs an answer and not a corpus.
LEAVE_PAGE = "# Leave policy\n\nA new starter gets 25 days of annual leave a year, and 3 days more after five years.\n"
STARTER_QUESTION = "How many days of annual leave does a new starter get?"


def one_page_store(svc: KnowledgeService) -> tuple[str, str]:
    """The default workspace with LEAVE_PAGE published in it: (its node id, a viewer token's secret)."""
    svc.ensure_workspace("default")
    admin = Principal.local_admin("default")
    doc = svc.create_document(admin, svc.knowledge_base(admin, "default").root_id, "Leave policy", LEAVE_PAGE)
    svc.publish_version(admin, doc.node_id, 1)
    assert svc.wait_for_publishing(120)
    return doc.node_id, svc.create_token("default", "viewer", [], "all")[0]


class LiveServer:
    def __init__(self, svc: KnowledgeService) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))  # the OS picks a free port; uvicorn serves on this very socket
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        config = uvicorn.Config(create_app(service=svc), log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> "LiveServer":
        self.thread.start()
        deadline = time.monotonic() + 120
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the API server did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        self.sock.close()


@dataclass
class Api:
    url: str
    svc: KnowledgeService
    tokens: dict[str, str] = field(default_factory=dict)

    def client(self, who: str | None = "admin") -> httpx.Client:
        """A client with the token named `who` (or `who` itself, a secret); None: no token."""
        headers = {"Authorization": f"Bearer {self.tokens.get(who, who)}"} if who else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=120)

    def token(self, role: str, *, write: bool = False, agent: bool = False, access: str | None = None,
              folders: tuple[str, ...] = ()) -> str:
        secret, _ = self.svc.create_token("default", role, ["knowledge:write"] if write else [], access, folders, agent)
        return secret


def build_home(root: Path) -> Path:
    """The small handbook tree (default knowledge base) and a `cafeteria` knowledge base."""
    pages = root / "pages"
    for rel in SMALL_SET:
        (pages / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(HANDBOOK / rel, pages / rel)
    cafeteria = root / "cafeteria"
    cafeteria.mkdir(parents=True)
    (cafeteria / "menu.md").write_text("# Cafeteria menu\n\nThe cafeteria serves leave-shaped pretzels on Fridays.\n")
    return pages


def live_api(root: Path, settings: Settings | None = None) -> Iterator[Api]:
    """Ingest the fixture data, make one token per kind of caller, serve; for module fixtures."""
    pages = build_home(root)
    settings = settings or Settings(home=root / "home")
    with KnowledgeService(settings) as svc:
        svc.ensure_workspace("default")
        admin = Principal.local_admin("default")
        assert not svc.ingest_directory(admin, pages).failed
        assert not svc.ingest_directory(admin, root / "cafeteria", kb_name="cafeteria").failed
        with LiveServer(svc) as server:
            api = Api(server.url, svc)
            api.tokens = {
                "admin": api.token("admin", write=True),
                "editor": api.token("editor", write=True),
                "viewer": api.token("viewer"),
                "viewer_with_write_scope": api.token("viewer", write=True),
                "editor_read_only": api.token("editor"),
                "folder": api.token("editor", write=True, folders=("travel-and-leave",)),
                "folder_admin": api.token("admin", write=True, folders=("travel-and-leave",)),
                "agent_admin": api.token("admin", write=True, agent=True, access="all"),
                "agent_none": api.token("viewer", agent=True),
            }
            yield api
            svc.wait_for_publishing(120)


def sse_events(response: httpx.Response) -> list[tuple[str | None, str]]:
    """(event name, data) of each Server-Sent Event, parsed as the SSE format says."""
    events: list[tuple[str | None, str]] = []
    name: str | None = None
    data: list[str] = []
    for line in response.iter_lines():
        if not line:
            if data:
                events.append((name, "\n".join(data)))
            name, data = None, []
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
    if data:
        events.append((name, "\n".join(data)))
    return events


def stored(svc: KnowledgeService) -> tuple[int, int]:
    """(nodes, original files) in the store: what a refused upload must leave as it was."""
    with svc.db.session() as session:
        return (int(session.scalar(select(func.count()).select_from(Node))),
                int(session.scalar(select(func.count()).select_from(DocumentOriginal))))


def upload(client, filename: str, data: bytes, **form):
    return client.post("/v1/uploads", files={"file": (filename, data, "application/octet-stream")},
                       data={k: str(v).lower() if isinstance(v, bool) else v for k, v in form.items()})
