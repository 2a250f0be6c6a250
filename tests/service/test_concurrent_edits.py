"""Concurrent edits of one document become consecutive versions, on both deployments.

The promise is update_document's (docs/service.md): every edit is kept, numbered after the newest.
On SQLite two writers used to read the same newest number and both insert the next one; one got
`UNIQUE constraint failed: document_versions.node_id, number` (a 409 over HTTP).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from rag.service import KnowledgeService, Principal

THREADS = 12
EDITS_EACH = 4


def _edit_at_once(svc: KnowledgeService, principal: Principal, node_id: str) -> list[BaseException]:
    """THREADS threads, released together, each writing EDITS_EACH drafts; the errors they got."""
    start = threading.Barrier(THREADS)
    errors: list[BaseException] = []

    def writer(i: int) -> None:
        start.wait(30)
        for j in range(EDITS_EACH):
            try:
                svc.update_document(principal, node_id, f"# Rota\n\nWriter {i} edit {j}.\n")
            except BaseException as exc:  # noqa: BLE001 - collected: the assertion names them
                errors.append(exc)

    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(writer, range(THREADS)))
    return errors


def test_concurrent_updates_become_consecutive_versions(svc: KnowledgeService, admin: Principal) -> None:
    doc = svc.create_document(admin, None, "rota", "# Rota\n\nFirst draft.\n")
    errors = _edit_at_once(svc, admin, doc.node_id)
    assert errors == []
    versions = svc.versions(admin, doc.node_id)
    assert sorted(v.number for v in versions) == list(range(1, THREADS * EDITS_EACH + 2))
    bodies = {v.body for v in versions}
    assert bodies == {"# Rota\n\nFirst draft.\n"} | {
        f"# Rota\n\nWriter {i} edit {j}.\n" for i in range(THREADS) for j in range(EDITS_EACH)
    }


def test_edits_beside_publishes_all_kept(svc: KnowledgeService, admin: Principal) -> None:
    """Drafts written while other threads publish the same document: no edit lost, and the last
    published version is the one served."""
    doc = svc.create_document(admin, None, "rota", "# Rota\n\nFirst draft.\n")
    stop = threading.Event()
    publish_errors: list[BaseException] = []

    def publisher() -> None:
        # A few publish requests each, spread over the edits: the first at once, so that at least
        # one is made however fast the edits finish (waiting first left none when they took < 0.2 s).
        for _ in range(4):
            newest = max(v.number for v in svc.versions(admin, doc.node_id))
            try:
                svc.publish_document_version(admin, doc.node_id, newest)
            except BaseException as exc:  # noqa: BLE001 - collected
                publish_errors.append(exc)
            if stop.wait(0.2):
                return

    threads = [threading.Thread(target=publisher) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        errors = _edit_at_once(svc, admin, doc.node_id)
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
    assert svc.wait_for_publishing(120)
    assert errors == [] and publish_errors == []
    versions = svc.versions(admin, doc.node_id)
    assert sorted(v.number for v in versions) == list(range(1, THREADS * EDITS_EACH + 2))
    assert [v.status for v in versions].count("published") == 1
