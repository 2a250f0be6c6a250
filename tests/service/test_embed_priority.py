"""Queries do not wait behind a publish's embedding (issue 12, defect 3).

Publishing one large document used to embed the whole version in one call under the model's lock:
every search during it waited minutes. Now a publish embeds as background work, in slices, and a
waiting query takes the model between two slices.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import numpy as np

from rag.models.embed import Turns, bulk_embedding, local_embedder
from rag.service import KnowledgeService, Principal
from rag.settings import Settings
from rag.store.models import PUBLISHING


def _wait(condition, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def test_a_waiting_query_goes_before_the_next_background_turn() -> None:
    turns = Turns(fair_after=2, max_wait=120)  # the count rule alone: the test may run slowly
    order: list[str] = []
    hold = threading.Event()

    def take(name: str, background: bool, block: bool = False) -> None:
        with turns.turn(background):
            order.append(name)
            if block:
                hold.wait(30)

    first = threading.Thread(target=take, args=("bulk-1", True, True))
    first.start()
    _wait(lambda: order == ["bulk-1"], "the first background turn")
    waiters = [threading.Thread(target=take, args=("bulk-2", True))]
    waiters[0].start()
    _wait(lambda: turns.waiting() == (0, 1), "the second background caller to queue")
    for name in ("query-1", "query-2", "query-3"):
        waiters.append(threading.Thread(target=take, args=(name, False)))
        waiters[-1].start()
    _wait(lambda: turns.waiting() == (3, 1), "the queries to queue")
    hold.set()
    for thread in [first, *waiters]:
        thread.join(30)
    # Queries first, but after `fair_after` of them the waiting background work gets its turn.
    assert [name.split("-")[0] for name in order] == ["bulk", "query", "query", "bulk", "query"]
    assert order[3] == "bulk-2" and set(order[1:3] + order[4:]) == {"query-1", "query-2", "query-3"}


def test_background_slices_give_the_same_vectors(monkeypatch) -> None:
    embedder = local_embedder(64)
    monkeypatch.setattr(embedder, "SLICE_S", 0.0)  # the smallest slices
    embedder.embed_query("a query just came")
    before = embedder.turns.background_turns
    texts = [f"Leave policy paragraph {i}: " + "employees accrue annual leave each pay period. " * (i % 7 + 1)
             for i in range(12)]
    with bulk_embedding():
        sliced = embedder.embed(texts)
    assert embedder.turns.background_turns - before == 12 // embedder.MIN_SLICE
    whole = embedder.embed(texts)
    assert sliced.shape == whole.shape == (12, embedder.dim)
    np.testing.assert_allclose(sliced, whole, atol=1e-5)


def test_search_answers_while_a_large_document_is_being_embedded(tmp_path: Path) -> None:
    # A fresh embedding cache and unique text: the publish really runs the model.
    settings = Settings(home=tmp_path / "home", embed_cache=tmp_path / "embeddings.sqlite",
                        index={"chunk_size": 64, "chunk_overlap": 8})
    nonce = uuid.uuid4().hex[:8]
    paragraphs = [
        f"## Section {i}\n\nRecord {nonce}-{i}: travellers book lodging through the approved system and keep "
        f"every receipt for the voucher; per diem covers meals and incidentals on travel day {i}.\n"
        for i in range(160)
    ]
    with KnowledgeService(settings) as svc:
        svc.ensure_workspace("default")
        admin = Principal.local_admin("default")
        turns = svc.embedder.inner.turns
        # The smallest slices, whatever pace earlier tests in this process measured: many turns.
        svc.embedder.inner.SLICE_S = 0.0
        svc.search(admin, "warm up the model", 3)
        doc = svc.create_document(admin, None, "Travel rules", "# Travel rules\n\n" + "\n".join(paragraphs))
        before = turns.background_turns
        assert svc.publish_document_version(admin, doc.node_id, 1).status == PUBLISHING
        _wait(lambda: turns.background_turns > before, "the publish to start embedding")
        slices_during = []
        for query in ("lodging receipts", "per diem for meals", "travel voucher"):
            began = turns.background_turns
            svc.search(admin, query, 5)
            slices_during.append(turns.background_turns - began)
        done_after_searches = turns.background_turns - before
        assert svc.wait_for_publishing(300)
        total = turns.background_turns - before
        # Each search waited for the slice under way and one due slice at most, not for the rest of the
        # document: the publish was still embedding when the searches were answered.
        assert total >= 6, f"the document made only {total} slices: too small to show anything"
        assert max(slices_during) <= 3, slices_during  # under way, due, and one during its retrieval
        assert done_after_searches < total, (done_after_searches, total)
        assert svc.search(admin, f"Record {nonce}-7 lodging", 5).hits
