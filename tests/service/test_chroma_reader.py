"""A process that only reads the embedded store opens Chroma's engine without the chromadb package
(rag/retrieve/chroma_reader.py): its answers must be PersistentClient's, and writes are refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rag.retrieve.chroma_reader import ChromaReader, ReadOnlyStore, open_reader
from rag.retrieve.vector import open_chroma_client
from rag.service import KnowledgeService, Principal
from rag.settings import Settings
from tests.support.paths import REPO


@pytest.fixture
def small_store(tmp_path: Path, small_tree: Path) -> Settings:
    settings = Settings(home=tmp_path / "home")
    with KnowledgeService(settings) as service:
        service.ensure_workspace("default")
        service.ingest_directory(Principal.local_admin("default"), small_tree)
    return settings


def test_the_reader_answers_as_persistent_client_does(small_store: Settings) -> None:
    import chromadb

    full = chromadb.PersistentClient(path=str(small_store.chroma_path))
    (listed,) = full.list_collections()
    reader = open_reader(small_store.chroma_path)
    assert isinstance(reader, ChromaReader)
    mine = reader.collection(listed.name)
    assert mine is not None and mine.count() == listed.count() > 10
    stored = listed.get(include=["embeddings"])
    assert sorted(mine.get()["ids"]) == sorted(stored["ids"])
    some = stored["ids"][:3]
    assert np.allclose(np.asarray(mine.get(ids=some, include=["embeddings"])["embeddings"]),
                       np.asarray(listed.get(ids=some, include=["embeddings"])["embeddings"]))
    rng = np.random.default_rng(7)
    queries = [np.asarray(stored["embeddings"][0])] + [rng.standard_normal(384).astype(np.float32) for _ in range(3)]
    for vector in queries:
        vector = vector / np.linalg.norm(vector)
        theirs = listed.query(query_embeddings=[vector], n_results=8, include=["distances"])
        ours = mine.query([vector], n_results=8)
        assert ours["ids"] == theirs["ids"]
        assert np.allclose(ours["distances"], theirs["distances"])
    where = {"node_id": {"$in": sorted({m["node_id"] for m in listed.get(include=["metadatas"])["metadatas"]})[:2]}}
    filtered = listed.query(query_embeddings=[queries[1]], n_results=5, where=where, include=["distances"])
    assert mine.query([queries[1]], n_results=5, where=where)["ids"] == filtered["ids"]
    assert reader.collection("no-such-collection") is None


def test_the_reader_refuses_writes(small_store: Settings) -> None:
    reader = open_reader(small_store.chroma_path)
    assert isinstance(reader, ChromaReader)
    name = next(iter(reader._ids))
    with pytest.raises(ReadOnlyStore):
        reader.collection(name).upsert(ids=["1"], embeddings=[np.zeros(384, dtype=np.float32)])
    with pytest.raises(ReadOnlyStore):
        reader.get_or_create_collection("new")


def test_a_reader_searches_as_a_writer_does(small_store: Settings) -> None:
    admin = Principal.local_admin("default")
    questions = ["How much annual leave do I earn?", "How do I join a Slack channel?", "travel per diem"]
    with KnowledgeService(small_store) as writer:
        expected = [[(h.chunk_id, round(h.score, 6)) for h in writer.search(admin, q, limit=8).hits] for q in questions]
    with KnowledgeService(small_store, writer=False) as reader:
        assert isinstance(reader.engines.vector.client, ChromaReader)
        got = [[(h.chunk_id, round(h.score, 6)) for h in reader.search(admin, q, limit=8).hits] for q in questions]
    assert got == expected and all(expected)


def test_a_cold_search_never_imports_chromadb(small_store: Settings) -> None:
    """The point of the reader: a one-shot `rag search` skips the second chromadb takes to import."""
    script = (
        "import sys, json\n"
        "from rag.service import KnowledgeService, Principal\n"
        "from rag.settings import Settings\n"
        "with KnowledgeService(Settings(), writer=False) as svc:\n"
        "    hits = svc.search(Principal.local_admin('default'), 'annual leave', limit=3).hits\n"
        "print(json.dumps({'hits': len(hits), 'chromadb': 'chromadb' in sys.modules}))\n"
    )
    env = os.environ | {"RAG_HOME": str(small_store.home), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1]) == {"hits": 3, "chromadb": False}


def test_a_home_never_written_is_read_as_empty_and_left_untouched(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home")
    with KnowledgeService(settings, writer=False) as reader:
        hits = reader.search(Principal.local_admin("default"), "annual leave", limit=3).hits
    assert hits == []
    assert not (settings.chroma_path / "chroma.sqlite3").exists()


def test_an_engine_that_cannot_be_opened_directly_falls_back_to_chromadb(
        small_store: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    import chromadb_rust_bindings

    def changed(*_args, **_kwargs):
        raise TypeError("Bindings() got an unexpected keyword argument")  # as a changed chromadb would

    monkeypatch.setattr(chromadb_rust_bindings, "Bindings", changed)
    assert open_reader(small_store.chroma_path) is None
    client = open_chroma_client(small_store, read_only=True)
    assert not isinstance(client, ChromaReader)
    assert client.list_collections()
