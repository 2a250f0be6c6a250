"""Publishing: chunk, embed and index versions, then make them the searchable ones.

The order is what keeps search whole: a version's chunks are written to every lane of the search
index while it is `publishing` (invisible to search), and only then, in one transaction, does it
become `published` and the previous published version `archived`. An error on the way cleans up
and puts the version back in draft; a crash leaves it `publishing`, and `resume()` finishes it on
the next start. The previous version stays searchable throughout. The background queue and the
scale-out worker that run publishes are in publish_queue.py.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import numpy as np
from sqlalchemy import bindparam, func, insert, select

from rag import telemetry
from rag.errors import Unavailable
from rag.ingest.chunk import Chunker, ChunkSpec
from rag.models.embed import CachedEmbedder, Embedder, SentenceSpan, bulk_embedding
from rag.retrieve.index import SearchIndex
from rag.retrieve.lanes import ChunkSource
from rag.retrieve.types import IndexRow, heading_text
from rag.store.db import Database
from rag.store.models import (
    ARCHIVED,
    DRAFT,
    PUBLISHED,
    PUBLISHING,
    Chunk,
    DocumentVersion,
    Node,
    utcnow,
)

log = logging.getLogger(__name__)

# The chunks as the lanes index them: all (a repair walks them), or these.
_INDEXED_ROWS = select(
    Chunk.id, Chunk.kb_id, Chunk.node_id, Chunk.text, Chunk.heading_path, Chunk.char_start, Chunk.char_end
).order_by(Chunk.id)
_INDEXED_ROWS_OF = _INDEXED_ROWS.where(Chunk.id.in_(bindparam("ids", expanding=True)))

Progress = Callable[[int, int], None]  # (chunks done, chunks in all)


def lock_nodes(session, node_ids: Sequence[str]) -> None:
    """Serialise writers of these documents until the transaction ends, so that what the caller
    reads next (the newest version number, the live version) stays true until it commits.

    PostgreSQL: a row lock, taken in id order so concurrent writers cannot deadlock; NO KEY UPDATE,
    so inserting rows that refer to them is not blocked. SQLite has no row locks and Python's
    driver starts a transaction only at the first write, so two writers could both read version
    N and both insert N + 1 (a UNIQUE violation): the transaction takes SQLite's write lock now
    (BEGIN IMMEDIATE), which serialises it against every other writer, this process's or not."""
    if session.get_bind().dialect.name == "sqlite":
        driver = session.connection().connection.driver_connection
        if not driver.in_transaction:  # one that has written already holds the write lock
            driver.execute("BEGIN IMMEDIATE")
        return
    session.execute(
        select(Node.id).where(Node.id.in_(sorted(set(node_ids)))).order_by(Node.id).with_for_update(key_share=True)
    )


def request_publish(session, version: DocumentVersion, from_status: str = DRAFT) -> None:
    """Make `version` a publish job: status `publishing`, after every earlier request for its
    document (the latest request wins), returning to `from_status` if indexing fails."""
    request_publishes(session, [version], from_status)


def request_publishes(session, versions: Sequence[DocumentVersion], from_status: str = DRAFT) -> None:
    """request_publish for many versions with two statements (an import's tens of thousands);
    versions of one document are requested in the order given."""
    node_ids = sorted({v.node_id for v in versions})
    if not node_ids:
        return
    lock_nodes(session, node_ids)
    latest = dict(session.execute(
        select(DocumentVersion.node_id, func.max(DocumentVersion.publish_seq))
        .where(DocumentVersion.node_id.in_(node_ids)).group_by(DocumentVersion.node_id)
    ).all())
    for version in versions:
        seq = int(latest.get(version.node_id) or 0) + 1
        latest[version.node_id] = seq
        version.status, version.archived_at = PUBLISHING, None
        version.publish_seq, version.publish_from = seq, from_status


@dataclass
class _Pending:
    version_id: int
    node_id: str
    kb_id: str
    specs: list
    texts: list[str]


