"""The ONNX Runtime encoder against the torch model it was exported from, on real SciFact text.

fp32 vectors agree with sentence-transformers' to cosine >= 0.999 (they share the embedding cache
and the vector index), int8 query vectors to >= 0.99: an answer's, and a search's through the model
quantized throughout (queries of SEARCH_MIN_TOKENS tokens or more; shorter ones take the answers'
model). The retrieval check (SciFact nDCG@10 within 0.005 of torch) is `python -m
benchmarks.embed_latency --ndcg-docs 1000` (docs/benchmarks.md): too slow for a test on two cores.
"""

from __future__ import annotations

import json
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from rag.errors import Unavailable
from rag.models.embed import CachedEmbedder, Turns, local_embedder
from rag.models.onnx_encoder import FP32_FILE, INT8_FILE, SEARCH_FILE, SEARCH_MIN_TOKENS, onnx_dir
from rag.settings import EmbedSettings, Settings

from ..support.paths import SHARED

SCIFACT = SHARED / "datasets" / "scifact"


def _sample() -> tuple[list[str], list[str]]:
    """(queries, passages): 40 SciFact queries, 16 abstracts (title and text, long ones truncated by
    the model), and a few short and odd texts."""
    with (SCIFACT / "queries.jsonl").open() as f:
        queries = [json.loads(line)["text"] for _, line in zip(range(40), f)]
    with (SCIFACT / "corpus.jsonl").open() as f:
        passages = [f"{d['title']}\n{d['text']}" for d in (json.loads(line) for _, line in zip(range(16), f))]
    odd = ["vpn setup", "  leading and trailing spaces  ", "Ünïcödé, emoji 🙂 and 東京", ""]
    return queries + odd, passages + odd


@pytest.fixture(scope="module")
def embedders():
    onnx = local_embedder(64, EmbedSettings(backend="onnx", int8_queries=True))
    onnx_fp32 = local_embedder(64, EmbedSettings(backend="onnx", int8_queries=False))
    torch = local_embedder(64, EmbedSettings(backend="torch"))
    return onnx, onnx_fp32, torch


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_fp32_document_vectors_match_the_torch_model(embedders) -> None:
    onnx, _, torch = embedders
    _, passages = _sample()
    ours, theirs = onnx.embed(passages), torch.embed(passages)
    assert ours.shape == theirs.shape == (len(passages), 384)
    assert _cosines(ours, theirs).min() >= 0.999
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_query_vectors_fp32_and_int8_match_the_torch_model(embedders) -> None:
    onnx_int8, onnx_fp32, torch = embedders
    queries, _ = _sample()
    reference = np.stack([torch.embed_query(q) for q in queries])
    fp32 = np.stack([onnx_fp32.embed_query(q) for q in queries])
    int8 = np.stack([onnx_int8.embed_query(q) for q in queries])
    search = np.stack([onnx_int8.embed_search_query(q) for q in queries])
    assert _cosines(fp32, reference).min() >= 0.999
    for vectors in (int8, search):
        assert 0.99 <= _cosines(vectors, reference).min() < 0.9999  # int8, not the fp32 model again
    assert not np.array_equal(int8, search)
    assert np.array_equal(onnx_fp32.embed_search_query(queries[0]), fp32[0])  # no int8: fp32 for both


def test_a_search_query_takes_the_cheaper_model_unless_it_is_short(embedders) -> None:
    """The model quantized throughout loses most on a query of a few tokens: those take the
    answers' int8 model, whose vectors a short search query gets exactly; a longer one does not."""
    onnx_int8, _, _ = embedders
    encoder = onnx_int8._onnx(SEARCH_FILE)
    short, longer = "vpn setup", "How many days of annual leave do new employees get?"
    assert len(encoder.tokens(short).ids) < SEARCH_MIN_TOKENS <= len(encoder.tokens(longer).ids)
    np.testing.assert_array_equal(onnx_int8.embed_search_query(short), onnx_int8.embed_query(short))
    cheaper, answers = onnx_int8.embed_search_query(longer), onnx_int8.embed_query(longer)
    assert 0.99 <= float(cheaper @ answers) < 0.9999
    np.testing.assert_array_equal(cheaper, encoder.encode([longer])[0])


def test_both_runtimes_share_the_cache_key_and_the_cache(embedders, tmp_path: Path) -> None:
    onnx, _, torch = embedders
    assert onnx.name == torch.name  # fp32 on either runtime: one cache key, one vector collection
    texts = ["Annual leave accrues each pay period.", "Expenses need a receipt."]
    first = CachedEmbedder(torch, tmp_path / "cache.sqlite")
    stored = first.embed(texts)
    second = CachedEmbedder(onnx, tmp_path / "cache.sqlite")
    assert np.array_equal(second.embed(texts), stored) and (second.hits, second.misses) == (2, 0)


