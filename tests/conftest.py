"""What every tier needs, and nothing heavier: the test environment (set before anything imports
rag), the session's PostgreSQL and Chroma servers (started only when a test asks), and the time
each tier took, printed at the end. No rag.service, model or torch import here: `pytest tests/unit`
loads none of them. The store, service and handbook fixtures are in tests/support/fixtures.py,
imported by tests/service/conftest.py and tests/e2e/conftest.py."""

from __future__ import annotations

import os
from collections import defaultdict

import pytest

from .support.paths import REPO

# Fixture texts are embedded once and shared by every test run (and by CI's runs on one machine).
os.environ.setdefault("RAG_EMBED_CACHE", str(REPO / ".cache" / "embeddings.sqlite"))
# RAG_TEST_POSTGRES / RAG_TEST_CHROMA_URL: servers `.ci/run` started (else the tests start their own).
KEEP = ("RAG_EMBED_CACHE", "RAG_SHARED_DIR", "RAG_TEST_POSTGRES", "RAG_TEST_CHROMA_URL")
for name in [n for n in os.environ if n.startswith("RAG_") and n not in KEEP]:
    del os.environ[name]  # a developer's own configuration must not leak into the tests
# `rag serve` in a test logs to its file under RAG_HOME, where tests read it: by default it would log
# to standard output (not a terminal there), a pipe that many tests leave unread, which could fill
# and stall the server. tests/e2e/test_logs.py sets RAG_LOG__TO for the standard-output log.
os.environ["RAG_LOG__TO"] = "file"

import rag  # noqa: E402,F401  (process defaults before numpy/torch load)


@pytest.fixture(scope="session")
def postgres():
    """A real PostgreSQL server for the session: the one `.ci/run` started (RAG_TEST_POSTGRES), else
    one started here. CI installs it; elsewhere, missing binaries skip."""
    from .support.pgserver import ExternalPg, PgServer

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
    from .support.chromaserver import start_chroma, stop_chroma

    proc, url = start_chroma(tmp_path_factory.mktemp("chroma-server"))
    yield url
    stop_chroma(proc)


# Each tier's time: the sum of its tests' setup, call and teardown (module and session fixtures are
# counted in the test that first needed them), printed after the run, so CI shows where the minutes go.
TIERS = ("unit", "service", "e2e")
_tier_seconds: dict[str, float] = defaultdict(float)
_tier_tests: dict[str, set[str]] = defaultdict(set)


def _tier(nodeid: str) -> str:
    parts = nodeid.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" and parts[1] in TIERS else "other"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    tier = _tier(report.nodeid)
    _tier_seconds[tier] += report.duration
    _tier_tests[tier].add(report.nodeid)


def pytest_terminal_summary(terminalreporter) -> None:
    if not _tier_tests:
        return
    terminalreporter.section("time per tier")
    for tier in (*TIERS, "other"):
        if tier in _tier_tests:
            terminalreporter.write_line(f"tests/{tier}: {len(_tier_tests[tier])} tests, {_tier_seconds[tier]:.1f} s")