class Publisher:
    """Writes versions' chunks through the search index, and is the index's source of chunks: it
    knows how a stored chunk's indexed text is made, and embeds as background work."""

    def __init__(
        self,
        db: Database,
        chunker: Chunker,
        embedder: Callable[[], Embedder],
        index: SearchIndex,
        contextual_headings: bool = True,
        batch_chunks: int = 512,
        sentences: Callable[[str, str, Sequence[str]], list[SentenceSpan]] | None = None,
    ) -> None:
        self.db = db
        # The sentences of each chunk an answer embeds, from (its indexed text, its text, its
        # heading path): the extractive answer's, embedded while publishing (alone, or pooled out
        # of the chunk's own pass: EmbedSettings.sentence_vectors), so that a question never asked
        # before finds their vectors in the embedding cache instead of waiting for the model.
        self.sentences = sentences
        self.chunker = chunker
        self._embedder = embedder
        self.index = index
        self.contextual = contextual_headings
        self.batch_chunks = batch_chunks
        # A lane outside the store rebuilds itself from the chunks when damaged; reconcile and
        # moves read them from here too.
        index.attach(ChunkSource(db, self.indexed_rows, self._embed, batch_chunks))

    def publish(self, version_ids: Sequence[int], progress: Progress | None = None, *, wait: bool = True) -> int:
        """Index and publish versions that are already marked `publishing` (publish jobs); returns
        the chunks this process indexed.

        Each group of jobs is claimed first (PostgreSQL: a row lock, `FOR NO KEY UPDATE SKIP
        LOCKED`, held until the group is published or put back), so that several workers never
        index one version twice. Jobs another worker holds are waited for (`wait`), and taken over
        when that worker died; the lock went with its connection."""
        version_ids = list(dict.fromkeys(version_ids))
        if not version_ids:
            return 0
        pending = self._prepare(version_ids)
        total = sum(len(p.texts) for p in pending)
        done = 0
        if progress:
            progress(0, total)
        # Groups of versions of about batch_chunks chunks: embedding batches stay large, and an
        # interruption leaves the earlier groups published.
        groups: list[list[_Pending]] = [[]]
        size = 0
        for item in pending:
            if groups[-1] and size >= self.batch_chunks:
                groups.append([])
                size = 0
            groups[-1].append(item)
            size += len(item.texts)
        held_elsewhere: list[int] = []
        accounted = 0  # chunks indexed here or left to another worker
        for group in groups:
            indexed, skipped = self._publish_group(group)
            done += indexed
            held_elsewhere += skipped
            accounted += sum(len(p.texts) for p in group)
            self.index.compact()  # a lane's merge of the parts its writes appended, when one is due
            if progress:
                progress(accounted, total)
        if held_elsewhere and wait:
            done += self._wait_for(held_elsewhere)
        return done

    def _prepare(self, version_ids: list[int]) -> list[_Pending]:
        """Chunk the jobs' bodies (pure work: nothing is claimed or written yet)."""
        with self.db.session() as session:
            rows = session.execute(
                select(DocumentVersion.id, DocumentVersion.body, DocumentVersion.pages, Node.id, Node.kb_id)
                .join(Node, Node.id == DocumentVersion.node_id)
                .where(DocumentVersion.id.in_(version_ids), DocumentVersion.status == PUBLISHING)
                .order_by(DocumentVersion.id)
            ).all()
        pending = []
        for version_id, body, pages, node_id, kb_id in rows:
            specs = self.chunker.chunk(body, pages)
            pending.append(
                _Pending(version_id, node_id, kb_id, specs, [s.indexed_text(self.contextual) for s in specs])
            )
        return pending

    def _claim(self, session, version_ids: Sequence[int]) -> set[int]:
        """Lock the jobs no other worker holds; the lock lasts as long as `session`'s transaction.
        NO KEY UPDATE, so that inserting chunks (whose foreign key takes KEY SHARE) is not blocked."""
        return set(session.scalars(
            select(DocumentVersion.id)
            .where(DocumentVersion.id.in_(list(version_ids)), DocumentVersion.status == PUBLISHING)
            .with_for_update(skip_locked=True, key_share=True)
        ))

    def _publish_group(self, group: list[_Pending]) -> tuple[int, list[int]]:
        """(chunks indexed, jobs another worker holds)."""
        with self.db.session() as claim:
            claimed = self._claim(claim, [p.version_id for p in group])
            skipped = [p.version_id for p in group if p.version_id not in claimed]
            group = [p for p in group if p.version_id in claimed]
            if not group:
                return 0, skipped
            ids = [p.version_id for p in group]
            self._drop_chunks_of(ids)  # leftovers of an attempt that died
            archived = self._index_and_flip(claim, group)
        self._drop_chunks_of(archived)
        return sum(len(p.texts) for p in group), skipped

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        """Chunk texts to vectors as background work: the model serves waiting queries between
        small slices of it."""
        with bulk_embedding():
            return self._embedder().embed(list(texts)) if texts else np.zeros((0, 1), dtype=np.float32)

    def _embed_with_sentences(self, texts: Sequence[str], spans: Sequence[Sequence[SentenceSpan]]) -> np.ndarray:
        """Chunk vectors, their sentences' kept in the cache for answers (one pass per chunk where
        the embedder pools them: CachedEmbedder.embed_chunks). An embedder with no cache keeps
        nothing: an answer embeds its sentences then."""
        embedder = self._embedder()
        if not isinstance(embedder, CachedEmbedder):
            return self._embed(texts)
        with bulk_embedding():
            return embedder.embed_chunks(texts, spans)

    def _index_and_flip(self, claim, group: list[_Pending]) -> list[int]:
        """Write the group's chunks (committed, still invisible: their versions are `publishing`)
        with the lanes in the store in the same transaction, then the lanes outside it, then flip
        the versions in the claim's transaction. Returns the versions archived by the flip. On an
        error everything written is removed and the versions go back. Timed as the stage `publish`."""
        with telemetry.stage("publish"):
            return self._index_and_flip_timed(claim, group)

    def _index_and_flip_timed(self, claim, group: list[_Pending]) -> list[int]:
        texts = [t for p in group for t in p.texts]
        version_ids = [p.version_id for p in group]
        try:
            if self.sentences is not None:
                spans = [self.sentences(text, spec.text, spec.heading_path)
                         for p in group for spec, text in zip(p.specs, p.texts)]
                vectors = self._embed_with_sentences(texts, spans)
                vectors = vectors if self.index.uses_vectors else None
            else:
                vectors = self._embed(texts) if self.index.uses_vectors else None
            rows = [
                {
                    "version_id": p.version_id,
                    "node_id": p.node_id,
                    "kb_id": p.kb_id,
                    "ordinal": i,
                    "text": spec.text,
                    "heading_path": list(spec.heading_path),
                    "char_start": spec.char_start,
                    "char_end": spec.char_end,
                    "page_start": spec.page_start,
                    "page_end": spec.page_end,
                    "locator": spec.locator,
                }
                for p in group
                for i, spec in enumerate(p.specs)
            ]
            if rows:
                with self.db.session() as session:
                    ids = list(session.scalars(insert(Chunk).returning(Chunk.id, sort_by_parameter_order=True), rows))
                    indexed = [IndexRow(i, t, r["kb_id"], r["node_id"], heading_text(r["heading_path"]))
                               for i, t, r in zip(ids, texts, rows)]
                    self.index.add(session, indexed, vectors, in_store=True)
                # Chunk rows are committed before any index outside the store has them: such an
                # index never holds a chunk the store does not, which is what lets another worker
                # reconcile it at any time.
                self.index.add(None, indexed, vectors, in_store=False)
            return self._flip(claim, version_ids)
        except BaseException as exc:
            self._undo(claim, version_ids, exc)
            raise

    def _undo(self, claim, version_ids: list[int], exc: BaseException) -> None:
        """After a failed publish: remove what was written, and put the versions back (or leave
        them `publishing` for the workers to retry, when a backend is down on PostgreSQL)."""
        # A backend that is down (the Chroma server, a remote embedding model) is not a failed
        # publish: on PostgreSQL the jobs stay `publishing` and the publish workers, which poll
        # for unclaimed jobs, retry them until it is back. Elsewhere no worker would.
        retry = isinstance(exc, Unavailable) and self.db.dialect == "postgresql"
        if retry:
            log.warning("publishing waits for a backend that is down; the versions stay publishing: %s", exc)
        else:
            log.exception("publishing failed; the versions go back to draft (or archived, for a rollback)")
        self._drop_chunks_of(version_ids)  # the chunk rows, and with them every lane's copy
        claim.rollback()  # the flip may have failed half way (or been chosen as a deadlock's victim)
        if retry:
            return
        for version in claim.scalars(
            select(DocumentVersion).where(DocumentVersion.id.in_(version_ids), DocumentVersion.status == PUBLISHING)
        ):
            version.status = version.publish_from or DRAFT
            if version.status == ARCHIVED:
                version.archived_at = utcnow()
        claim.commit()

    def _flip(self, session, version_ids: list[int]) -> list[int]:
        """In the claim's transaction: each new version becomes published and its predecessor
        archived, under a lock on the document, unless a later publish request of that document was
        published first: then this one is archived at once (the latest request wins, whichever
        finishes first). Returns the versions archived. A few statements for the whole group."""
        now = utcnow()
        versions = session.scalars(
            select(DocumentVersion).where(DocumentVersion.id.in_(version_ids)).order_by(DocumentVersion.publish_seq)
        ).all()
        node_ids = sorted({v.node_id for v in versions})
        lock_nodes(session, node_ids)
        live: dict[str, list[DocumentVersion]] = {}
        for old in session.scalars(select(DocumentVersion).where(
            DocumentVersion.node_id.in_(node_ids),
            DocumentVersion.status == PUBLISHED,
            DocumentVersion.id.not_in(version_ids),
        )):
            live.setdefault(old.node_id, []).append(old)
        archived: list[int] = []
        for version in versions:  # in request order: a later request of one document replaces an earlier one
            current = live.get(version.node_id, [])
            if any(old.publish_seq > version.publish_seq for old in current):
                log.info("version %s was superseded by a later publish while indexing; archived", version.id)
                version.status, version.archived_at = ARCHIVED, now
                archived.append(version.id)
                continue
            for old in current:
                old.status, old.archived_at = ARCHIVED, now
                archived.append(old.id)
            version.status, version.published_at = PUBLISHED, now
            live[version.node_id] = [version]
        session.flush()
        return archived

    def _wait_for(self, version_ids: list[int]) -> int:
        """Wait until other workers finish these jobs (a blocking lock); take over any left
        `publishing` (its worker died). Raises when one of them ended back in draft."""
        indexed = 0
        while True:
            with self.db.session() as session:
                still = list(session.scalars(
                    select(DocumentVersion.id)
                    .where(DocumentVersion.id.in_(version_ids), DocumentVersion.status == PUBLISHING)
                    .with_for_update(key_share=True)
                ))
            if not still:
                break
            indexed += self.publish(still, wait=False)
        with self.db.session() as session:
            failed = session.scalar(
                select(func.count()).where(DocumentVersion.id.in_(version_ids), DocumentVersion.status == DRAFT)
            )
        if failed:
            raise Unavailable("publishing failed in another worker; the version is back in draft (see its log)")
        return indexed

    def _drop_chunks_of(self, version_ids: Sequence[int]) -> None:
        """Remove these versions' chunks: from the lanes in the store and the chunk rows in one
        transaction, then from the lanes outside it."""
        if not version_ids:
            return
        with self.db.session() as session:
            chunks = [(int(chunk_id), kb_id) for chunk_id, kb_id in session.execute(
                select(Chunk.id, Chunk.kb_id).where(Chunk.version_id.in_(list(version_ids)))
            )]
            if not chunks:
                return
            self.index.delete(session, chunks, in_store=True)
            session.query(Chunk).filter(Chunk.version_id.in_(list(version_ids))).delete(synchronize_session=False)
        self.index.delete(None, chunks, in_store=False)

    def drop_chunks_of_nodes(self, node_ids: Sequence[str]) -> None:
        with self.db.session() as session:
            version_ids = list(
                session.scalars(select(DocumentVersion.id).where(DocumentVersion.node_id.in_(list(node_ids))))
            )
        self._drop_chunks_of(version_ids)
        self.index.compact()

    def unpublish_nodes(self, node_ids: Sequence[str]) -> list[int]:
        """Archive these documents' published versions, their chunks out of every lane first (a
        source's item that vanished: the document and its history stay). Returns the versions archived."""
        if not node_ids:
            return []
        with self.db.session() as session:
            version_ids = list(session.scalars(select(DocumentVersion.id).where(
                DocumentVersion.node_id.in_(list(node_ids)), DocumentVersion.status == PUBLISHED)))
        self._drop_chunks_of(version_ids)
        with self.db.session() as session:
            lock_nodes(session, sorted(set(node_ids)))
            now = utcnow()
            for version in session.scalars(select(DocumentVersion).where(
                    DocumentVersion.id.in_(version_ids), DocumentVersion.status == PUBLISHED)):
                version.status, version.archived_at = ARCHIVED, now
        self.index.compact()
        return version_ids

    def indexed_rows(self, session, chunk_ids: Sequence[int] | None = None) -> Iterator[IndexRow]:
        """(chunk id, indexed text, knowledge base id, node id) of every chunk (or of these), as the
        lanes got them."""
        if chunk_ids is None:
            rows = session.execute(_INDEXED_ROWS).yield_per(2000)
        else:  # a few (the bridge's one, a repair's batch): one statement, made once
            rows = session.execute(_INDEXED_ROWS_OF, {"ids": list(chunk_ids)})
        for row in rows:
            yield IndexRow(row.id, self._indexed_text(row), row.kb_id, row.node_id, heading_text(row.heading_path))

    def _indexed_text(self, row) -> str:
        """A stored chunk's text as the lanes indexed it (with its heading path, when contextual)."""
        return ChunkSpec(row.text, tuple(row.heading_path or ()), row.char_start, row.char_end).indexed_text(
            self.contextual
        )

    def reconcile(self) -> dict[str, int]:
        """Make every lane hold what the store says it should (a lane outside the store may have
        missed a crash's cleanup, lost its files, or be new); returns the chunks each lane
        repaired. Raises Unavailable, after the others ran, when a lane's engine is down."""
        return self.index.reconcile()

    def pending_jobs(self, limit: int = 1000) -> list[int]:
        """Versions waiting to be published (held by a worker or not), oldest first."""
        with self.db.session() as session:
            return list(session.scalars(
                select(DocumentVersion.id).where(DocumentVersion.status == PUBLISHING).order_by(DocumentVersion.id).limit(limit)
            ))

    def resume(self, wait: bool = True) -> int:
        """Finish publishes a crash interrupted, and sweep chunks left behind by archived versions.
        With `wait=False`, jobs another live worker holds are left to it."""
        with self.db.session() as session:
            stale = list(
                session.scalars(
                    select(Chunk.version_id)
                    .join(DocumentVersion, DocumentVersion.id == Chunk.version_id)
                    .where(DocumentVersion.status.in_([ARCHIVED, DRAFT]))
                    .distinct()
                )
            )
        self._drop_chunks_of(stale)
        interrupted = self.pending_jobs()
        if interrupted:
            log.warning("resuming %d interrupted publish(es)", len(interrupted))
            self.publish(interrupted, wait=wait)
        return len(interrupted)
