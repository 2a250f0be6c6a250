"""A damaged keyword index (tantivy, in RAG_HOME/keyword on the embedded default) is derived data:
it is set aside and rebuilt from the chunks, and `rag search` and the service keep answering.

Embedded store only: the scale-out deployment's keyword lane is PostgreSQL full text, inside the
store's own transactions, so it has no index files to damage.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Callable

import pytest
from sqlalchemy import func, select
from typer.testing import CliRunner

from rag.cli import app
from rag.retrieve.lanes import ChunkSource
from rag.retrieve.tantivy_lane import TantivyKeywordLane, is_damage
from rag.retrieve.types import Scope
from rag.service import KnowledgeService, Principal
from rag.settings import Settings
from rag.store.models import Chunk

ADMIN = Principal.local_admin("default")
QUERY = "How much annual leave do I earn?"
LEAVE = "fs:default:default:travel-and-leave/leave.md"


def _segment_files(index: Path, suffix: str) -> list[Path]:
    found = [p for p in index.iterdir() if p.suffix == suffix]
    assert found, f"no {suffix} segment file in {index}"
    return found


def garble_meta(index: Path) -> None:
    (index / "meta.json").write_text("garbage\n")  # the reproduction


def truncate_segment(index: Path) -> None:
    for path in _segment_files(index, ".idx"):
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])


def delete_segment(index: Path) -> None:
    for path in _segment_files(index, ".term"):
        path.unlink()


def scramble_terms(index: Path) -> None:
    """Same length, footer intact: opening succeeds, reading the term dictionary does not."""
    for path in _segment_files(index, ".term"):
        data = bytearray(path.read_bytes())
        for i in range(0, len(data) - 100, 7):
            data[i] ^= 0xA5
        path.write_bytes(bytes(data))


DAMAGE: dict[str, Callable[[Path], None]] = {
    "garbled meta.json": garble_meta,
    "truncated segment": truncate_segment,
    "deleted segment": delete_segment,
    "scrambled term dictionary": scramble_terms,
}


@pytest.fixture(scope="module")
def ingested(tmp_path_factory) -> Path:
    """A home with the five small-tree pages published; each test damages its own copy."""
    from ..support.paths import HANDBOOK, SMALL_SET

    root = tmp_path_factory.mktemp("keyword-repair")
    for rel in SMALL_SET:
        (root / "pages" / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(HANDBOOK / rel, root / "pages" / rel)
    with KnowledgeService(Settings(home=root / "home")) as svc:
        svc.ensure_workspace("default")
        assert len(svc.ingest_directory(ADMIN, root / "pages").added) == 5
    return root / "home"


def _whole(svc: KnowledgeService) -> bool:
    """The index holds exactly the store's chunks (what reconcile compares)."""
    with svc.db.session() as session:
        count, total = session.execute(select(func.count(), func.coalesce(func.sum(Chunk.id), 0))).one()
        return svc.keyword.fingerprint(session) == (count, total) and count > 0


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_keyword_index_is_rebuilt_and_search_keeps_working(ingested, tmp_path, damage):
    home = tmp_path / "home"
    shutil.copytree(ingested, home)
    DAMAGE[damage](home / "keyword")

    # `rag search` (a reader): it used to exit 1 with "an unexpected error"
    result = CliRunner().invoke(app, ["search", QUERY, "--limit", "3", "--json"], env={"RAG_HOME": str(home)})
    assert result.exit_code == 0, result.output
    top = json.loads(result.stdout)["results"][0]
    assert top["source_id"] == LEAVE and "text" in top["retrievers"]  # the keyword lane answered, rebuilt
    assert (home / "keyword.broken").is_dir()  # the damaged copy is kept aside for a post-mortem

    # the service (a writer, as `rag serve` opens it): whole, and both lanes find the page
    with KnowledgeService(Settings(home=home)) as svc:
        assert _whole(svc)
        assert svc.search(ADMIN, QUERY, 1, lanes=("text",)).hits[0].source_id == LEAVE
        hit = svc.search(ADMIN, QUERY, 1).hits[0]
        assert hit.source_id == LEAVE and set(hit.retrievers) == {"vector", "text"}


def test_a_writer_rebuilds_a_damaged_index_when_it_opens(ingested, tmp_path):
    home = tmp_path / "home"
    shutil.copytree(ingested, home)
    garble_meta(home / "keyword")
    with KnowledgeService(Settings(home=home)) as svc:  # the start-up reconcile rebuilds it at once
        assert not svc.keyword.stale and _whole(svc)
        assert svc.search(ADMIN, QUERY, 1, lanes=("text",)).hits[0].source_id == LEAVE


