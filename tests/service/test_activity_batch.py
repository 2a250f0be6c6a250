"""Searches record their activity off the request's path (rag/service/activity.py): queued, written in
batches by a background thread, never lost, and in the history in the order the calls ended."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from rag.service import KnowledgeService, Principal
from rag.settings import Settings

ADMIN = Principal.local_admin("default")


def _store(tmp_path: Path) -> KnowledgeService:
    svc = KnowledgeService(Settings(home=tmp_path / "home"))
    svc.ensure_workspace("default")
    doc = svc.create_document(ADMIN, None, "Leave", "# Leave\n\nEmployees accrue annual leave each pay period.\n")
    svc.publish_document_version(ADMIN, doc.node_id, 1)
    assert svc.wait_for_publishing(120)
    return svc


def test_a_search_answers_while_the_store_cannot_be_written(tmp_path: Path) -> None:
    svc = _store(tmp_path)
    try:
        svc.search(ADMIN, "warm up", 3)
        blocker = sqlite3.connect(tmp_path / "home" / "rag.db", timeout=0, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")  # another process holds the store's write lock
        try:
            hits = [svc.search(ADMIN, f"annual leave {i}", 3).hits for i in range(5)]
        finally:
            blocker.execute("ROLLBACK")  # a write the search had waited for would have blocked until here
            blocker.close()
        assert all(hits)
        searches = [a for a in svc.activity(ADMIN, 50) if a.action == "search"]
        assert len(searches) == 6 and {a.outcome for a in searches} == {"ok"}
    finally:
        svc.close()


def test_the_history_keeps_the_order_calls_ended_in_and_closing_writes_the_queue(tmp_path: Path) -> None:
    svc = _store(tmp_path)
    svc.search(ADMIN, "annual leave", 3)
    folder = svc.create_folder(ADMIN, None, "Policies")
    for _ in range(300):  # more than one batch
        svc.search(ADMIN, "pay period", 3)
    svc.close()
    with KnowledgeService(Settings(home=tmp_path / "home"), writer=False) as again:
        actions = [(a.action, a.target) for a in reversed(again.activity(ADMIN, 1000))]
    first_search = actions.index(("search", None))
    assert actions[first_search + 1] == ("create_folder", folder.node_id)
    assert actions[first_search + 2:] == [("search", None)] * 300
