"""Peers run on the same data in the same process: bm25s, and LlamaIndex over Chroma with our embedder.

Each peer indexes one unit per corpus record (title + " " + text) and returns, per query, up to
`k` corpus ids, best first.
"""

from __future__ import annotations

import uuid
from typing import Any, Callable, Sequence

from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import PrivateAttr

from rag.models.embed import Embedder

Batch = Callable[[int], None]  # called with the number of texts just embedded


def record_text(record: dict) -> str:
    return f"{record.get('title') or ''} {record.get('text') or ''}".strip()


def _stemmer() -> Any:
    """PyStemmer's English stemmer (bm25s calls its `stemWords`), or None: then bm25s runs unstemmed."""
    try:
        import Stemmer
    except ImportError:
        return None
    return Stemmer.Stemmer("english")


def bm25s_stemmer_name() -> str:
    return "PyStemmer english" if _stemmer() is not None else "none, PyStemmer is not installed"


class Bm25sPeer:
    name = "bm25s"

    def __init__(self, corpus: Sequence[dict]) -> None:
        import bm25s

        self._bm25s = bm25s
        self.stemmer = _stemmer()
        self.ids = [r["_id"] for r in corpus]
        tokens = bm25s.tokenize(
            [record_text(r) for r in corpus], stopwords="en", stemmer=self.stemmer, show_progress=False
        )
        self.index = bm25s.BM25()  # defaults: Lucene BM25, k1=1.5, b=0.75
        self.index.index(tokens, show_progress=False)

    def search(self, query: str, k: int = 100) -> list[str]:
        tokens = self._bm25s.tokenize(
            [query], stopwords="en", stemmer=self.stemmer, return_ids=False, show_progress=False
        )
        docs, scores = self.index.retrieve(tokens, k=min(k, len(self.ids)), show_progress=False)
        # Documents that share no term with the query come back with score 0: they were not found.
        return [self.ids[int(d)] for d, s in zip(docs[0], scores[0], strict=True) if s > 0]


class RagEmbedding(BaseEmbedding):
    """Our embedder (the same model, its SQLite cache of document vectors) as a LlamaIndex embedding."""

    _embedder: Any = PrivateAttr()
    _on_batch: Any = PrivateAttr(default=None)

    def __init__(self, embedder: Embedder, on_batch: Batch | None = None, **kwargs: Any) -> None:
        super().__init__(model_name=embedder.name, **kwargs)
        self._embedder = embedder
        self._on_batch = on_batch

    @classmethod
    def class_name(cls) -> str:
        return "RagEmbedding"

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._embedder.embed_query(query).tolist()

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        vectors = self._embedder.embed(texts).tolist()
        if self._on_batch is not None:
            self._on_batch(len(texts))
        return vectors


class LlamaIndexChromaPeer:
    """A `VectorStoreIndex` over an in-memory Chroma collection, one node per corpus record."""

    name = "llamaindex_chroma"

    def __init__(self, corpus: Sequence[dict], embedder: Embedder, on_batch: Batch | None = None, k: int = 100) -> None:
        import chromadb
        from chromadb.config import Settings as ChromaSettings
        from llama_index.core import StorageContext, VectorStoreIndex
        from llama_index.core.schema import TextNode
        from llama_index.vector_stores.chroma import ChromaVectorStore

        client = chromadb.EphemeralClient(settings=ChromaSettings(anonymized_telemetry=False))
        collection = client.create_collection(
            f"eval-peer-{uuid.uuid4().hex[:12]}", configuration={"hnsw": {"space": "cosine"}}
        )
        storage = StorageContext.from_defaults(vector_store=ChromaVectorStore(chroma_collection=collection))
        self.embed_model = RagEmbedding(embedder, on_batch=on_batch, embed_batch_size=256)
        nodes = [TextNode(id_=r["_id"], text=record_text(r)) for r in corpus]
        index = VectorStoreIndex(nodes, storage_context=storage, embed_model=self.embed_model)
        self.retriever = index.as_retriever(similarity_top_k=k)

    def search(self, query: str) -> list[str]:
        return [hit.node.node_id for hit in self.retriever.retrieve(query)]
