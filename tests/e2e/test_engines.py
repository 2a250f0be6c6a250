"""Engines chosen by settings: a real Chroma server for the vector lane, a litellm embedding model."""

from __future__ import annotations

import socket

import numpy as np
import pytest

from rag.errors import Unavailable
from rag.models.embed import CachedEmbedder, LiteLLMEmbedder
from rag.service import KnowledgeService, Principal
from rag.settings import Settings

from ..support.chromaserver import start_chroma


def test_vector_lane_on_a_chroma_server(tmp_path, small_tree, chroma_server):
    settings = Settings(home=tmp_path / "home", chroma_url=chroma_server)
    with KnowledgeService(settings) as svc:
        svc.ensure_workspace("default")
        admin = Principal.local_admin("default")
        report = svc.ingest_directory(admin, small_tree)
        assert len(report.added) == 5
        assert svc.vector.count(svc.knowledge_base(admin, "default").id) == report.chunks
        assert not (tmp_path / "home" / "chroma").exists()  # nothing embedded: the server holds the vectors
        hits = svc.search(admin, "How much annual leave do I earn?", 3).hits
        assert hits[0].source == "fs:travel-and-leave/leave.md" and "vector" in hits[0].retrievers


def test_an_unreachable_chroma_server_is_a_clear_error(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = Settings(home=tmp_path / "home", chroma_url=f"http://127.0.0.1:{port}")
    with KnowledgeService(settings) as svc:
        svc.ensure_workspace("default")
        with pytest.raises(Unavailable, match="unreachable"):
            svc.search(Principal.local_admin("default"), "annual leave", 3)


class _FlakyEmbeddingAPI:
    """Stands in for a remote embedding service: deterministic vectors, transient failures first."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    def __call__(self, model: str, input: list[str], **kwargs):
        import litellm

        self.calls += 1
        if self.calls <= self.failures:
            raise litellm.exceptions.RateLimitError("slow down", llm_provider="openai", model=model)
        data = []
        for i, text in enumerate(input):
            rng = np.random.default_rng(abs(hash(text)) % (2**32))
            data.append({"embedding": (rng.normal(size=8) * 3).tolist(), "index": i})
        return litellm.EmbeddingResponse(model=model, data=data)


def test_litellm_embedder_retries_transient_failures_and_normalises(monkeypatch):
    import litellm

    api = _FlakyEmbeddingAPI(failures=2)
    monkeypatch.setattr(litellm, "embedding", api)
    embedder = LiteLLMEmbedder("openai/text-embedding-3-small", batch_size=2)
    monkeypatch.setattr("tenacity.nap.time.sleep", lambda s: None)
    vectors = embedder.embed(["a", "b", "c"])
    assert vectors.shape == (3, 8)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert api.calls == 4  # two failures, then one call per batch of two


def test_litellm_embedder_gives_up_with_unavailable(monkeypatch):
    import litellm

    monkeypatch.setattr(litellm, "embedding", _FlakyEmbeddingAPI(failures=100))
    monkeypatch.setattr("tenacity.nap.time.sleep", lambda s: None)
    with pytest.raises(Unavailable, match="embedding model openai/x is unavailable"):
        LiteLLMEmbedder("openai/x").embed(["a"])


def test_cached_embedder_embeds_each_text_once(tmp_path, monkeypatch):
    import litellm

    api = _FlakyEmbeddingAPI(failures=0)
    monkeypatch.setattr(litellm, "embedding", api)
    cached = CachedEmbedder(LiteLLMEmbedder("openai/y", batch_size=10), tmp_path / "cache.sqlite")
    first = cached.embed(["one", "two"])
    again = CachedEmbedder(LiteLLMEmbedder("openai/y", batch_size=10), tmp_path / "cache.sqlite").embed(["two", "one"])
    assert api.calls == 1
    assert np.allclose(first[::-1], again)


def test_a_chroma_server_that_goes_away_is_a_clear_error(tmp_path, small_tree):
    proc, url = start_chroma(tmp_path / "server")
    try:
        with KnowledgeService(Settings(home=tmp_path / "home", chroma_url=url)) as svc:
            svc.ensure_workspace("default")
            admin = Principal.local_admin("default")
            svc.ingest_directory(admin, small_tree)
            assert svc.search(admin, "How much annual leave do I earn?", 3).hits
            proc.terminate()
            proc.wait(timeout=30)
            with pytest.raises(Unavailable, match="unreachable") as info:
                svc.search(admin, "How much annual leave do I earn?", 3)
            assert "annual" not in str(info.value)
    finally:
        proc.kill()
