"""Searches on SQLite check their candidates against the published chunks held in memory; a change
to what is published, made by any connection (another process), is seen by the next search.

The other process is played by a plain sqlite3 connection to the same file, as a second
`rag` command would write it; migration 0010's triggers move the search generation.
"""

from __future__ import annotations

import sqlite3
import time

import pytest

from rag.retrieve.published import HELD, RELOAD_AFTER, published_ids, published_set, remember_statuses
from rag.service import KnowledgeService, Principal
from rag.settings import Settings

PAGES = {
    "Parking": "# Parking\n\nStaff park in the north garage; visitors use the south lot near reception.\n",
    "Lunch": "# Lunch\n\nThe canteen serves lunch from noon to two; soup of the day is on the board.\n",
}


@pytest.fixture
def store(tmp_path, monkeypatch):
    # Reads of the ids as soon as two searches saw a change: the spacing after a read (a multiple
    # of its time) is the last test's subject, and on a busy machine it would make the others wait.
    monkeypatch.setattr("rag.retrieve.published.RELOAD_SPACING", 0.0)
    settings = Settings(home=tmp_path / "home")
    with KnowledgeService(settings) as service:
        service.ensure_workspace("default")
        admin = Principal.local_admin("default")
        root = service.knowledge_base(admin, "default").root_id
        docs = {}
        for title, body in PAGES.items():
            docs[title] = service.create_document(admin, root, title, body).node_id
            service.publish_version(admin, docs[title], 1)
        yield service, admin, docs, settings.home / "rag.db"


def _titles(service, admin, question="where do staff park the car") -> list[str]:
    return [hit.title for hit in service.search(admin, question, 5).hits]


def _generation(db) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT value FROM search_generation WHERE id = 1").fetchone()[0]


def _other_process(db, sql: str, *args) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute(sql, args)


def _held(service) -> object:
    """What a search's checks read now, once any read of the ids in flight is done."""
    assert published_set(service.db.engine).settled()
    with service.db.session() as session:
        remember_statuses(session)
        published_ids(session, [1])
        return session.info[HELD]


def test_searches_read_the_published_set_once_it_is_steady_and_see_another_process_unpublish(store):
    service, admin, docs, db = store
    for _ in range(RELOAD_AFTER + 1):
        assert "Parking" in _titles(service, admin)
    assert _held(service) is not None  # steady: the checks read memory
    before = _generation(db)
    # Another process archives the parking page's published version.
    _other_process(db, "UPDATE document_versions SET status = 'archived' WHERE node_id = ? AND status = 'published'",
                   docs["Parking"])
    assert _generation(db) == before + 1
    assert "Parking" not in _titles(service, admin)  # the very next search
    assert "Parking" not in _titles(service, admin)
    _other_process(db, "UPDATE document_versions SET status = 'published' WHERE node_id = ?", docs["Parking"])
    assert "Parking" in _titles(service, admin)
    for _ in range(RELOAD_AFTER + 1):
        assert "Parking" in _titles(service, admin)
    assert _held(service) is not None


def test_only_changes_to_what_is_published_move_the_generation(store):
    service, admin, docs, db = store
    before = _generation(db)
    # A new draft, and a draft that goes to publishing and back, change nothing searchable.
    service.create_document(admin, service.knowledge_base(admin, "default").root_id, "Draft", "# Draft\n\nNot yet.\n")
    assert _generation(db) == before
    # Publishing it does; deleting a published document (its versions go by cascade) does too.
    draft = service.create_document(admin, service.knowledge_base(admin, "default").root_id, "Bikes",
                                    "# Bikes\n\nBikes go in the rack by the north garage.\n").node_id
    service.publish_version(admin, draft, 1)
    assert _generation(db) == before + 1
    _other_process(db, "DELETE FROM nodes WHERE id = ?", docs["Lunch"])
    assert _generation(db) == before + 2
    assert "Lunch" not in _titles(service, admin, "when is lunch served in the canteen")


def test_a_search_during_a_change_checks_by_key_until_the_set_is_read_again(store):
    service, admin, docs, db = store
    for _ in range(RELOAD_AFTER + 1):
        _titles(service, admin)
    _other_process(db, "UPDATE document_versions SET status = 'archived' WHERE node_id = ?", docs["Lunch"])
    assert _held(service) is None  # a generation not seen before: by primary key
    # Seen a second time: the ids are read on another thread; this search checks by key.
    with service.db.session() as session:
        remember_statuses(session)
        published_ids(session, [1])
        assert session.info[HELD] is None
    assert "Lunch" not in _titles(service, admin, "when is lunch served in the canteen")
    for _ in range(RELOAD_AFTER):
        _titles(service, admin)
    assert _held(service) is not None



