"""The fixtures of the tiers that run the real service (tests/service/, tests/e2e/): a store on
both deployments, the service over it, a few handbook pages, the whole handbook once per session.
Each of those tiers' conftest imports them (`from tests.support.fixtures import *`), so
`pytest tests/unit` never imports rag.service."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from rag.service import KnowledgeService, Principal
from rag.settings import Settings

from .paths import HANDBOOK, SMALL_SET

__all__ = ["settings", "svc", "admin", "small_tree", "two_kbs", "handbook_settings", "handbook", "calls",
           "principal_for"]


@pytest.fixture(params=["sqlite", "postgresql"])
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    """Every store-backed test runs on both deployments: the embedded default (a SQLite file, the
    tantivy keyword index and embedded Chroma in home) and the scale-out one (a real PostgreSQL for
    the store and the keyword lane, a real Chroma server for the vectors)."""
    if request.param == "postgresql":
        server = request.getfixturevalue("postgres")
        chroma = request.getfixturevalue("chroma_server")
        return Settings(home=tmp_path / "home", database_url=server.new_database(), chroma_url=chroma)
    return Settings(home=tmp_path / "home")


@pytest.fixture
def svc(settings: Settings):
    with KnowledgeService(settings) as service:
        yield service


@pytest.fixture
def admin(svc: KnowledgeService) -> Principal:
    svc.ensure_workspace("default")
    return Principal.local_admin("default")


@pytest.fixture
def small_tree(tmp_path: Path) -> Path:
    """A few real handbook pages, copied into a scratch directory the test may edit."""
    root = tmp_path / "pages"
    for rel in SMALL_SET:
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(HANDBOOK / rel, target)
    return root


@pytest.fixture
def two_kbs(svc: KnowledgeService, admin: Principal, small_tree: Path, tmp_path: Path):
    """Knowledge bases `handbook` (the small tree) and `cafeteria` (one page that also says "leave")."""
    svc.ingest_directory(admin, small_tree, kb_name="handbook")
    other = tmp_path / "cafeteria"
    other.mkdir()
    (other / "menu.md").write_text("# Cafeteria menu\n\nThe cafeteria serves leave-shaped pretzels.\n")
    svc.ingest_directory(admin, other, kb_name="cafeteria")
    return svc.knowledge_base(admin, "handbook"), svc.knowledge_base(admin, "cafeteria")


@pytest.fixture(scope="session")
def handbook_settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """The whole 18F handbook ingested once per session (the embeddings come from the shared cache)."""
    settings = Settings(home=tmp_path_factory.mktemp("handbook") / "home")
    with KnowledgeService(settings) as service:
        service.ensure_workspace("default")
        report = service.ingest_directory(Principal.local_admin("default"), HANDBOOK)
        assert not report.failed and len(report.added) == 246
    return settings


@pytest.fixture(scope="session")
def handbook(handbook_settings: Settings):
    with KnowledgeService(handbook_settings, writer=False) as service:
        yield service


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every litellm.completion call's arguments; the real litellm answers with the mock response."""
    import litellm

    original = litellm.completion
    seen: list[dict[str, Any]] = []

    def completion(**kwargs: Any) -> Any:
        seen.append(kwargs)
        return original(**kwargs)

    monkeypatch.setattr(litellm, "completion", completion)
    return seen


@pytest.fixture
def principal_for(svc: KnowledgeService):
    """The principal of a real token: made with create_token, read back with authenticate."""

    def make(role: str = "editor", *, write: bool = True, agent: bool = False, access: str | None = None,
             folders: tuple[str, ...] = (), workspace: str = "default") -> Principal:
        secret, _ = svc.create_token(workspace, role, ["knowledge:write"] if write else [], access, folders, agent)
        return svc.authenticate(secret)

    return make
