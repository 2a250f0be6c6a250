"""An embedded Chroma collection whose HNSW files were cut short (a process killed while Chroma
wrote them) is derived data: a writer's start drops it and puts every published chunk's vector
back, and the vector lane answers again.

Chroma writes a collection's HNSW files once it holds more vectors than its sync threshold (1,000),
so the store is built as `python -m benchmarks.million` builds one: synthetic records through the
real ingest path, random vectors instead of the model (the same stub embeds them again here).
"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import million
from rag.retrieve.types import Query, Scope
from rag.service import KnowledgeService, Principal

ROOT = Path(__file__).resolve().parents[2]
# Built by another process, as the next process finds the damage: Chroma's engine keeps a collection
# it has read in its process's memory and would not read the files again in this one.
BUILD = ("import sys; from pathlib import Path; from benchmarks import million; "
         "million.build(Path(sys.argv[1]), {'RAG_HOME': sys.argv[2]}, 1200, batch_records=300)")


@pytest.fixture(scope="module")
def vocab():
    if not (million.DATASETS / "scifact" / "corpus.jsonl").is_file():
        pytest.skip("the SciFact corpus is not in ../shared/datasets")
    return million.vocabulary()


def test_a_collection_cut_short_is_dropped_and_filled_again(tmp_path: Path, vocab, caplog) -> None:
    env = {"RAG_HOME": str(tmp_path / "home")}
    subprocess.run([sys.executable, "-c", BUILD, str(tmp_path), env["RAG_HOME"]], cwd=ROOT, check=True, timeout=300,
                   capture_output=True)
    (pickle,) = (tmp_path / "home").rglob("index_metadata.pickle")  # the collection's HNSW files
    with pickle.open("r+b") as f:  # as a write killed half way leaves it
        f.truncate(pickle.stat().st_size // 2)
    svc = KnowledgeService(million.settings_for(env), defer_start=True)
    svc.engines.__dict__["embedder"] = million.RandomEmbedder(seed=1)  # no model: vectors from the stub
    with svc:
        kb = svc.knowledge_base(Principal.local_admin("default"), million.KB)
        with pytest.raises(Exception, match="hnsw segment reader"):  # the damage, as Chroma reports it
            svc.vector.count(kb.id)
        with caplog.at_level(logging.WARNING, logger="rag.retrieve.vector"):
            svc.start_writer()  # the writer's start: reconcile
        assert any("cannot be read" in record.getMessage() for record in caplog.records)
        assert svc.vector.count(kb.id) == million.store_chunks(svc) > 1000
        query = Query("anything", million.RandomEmbedder(seed=2).embed_query)
        with svc.db.session() as session:  # the vector lane answers again
            assert len(svc.vector.search(session, query, Scope(kb.workspace_id, (kb.id,)), 5)) == 5