def test_the_backend_is_a_setting(monkeypatch) -> None:
    monkeypatch.setenv("RAG_EMBED__BACKEND", "torch")
    monkeypatch.setenv("RAG_EMBED__INT8_QUERIES", "false")
    settings = Settings()
    assert settings.embed.backend == "torch" and settings.embed.int8_queries is False
    monkeypatch.setenv("RAG_EMBED__BACKEND", "tensorflow")
    with pytest.raises(ValueError, match="backend"):
        Settings()


def test_concurrent_queries_get_the_vectors_of_sequential_ones(embedders) -> None:
    onnx, _, _ = embedders
    queries, _ = _sample()
    alone = [onnx.embed_query(q) for q in queries]
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(onnx.embed_query, queries))
    for a, b in zip(alone, together):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_shared_turns_let_queries_run_together_and_background_work_alone() -> None:
    turns = Turns(shared=True)
    inside = threading.Barrier(2, timeout=10)
    order: list[str] = []

    def query(name: str) -> None:
        with turns.turn(background=False):
            inside.wait()  # both hold a turn at once, or this times out
            order.append(name)

    def bulk() -> None:
        with turns.turn(background=True):
            order.append("bulk")

    with turns.turn(background=False):  # held: the background caller must wait for it
        worker = threading.Thread(target=bulk)
        worker.start()
        threads = [threading.Thread(target=query, args=(f"q{i}",)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(15)
        assert sorted(order) == ["q0", "q1"]  # the queries ran beside the held turn; bulk waits
    worker.join(15)
    assert order[-1] == "bulk"


def test_a_missing_export_without_torch_is_a_clear_error(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` fails, as where torch is not installed
    embedder = local_embedder(64, EmbedSettings(onnx_dir=tmp_path / "none-here"))
    with pytest.raises(Unavailable) as caught:
        embedder.embed_query("how many days of leave")
    message = str(caught.value)
    assert "python -m rag.models.export_onnx" in message and "RAG_EMBED__BACKEND=torch" in message
    assert "how many days" not in message and "Traceback" not in message


def test_a_missing_export_is_made_on_first_use(tmp_path: Path, embedders) -> None:
    settings = EmbedSettings(onnx_dir=tmp_path / "fresh")
    embedder = local_embedder(64, settings)
    vector = embedder.embed_query("how many days of leave")
    assert all((onnx_dir(settings) / name).exists() for name in (FP32_FILE, INT8_FILE, SEARCH_FILE))
    assert not [p for p in onnx_dir(settings).iterdir() if p.is_dir()]  # no scratch left behind
    np.testing.assert_allclose(vector, embedders[0].embed_query("how many days of leave"), atol=1e-6)


def test_queries_and_an_answers_sentences_need_no_torch() -> None:
    """A process that only searches and answers (the CLI, `rag serve` between publishes) never
    imports torch or transformers: the ONNX encoder needs onnxruntime and tokenizers alone."""
    import subprocess

    script = (
        "import sys\n"
        "from rag.models.embed import local_embedder\n"
        "e = local_embedder(64)\n"
        "assert e.embed_query('how many days of leave').shape == (384,)\n"
        "assert e.embed(['Leave accrues each pay period.', 'Receipts are kept.']).shape == (2, 384)\n"
        "print(sorted(m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


def test_a_one_shot_command_warms_the_encoder_its_query_will_take(tmp_path: Path) -> None:
    """`rag search Q` / `rag ask Q` load the query's encoder while the store opens: a search's
    long query the cheaper file, a short one (and an answer's question) the answers' file."""
    from rag.models.embed import warm_query_encoder

    cases = [(True, "How many days of annual leave do new employees get?", SEARCH_FILE),
             (True, "vpn setup", INT8_FILE), (False, "How many days of annual leave do new employees get?", INT8_FILE)]
    for threads, (search, query, expected) in enumerate(cases, start=3):  # a fresh embedder each
        settings = Settings(home=tmp_path / f"h{threads}", embed=EmbedSettings(threads=threads))
        warm_query_encoder(settings, search=search, query=query)
        for thread in [t for t in threading.enumerate() if t.name == "warm-query-encoder"]:
            thread.join(60)
        embedder = local_embedder(settings.index.embed_batch_size, settings.embed)
        assert list(embedder._encoders) == [expected]  # the one file, opened on one thread
