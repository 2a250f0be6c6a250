"""One model pass per chunk: the extractive answer's sentence vectors are pooled out of the chunk's
own pass at publish time (rag/models/onnx_encoder.py `pool_ranges`, CachedEmbedder.embed_chunks),
on the real packaged model and real handbook pages."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from rag.ingest.chunk import Chunker
from rag.models.embed import CachedEmbedder, SentenceSpan, bulk_embedding, local_embedder
from rag.service import KnowledgeService, Principal
from rag.settings import EmbedSettings, Settings
from rag.synthesize.extractive import ExtractiveSynthesizer
from rag.synthesize.extractive.tuning import TUNING

from ..support.paths import SHARED

PAGES = SHARED / "datasets" / "handbook_18f" / "pages"
LEAVE = PAGES / "travel-and-leave" / "leave.md"


def _chunks(*pages: Path) -> tuple[list[str], list[list[SentenceSpan]]]:
    texts, spans = [], []
    for page in pages:
        for spec in Chunker().chunk(page.read_text(encoding="utf-8"), None):
            indexed = spec.indexed_text(True)
            texts.append(indexed)
            spans.append(ExtractiveSynthesizer.publish_sentences(indexed, spec.text, spec.heading_path))
    return texts, spans


@pytest.fixture(scope="module")
def embedder():
    return local_embedder(64, EmbedSettings(backend="onnx", bulk_backend="onnx", sentence_vectors="pooled"))


def test_a_pooled_sentence_is_nearest_its_own_words(embedder) -> None:
    """Pooled out of its chunk, a sentence's vector is closer to that sentence embedded alone than
    to any other sentence of the chunk, for most sentences: the ranges are where its words are, not
    a neighbour's. (Not all: pooled in context, a sentence still leans towards its chunk's topic;
    133 of 140 here; ranges one sentence off give 1 of 140.)"""
    texts, spans = _chunks(LEAVE)
    with bulk_embedding():
        vectors, pooled = embedder.embed_pooled(texts, [[s.ranges for s in chunk] for chunk in spans])
    alone = embedder.embed(texts)
    assert np.min(np.sum(vectors * alone, axis=1)) > 0.9999  # the chunk's own vector is unchanged
    right = total = 0
    for chunk, found in zip(spans, pooled):
        if len(chunk) < 2:
            continue
        keys = embedder.embed([s.key for s in chunk])
        for i, vector in enumerate(found):
            if vector is not None:
                total += 1
                right += int(np.argmax(keys @ vector) == i)
    assert total >= 40
    assert right / total >= 0.9, (right, total)


def test_a_sentence_the_pass_cuts_off_is_embedded_alone(embedder, tmp_path: Path) -> None:
    """Past the model's 256 tokens a sentence is not in the chunk's pass: it is embedded alone, and
    an answer then finds both kinds in the cache, the model running for nothing more."""
    head = "Travel is booked through the agency portal. " + "Receipts are kept for audits. " * 60
    tail = "Lodging above the federal rate needs approval from a supervisor."
    text = head + tail
    spans = [SentenceSpan("Travel: Travel is booked through the agency portal.", ((0, 43),)),
             SentenceSpan(f"Travel: {tail}", ((len(head), len(text)),))]
    cache = CachedEmbedder(embedder, tmp_path / "cache.sqlite")
    with bulk_embedding():
        cache.embed_chunks([text], [spans])
    assert (cache.sentences_pooled, cache.sentences_alone) == (1, 1)
    misses = cache.misses
    found = cache.embed_sentences([s.key for s in spans])
    assert cache.misses == misses and found.shape == (2, 384)
    alone = embedder.embed([spans[1].key])[0]
    assert float(found[1] @ alone) > 0.9999  # the cut-off one is the sentence embedded alone


@pytest.mark.parametrize("kind", ["pooled", "alone"])
def test_publishing_embeds_what_answers_need_and_they_need_no_model(tmp_path: Path, kind: str) -> None:
    """Pooled (the default): a publish runs the model once per chunk (its sentences pooled out of
    that pass); alone: once per chunk and once per sentence. Alone, an answer to a question never
    asked before embeds no sentence: they are all in the cache. Pooled, it embeds its best few
    alone (TUNING.confirm_alone) and caches them: asked again, none."""
    pages = tmp_path / "pages"
    pages.mkdir()
    shutil.copy(LEAVE, pages / "leave.md")
    settings = Settings(home=tmp_path / "home", embed_cache=tmp_path / "cache.sqlite",
                        embed=EmbedSettings(sentence_vectors=kind))
    with KnowledgeService(settings) as svc:
        admin = Principal.local_admin("default")
        svc.ensure_workspace("default")
        report = svc.ingest_directory(admin, pages)
        cache = svc.embedder
        assert isinstance(cache, CachedEmbedder)
        if kind == "pooled":
            assert cache.misses == report.chunks + cache.sentences_alone  # one pass per chunk, plus the few cut off
            assert cache.sentences_pooled >= 5 * cache.sentences_alone
        else:
            assert cache.sentences_pooled == 0 and cache.sentences_alone >= 2 * report.chunks
            assert cache.misses == report.chunks + cache.sentences_alone
        question = "How many hours of annual leave can I carry over into the next year?"
        misses = cache.misses
        answer = svc.ask(admin, question)
        assert not answer.abstained and answer.sources
        if kind == "pooled":
            assert 1 <= cache.misses - misses <= TUNING.confirm_alone  # the best few, embedded alone
            misses = cache.misses
            assert svc.ask(admin, question).text == answer.text
        assert cache.misses == misses  # no sentence of the answer's excerpts waited for the model
    import sqlite3
    with sqlite3.connect(tmp_path / "cache.sqlite") as conn:
        names = {row[0] for row in conn.execute("SELECT DISTINCT model FROM embeddings")}
    # Alone, a sentence's vector is any text's (an upgraded store's answers find the ones cached
    # before); pooled, they are kept under a name of their own.
    pooled_name = {"local:all-MiniLM-L6-v2|sentences-pooled-0.4"} if kind == "pooled" else set()
    assert names == {"local:all-MiniLM-L6-v2"} | pooled_name


def test_changing_the_document_encoder_embeds_again_and_never_mixes(tmp_path: Path, caplog) -> None:
    """int8 document vectors are other vectors: their own cache key and collections. A store
    built with fp32 opened with int8 embeds its chunks again (said in the log), then drops the
    fp32 collection; searching works throughout."""
    pages = tmp_path / "pages"
    pages.mkdir()
    shutil.copy(LEAVE, pages / "leave.md")
    admin = Principal.local_admin("default")
    question = "How many hours of annual leave can I carry over into the next year?"
    fp32 = Settings(home=tmp_path / "home", embed_cache=tmp_path / "cache.sqlite")
    with KnowledgeService(fp32) as svc:
        svc.ensure_workspace("default")
        chunks = svc.ingest_directory(admin, pages).chunks
        before = svc.search(admin, question, 3).hits[0].chunk_id
        names_fp32 = {c.name for c in svc.index.lanes["vector"].client.list_collections()}
    int8 = fp32.model_copy(update={"embed": EmbedSettings(documents="int8")})
    with caplog.at_level("WARNING"), KnowledgeService(int8) as svc:
        assert svc.embedder.name.endswith("+int8")
        names_int8 = {c.name for c in svc.index.lanes["vector"].client.list_collections()}
        assert names_int8 and not names_int8 & names_fp32  # the fp32 collection is gone, not searched
        assert svc.index.count()["vector"] == chunks
        assert svc.search(admin, question, 3).hits[0].chunk_id == before
    assert "made by another encoder" in caplog.text
    import sqlite3
    with sqlite3.connect(tmp_path / "cache.sqlite") as conn:
        models = dict(conn.execute("SELECT model, count(*) FROM embeddings GROUP BY model").fetchall())
    # The int8 vectors of the chunks, apart from the fp32 ones (chunks and the sentences embedded alone).
    assert models["local:all-MiniLM-L6-v2+int8"] == chunks < models["local:all-MiniLM-L6-v2"]
    with pytest.raises(ValueError, match="need the onnx backend"):
        EmbedSettings(documents="int8", bulk_backend="torch")


def test_a_store_published_with_sentences_alone_needs_no_model_once_pooled(tmp_path: Path) -> None:
    """Turning pooling on for a store whose sentences were embedded alone: publishing its pages
    again and answering find every vector cached (the alone ones stand in for pooled ones), so
    the model runs for nothing, and nothing is stored under the pooled name."""
    pages = tmp_path / "pages"
    pages.mkdir()
    shutil.copy(LEAVE, pages / "leave.md")
    admin = Principal.local_admin("default")
    alone = Settings(home=tmp_path / "home", embed_cache=tmp_path / "cache.sqlite",
                     embed=EmbedSettings(sentence_vectors="alone"))
    with KnowledgeService(alone) as svc:
        svc.ensure_workspace("default")
        svc.ingest_directory(admin, pages)
    pooled = Settings(home=tmp_path / "again", embed_cache=tmp_path / "cache.sqlite",
                      embed=EmbedSettings(sentence_vectors="pooled"))
    with KnowledgeService(pooled) as svc:
        svc.ensure_workspace("default")
        assert svc.ingest_directory(admin, pages).chunks > 0
        answer = svc.ask(admin, "How many hours of annual leave can I carry over into the next year?")
        assert not answer.abstained
        assert svc.embedder.misses == 0 and svc.embedder.sentences_pooled == 0
    import sqlite3
    with sqlite3.connect(tmp_path / "cache.sqlite") as conn:
        names = {row[0] for row in conn.execute("SELECT DISTINCT model FROM embeddings")}
    assert names == {"local:all-MiniLM-L6-v2"}
