"""A cold command's start: opening the store skips alembic when the schema is at the newest
revision (and still migrates a store that is behind); the CLI finds the home and whether a server
runs it without loading the settings."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from sqlalchemy import create_engine, inspect, text

from rag.settings import Settings
from rag.store.db import Database, head_revision
from rag.store.lock import configured_home

from ..support.store import alembic_config


def alembic_heads() -> list[str]:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_heads()


def test_the_head_read_from_the_files_is_alembics():
    assert alembic_heads() == [head_revision()]


def test_a_store_behind_the_head_is_migrated_and_one_at_it_opens_without_alembic(tmp_path):
    url = f"sqlite:///{tmp_path / 'rag.db'}"
    Database(url).close()
    from alembic import command

    engine = create_engine(url)
    config = alembic_config()
    with engine.begin() as conn:  # as an older release left it: the two newest migrations not yet run
        config.attributes["connection"] = conn
        command.downgrade(config, "0006")
    assert "document_originals" not in inspect(engine).get_table_names()
    Database(url).close()
    assert "document_originals" in inspect(engine).get_table_names()
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == head_revision()
    engine.dispose()
    # At the head, opening it imports no alembic (a process of its own: this one has it loaded).
    opened = subprocess.run(
        [sys.executable, "-c", "import sys; from rag.store.db import Database; "
         f"Database({url!r}).close(); print('alembic' in sys.modules)"],
        capture_output=True, text=True, check=True)
    assert opened.stdout.strip() == "False"


@pytest.mark.parametrize("env", [
    {},
    {"RAG_HOME": "/srv/rag"},
    {"rag_home": "relative/home", "RAG_CHROMA_URL": "http://chroma:8000"},
    {"RAG_DATABASE_URL": "postgresql://db/rag", "RAG_CHROMA_URL": "http://chroma:8000"},
    {"RAG_DATABASE_URL": "postgresql://db/rag"},
    {"RAG_DATABASE_URL": "sqlite:////tmp/x.db", "RAG_CHROMA_URL": "http://chroma:8000"},
])
def test_the_cli_finds_the_home_and_deployment_as_the_settings_do(env, monkeypatch):
    """The CLI looks for a running server without loading the settings (rag.store.lock.configured_home)."""
    for name in list(os.environ):
        if name.upper().startswith("RAG_"):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = Settings()
    assert configured_home() == (settings.home, settings.embedded)