# ----- damage that only a query finds -----

WORDS = [f"w{i:04d}" for i in range(3000)]
ROWS = [(i, " ".join(WORDS[(i * 7 + j) % 3000] for j in range(40)), "kb", f"n{i}") for i in range(1, 3000)]
SCOPE = Scope("default", ("kb",), None)


def _raw_hits(lane: TantivyKeywordLane, word: str) -> list[int]:
    """The lane's tantivy query alone (no store to check published chunks against)."""
    searcher = lane.index.searcher()
    hits = searcher.search(lane._query([word], SCOPE, searcher), 5, count=False).hits
    return sorted(searcher.fast_field_values("id", [address for _, address in hits]))


def _fails(lane: TantivyKeywordLane, word: str) -> bool:
    try:
        _raw_hits(lane, word)
    except BaseException as exc:  # noqa: BLE001 - tantivy panics are BaseExceptions
        if not is_damage(exc):
            raise
        return True
    return False


def test_damage_that_a_query_finds_is_repaired_and_the_query_answered(tmp_path):
    """Bytes near the end of the term dictionary: the index opens and passes its probe, and only
    queries for some words fail (a Rust panic). The guarded read sets the index aside, rebuilds it
    from the attached rows and answers; nothing fails."""
    path = tmp_path / "keyword"
    lane = TantivyKeywordLane(path)
    lane.add(None, ROWS)
    expected = {word: _raw_hits(lane, word) for word in WORDS[::50]}
    lane.close()
    del lane
    (term,) = _segment_files(path, ".term")
    data = bytearray(term.read_bytes())
    start = int(len(data) * 0.9)
    for i in range(start, min(len(data) - 64, start + 200)):
        data[i] ^= 0x5A
    term.write_bytes(bytes(data))

    lane = TantivyKeywordLane(path)
    lane.attach(ChunkSource(db=None, rows=lambda session, ids: iter(ROWS), embed=None))  # type: ignore[arg-type]
    assert not lane.stale, "this damage should pass the probe on opening"
    failing = [word for word in expected if _fails(lane, word)]
    assert failing, "the damaged term dictionary should fail some query"
    word = failing[0]
    assert lane._guarded(lambda: _raw_hits(lane, word), session=object()) == expected[word]
    assert not lane.stale and (tmp_path / "keyword.broken").is_dir()
    assert all(_raw_hits(lane, w) == hits for w, hits in expected.items())
    assert lane.fingerprint(None) == (len(ROWS), sum(row[0] for row in ROWS))
    lane.close()
    assert os.listdir(path)


def test_the_knowledge_base_filter_is_left_out_only_where_it_keeps_everything(tmp_path):
    """A scope over every knowledge base the index holds searches the words alone (tantivy skips
    more that way) and finds what the filtered query finds, scores included; a scope over some of
    them keeps the filter, and finds only their chunks, also once the other's are deleted."""
    lane = TantivyKeywordLane(tmp_path / "keyword")
    rows = [(i, f"annual leave accrual policy note {i % 7} {'carry over' if i % 3 else 'payout'}", "a" if i % 2 else "b",
             f"n{i}") for i in range(1, 400)]
    lane.add(None, rows)

    def hits(scope: Scope, filtered: bool | None = None) -> list[tuple[float, int]]:
        searcher = lane.index.searcher()
        if filtered is not None:
            lane._holds_only = lambda searcher, kb_ids: not filtered  # type: ignore[method-assign]
        try:
            found = searcher.search(lane._query(["leave", "payout", "carry"], scope, searcher), 50, count=False).hits
        finally:
            lane.__dict__.pop("_holds_only", None)
        return list(zip([score for score, _ in found], searcher.fast_field_values("id", [a for _, a in found])))

    both, only_a = Scope("default", ("a", "b"), None), Scope("default", ("a",), None)
    searcher = lane.index.searcher()
    assert lane._holds_only(searcher, both.kb_ids) and not lane._holds_only(searcher, only_a.kb_ids)
    assert hits(both) == hits(both, filtered=True) and len(hits(both)) == 50
    assert {chunk_id % 2 for _, chunk_id in hits(only_a)} == {1}  # kb "a" holds the odd ids
    lane.delete(None, [(i, "b") for i in range(2, 400, 2)])
    # "b" may stay in the term dictionary (the filter then stays) or be merged away: "a" alone either way.
    assert {chunk_id % 2 for _, chunk_id in hits(only_a)} == {1} and len(hits(only_a)) == 50
    lane.close()
