"""`python -m benchmarks.million`'s build, tiny: synthetic records go through the real ingest path
(store rows, both keyword lanes, the vector lane, the flip to published) with the paragraph chunker
and random vectors, and every lane ends up holding exactly the store's published chunks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchmarks import million
from rag.ingest.parse import parse_record


@pytest.fixture(scope="module")
def vocab():
    if not (million.DATASETS / "scifact" / "corpus.jsonl").is_file():
        pytest.skip("the SciFact corpus is not in ../shared/datasets")
    return million.vocabulary()


def test_each_paragraph_of_a_synthetic_record_is_one_chunk_under_its_title(vocab) -> None:
    records = million.synthetic_records(7, 5, vocab)
    assert records == million.synthetic_records(7, 5, vocab)  # a batch is the same every time
    for record in records:
        body = parse_record(record["title"], record["text"], record["_id"]).body
        specs = million.ParagraphChunker().chunk(body)
        assert len(specs) == len(record["text"].split("\n\n"))
        assert all(body[s.char_start:s.char_end] == s.text and s.heading_path == (record["title"],) for s in specs)


def test_random_vectors_are_unit_vectors_of_the_models_dimension() -> None:
    vectors = million.RandomEmbedder().embed(["a", "b", "c"])
    assert vectors.shape == (3, million.DIM)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_a_small_build_fills_every_lane_with_the_published_chunks(tmp_path: Path, vocab) -> None:
    env = {"RAG_HOME": str(tmp_path / "home")}
    meta = million.build(tmp_path, env, 60, batch_records=8)
    assert meta["chunks"] >= 60 and meta["batches"] >= 2
    assert million.build(tmp_path, env, 60)["built_at"] == meta["built_at"]  # cached: reused as it is
    from rag.service import KnowledgeService, Principal

    with KnowledgeService(million.settings_for(env), writer=False) as svc:
        kb_id = svc.knowledge_base(Principal.local_admin("default"), million.KB).id
        counts = svc.index.count(kb_id)  # the vector lane counts the collection of the model's name
        assert million.store_chunks(svc) == meta["chunks"]
        assert set(counts.values()) == {meta["chunks"]}, counts
