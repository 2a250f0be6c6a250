from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("RAG_SHARED_DIR", REPO.parent / "shared"))
HANDBOOK = SHARED / "datasets" / "handbook_18f" / "pages"

# Fixture texts are embedded once and shared by every test run (and by CI's runs on one machine).
os.environ.setdefault("RAG_EMBED_CACHE", str(REPO / ".cache" / "embeddings.sqlite"))
# RAG_TEST_POSTGRES / RAG_TEST_CHROMA_URL: servers `.ci/run` started (else the tests start their own).
KEEP = ("RAG_EMBED_CACHE", "RAG_SHARED_DIR", "RAG_TEST_POSTGRES", "RAG_TEST_CHROMA_URL")
for name in [n for n in os.environ if n.startswith("RAG_") and n not in KEEP]:
    del os.environ[name]  # a developer's own configuration must not leak into the tests

import rag  # noqa: E402,F401  (process defaults before numpy/torch load)
from rag.service import KnowledgeService, Principal  # noqa: E402
from rag.settings import Settings  # noqa: E402

SMALL_SET = [
    "travel-and-leave/leave.md",
    "travel-and-leave/travel-and-leave-policies/travel-guide-faq.md",
    "tools/slack/getting-started.md",
    "tools/teams.md",
    "general-information-and-resources/collaboration-tools.md",
]


@pytest.fixture(scope="session")
def postgres():
    """A real PostgreSQL server for the session: the one `.ci/run` started (RAG_TEST_POSTGRES), else
    one started here. CI installs it; elsewhere, missing binaries skip."""
    from .pgserver import ExternalPg, PgServer

    if os.environ.get("RAG_TEST_POSTGRES"):
        yield ExternalPg(os.environ["RAG_TEST_POSTGRES"])
        return
    try:
        server = PgServer().start()
    except RuntimeError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(exc))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory):
    """A real Chroma server for the session: the one `.ci/run` started (RAG_TEST_CHROMA_URL), else
    `chroma run` started here. Tests share it safely: every knowledge base has its own collections."""
    if os.environ.get("RAG_TEST_CHROMA_URL"):
        yield os.environ["RAG_TEST_CHROMA_URL"]
        return
    from .chromaserver import start_chroma, stop_chroma

    proc, url = start_chroma(tmp_path_factory.mktemp("chroma-server"))
    yield url
    stop_chroma(proc)


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