def test_the_ids_are_read_again_no_sooner_than_the_spacing_after_the_last_read(store):
    service, admin, docs, db = store
    for _ in range(RELOAD_AFTER + 1):
        _titles(service, admin)
    assert _held(service) is not None
    published = published_set(service.db.engine)
    published._not_before = time.monotonic() + 3600  # as if the last read had taken six minutes
    _other_process(db, "UPDATE document_versions SET status = 'archived' WHERE node_id = ?", docs["Lunch"])
    for _ in range(RELOAD_AFTER + 3):  # however many searches see the change, none starts a read
        assert "Lunch" not in _titles(service, admin, "when is lunch served in the canteen")
    assert _held(service) is None  # the checks go by key meanwhile
    published._not_before = 0.0  # the spacing has passed
    for _ in range(RELOAD_AFTER):
        _titles(service, admin)
    assert _held(service) is not None
    # After a read, the next waits RELOAD_SPACING times as long as that one took.
    assert published._not_before > time.monotonic() - 1


def _all_published(db) -> list[int]:
    with sqlite3.connect(db) as conn:
        return sorted(row[0] for row in conn.execute(
            "SELECT c.id FROM chunks c JOIN document_versions v ON v.id = c.version_id WHERE v.status = 'published'"))


def _steady(service, admin) -> object:
    for _ in range(RELOAD_AFTER + 1):
        _titles(service, admin)
    held = _held(service)
    assert held is not None
    return held


def test_after_the_first_read_changes_are_applied_from_the_log_not_read_whole(store):
    service, admin, docs, db = store
    published = published_set(service.db.engine)
    _steady(service, admin)
    whole = published.reads["whole"]
    assert whole >= 1
    root = service.knowledge_base(admin, "default").root_id
    bikes = service.create_document(admin, root, "Bikes", "# Bikes\n\nBikes go in the rack by the north garage.\n")
    service.publish_version(admin, bikes.node_id, 1)  # published: its chunks logged as added
    assert list(_steady(service, admin)) == _all_published(db)
    # Another process withdraws one page, deletes another (its version's chunks go by cascade:
    # logged before they go) and publishes the first again.
    _other_process(db, "UPDATE document_versions SET status = 'archived' WHERE node_id = ?", docs["Parking"])
    assert list(_steady(service, admin)) == _all_published(db)
    _other_process(db, "DELETE FROM nodes WHERE id = ?", docs["Lunch"])
    assert list(_steady(service, admin)) == _all_published(db)
    assert "Lunch" not in _titles(service, admin, "when is lunch served in the canteen")
    _other_process(db, "UPDATE document_versions SET status = 'published' WHERE node_id = ?", docs["Parking"])
    assert list(_steady(service, admin)) == _all_published(db)
    assert "Parking" in _titles(service, admin)
    assert published.reads["whole"] == whole and published.reads["changes"] >= 4


def test_a_change_the_log_cannot_describe_or_no_longer_holds_reads_the_ids_whole(store):
    service, admin, docs, db = store
    published = published_set(service.db.engine)
    _steady(service, admin)
    whole = published.reads["whole"]
    # A version inserted already published (an import, another tool): the log says "read them all".
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("UPDATE document_versions SET status = 'archived' WHERE node_id = ?", (docs["Lunch"],))
        columns = [row[1] for row in conn.execute("PRAGMA table_info(document_versions)") if row[1] != "id"]
        copied = ", ".join("number + 1" if c == "number" else "'published'" if c == "status" else c for c in columns)
        conn.execute(f"INSERT INTO document_versions ({', '.join(columns)}) SELECT {copied} FROM document_versions "
                     "WHERE node_id = ?", (docs["Lunch"],))
    assert list(_steady(service, admin)) == _all_published(db)
    assert published.reads["whole"] == whole + 1
    # A holder further behind than the log keeps (its older rows deleted) reads them whole too.
    _other_process(db, "UPDATE document_versions SET status = 'archived' WHERE node_id = ?", docs["Parking"])
    _other_process(db, "DELETE FROM published_changes")
    _other_process(db, "UPDATE document_versions SET status = 'published' WHERE node_id = ?", docs["Parking"])
    assert list(_steady(service, admin)) == _all_published(db)
    assert published.reads["whole"] == whole + 2
    assert "Parking" in _titles(service, admin)
