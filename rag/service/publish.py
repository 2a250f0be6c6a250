"""Publishing: chunk, embed and index versions, then make them the searchable ones.

The order is what keeps search whole: a version's chunks are written to both lanes while it is
`publishing` (invisible to search), and only then, in one transaction, does it become `published`
and the previous published version `archived`. An error on the way cleans up and puts the version
back in draft; a crash leaves it `publishing`, and `resume()` finishes it on the next start. The
previous version stays searchable throughout.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import numpy as np
from sqlalchemy import func, insert, select

from rag.errors import Unavailable
from rag.ingest.chunk import Chunker, ChunkSpec
from rag.models.embed import Embedder, bulk_embedding
from rag.retrieve.keyword import KeywordLane
from rag.retrieve.vector import ChromaVectorLane
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
    def __init__(
        self,
        db: Database,
        chunker: Chunker,
        embedder: Callable[[], Embedder],
        vector: Callable[[], ChromaVectorLane],
        keyword: KeywordLane,
        contextual_headings: bool = True,
        batch_chunks: int = 512,
    ) -> None:
        self.db = db
        self.chunker = chunker
        self._embedder = embedder
        self._vector = vector
        self.keyword = keyword
        if hasattr(keyword, "attach"):  # an index outside the store rebuilds itself from the chunks when damaged
            keyword.attach(self.indexed_rows)
        self.contextual = contextual_headings
        self.batch_chunks = batch_chunks

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
            if progress:
                progress(accounted, total)
        if held_elsewhere and wait:
            done += self._wait_for(held_elsewhere)
        return done

    def _prepare(self, version_ids: list[int]) -> list[_Pending]:
        """Chunk the jobs' bodies (pure work: nothing is claimed or written yet)."""
        with self.db.session() as session:
            rows = session.execute(
                select(DocumentVersion.id, DocumentVersion.body, Node.id, Node.kb_id)
                .join(Node, Node.id == DocumentVersion.node_id)
                .where(DocumentVersion.id.in_(version_ids), DocumentVersion.status == PUBLISHING)
                .order_by(DocumentVersion.id)
            ).all()
        pending = []
        for version_id, body, node_id, kb_id in rows:
            specs = self.chunker.chunk(body)
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

    def _index_and_flip(self, claim, group: list[_Pending]) -> list[int]:
        """Write the group's chunks (committed, still invisible: their versions are `publishing`),
        then their vectors, then flip the versions in the claim's transaction. Returns the versions
        archived by the flip. On an error everything written is removed and the versions go back."""
        texts = [t for p in group for t in p.texts]
        ids: list[int] = []
        rows: list[dict] = []
        vectors_written = False
        try:
            # Background work: the model serves waiting queries between small slices of it.
            with bulk_embedding():
                vectors = self._embedder().embed(texts) if texts else np.zeros((0, 1), dtype=np.float32)
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
                }
                for p in group
                for i, spec in enumerate(p.specs)
            ]
            if rows:
                try:
                    with self.db.session() as session:
                        ids = list(session.scalars(insert(Chunk).returning(Chunk.id, sort_by_parameter_order=True), rows))
                        self.keyword.add(session, [(i, t, r["kb_id"], r["node_id"]) for i, t, r in zip(ids, texts, rows)])
                except BaseException:
                    if ids:  # an index outside the store (tantivy) keeps them even though the store rolled back
                        self._safe_keyword_delete(ids)
                    ids = []
                    raise
                # Chunk rows are committed before their vectors exist: a vector is never without
                # its chunk row, which is what lets another worker reconcile the lane at any time.
                vectors_written = True
                self._vector().add(ids, vectors, [r["kb_id"] for r in rows], [r["node_id"] for r in rows])
            return self._flip(claim, [p.version_id for p in group])
        except BaseException as exc:
            version_ids = [p.version_id for p in group]
            # A backend that is down (the Chroma server, a remote embedding model) is not a failed
            # publish: on PostgreSQL the jobs stay `publishing` and the publish workers, which poll
            # for unclaimed jobs, retry them until it is back. Elsewhere no worker would.
            retry = isinstance(exc, Unavailable) and self.db.dialect == "postgresql"
            if retry:
                log.warning("publishing waits for a backend that is down; the versions stay publishing: %s", exc)
            else:
                log.exception("publishing failed; the versions go back to draft (or archived, for a rollback)")
            if vectors_written and ids:
                self._safe_vector_delete(list(zip(ids, [r["kb_id"] for r in rows])))
            if ids:
                self._safe_keyword_delete(ids)
            self._drop_chunks_of(version_ids)
            claim.rollback()  # the flip may have failed half way (or been chosen as a deadlock's victim)
            if retry:
                raise
            for version in claim.scalars(
                select(DocumentVersion).where(DocumentVersion.id.in_(version_ids), DocumentVersion.status == PUBLISHING)
            ):
                version.status = version.publish_from or DRAFT
                if version.status == ARCHIVED:
                    version.archived_at = utcnow()
            claim.commit()
            raise

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
        if not version_ids:
            return
        with self.db.session() as session:
            pairs = [tuple(row) for row in session.execute(
                select(Chunk.id, Chunk.kb_id).where(Chunk.version_id.in_(list(version_ids)))
            )]
            if not pairs:
                return
            self.keyword.delete(session, [chunk_id for chunk_id, _ in pairs])
            session.query(Chunk).filter(Chunk.version_id.in_(list(version_ids))).delete(synchronize_session=False)
        self._safe_vector_delete(pairs)

    def drop_chunks_of_nodes(self, node_ids: Sequence[str]) -> None:
        with self.db.session() as session:
            version_ids = list(
                session.scalars(select(DocumentVersion.id).where(DocumentVersion.node_id.in_(list(node_ids))))
            )
        self._drop_chunks_of(version_ids)

    def _safe_vector_delete(self, chunks: list[tuple[int, str]]) -> None:
        try:
            self._vector().delete(chunks)
        except Exception:  # noqa: BLE001 - orphan vectors never surface: the lanes keep published chunks only
            log.exception("could not delete %d vectors; they stay invisible to search", len(chunks))

    def _safe_keyword_delete(self, chunk_ids: list[int]) -> None:
        # SQLite may hand a rolled-back id to the next chunk: an index outside the store must not
        # keep text under it.
        try:
            with self.db.session() as session:
                self.keyword.delete(session, chunk_ids)
        except Exception:  # noqa: BLE001 - reconcile_keyword rebuilds the index on the next start
            log.exception("could not delete %d chunks from the keyword index", len(chunk_ids))

    def indexed_rows(self, session, chunk_ids: Sequence[int] | None = None) -> Iterator[tuple[int, str, str, str]]:
        """(chunk id, indexed text, knowledge base id, node id) of every chunk (or of these), as the
        lanes got them."""
        stmt = select(
            Chunk.id, Chunk.kb_id, Chunk.node_id, Chunk.text, Chunk.heading_path, Chunk.char_start, Chunk.char_end
        ).order_by(Chunk.id)
        if chunk_ids is not None:
            stmt = stmt.where(Chunk.id.in_(list(chunk_ids)))
        for row in session.execute(stmt).yield_per(2000):
            yield row.id, self._indexed_text(row), row.kb_id, row.node_id

    def _indexed_text(self, row) -> str:
        """A stored chunk's text as the lanes indexed it (with its heading path, when contextual)."""
        return ChunkSpec(row.text, tuple(row.heading_path or ()), row.char_start, row.char_end).indexed_text(
            self.contextual
        )

    def reconcile_keyword(self) -> int:
        """Rebuild the keyword index when it does not hold exactly the chunks (tantivy lives outside
        the store's transactions; either engine is empty after a switch from the other; a damaged
        tantivy index was set aside and reads as empty).

        Returns the chunks written (0 when it was whole). Needs no embedding: seconds at 100,000."""
        if not hasattr(self.keyword, "rebuild"):
            return 0  # PostgreSQL's index lives in the store's own transactions
        with self.db.session() as session:
            count, total = session.execute(select(func.count(), func.coalesce(func.sum(Chunk.id), 0))).one()
            expected = (int(count), int(total))
            present = self.keyword.fingerprint(session)
            if present == expected:
                if getattr(self.keyword, "stale", False):
                    self.keyword.stale = False  # a new or reset index that holds exactly the chunks is whole
                return 0
            log.warning("keyword index holds %d documents for %d chunks; rebuilding it", present[0], expected[0])
            return self.keyword.rebuild(session, self.indexed_rows(session))

    def reconcile_vectors(self) -> int:
        """Make each knowledge base's vectors match its published chunks; returns vectors repaired.

        Counts are compared first (cheap); only a knowledge base whose counts differ is walked id by
        id. This heals a vector store that lost data, was replaced, or missed a crash's cleanup;
        missing vectors come back from the embedding cache.
        """
        with self.db.session() as session:
            published = dict(session.execute(
                select(Chunk.kb_id, func.count())
                .join(DocumentVersion, DocumentVersion.id == Chunk.version_id)
                .where(DocumentVersion.status == PUBLISHED)
                .group_by(Chunk.kb_id)
            ).all())
        vector = self._vector()
        repaired = 0
        for kb_id, expected in published.items():
            if vector.count(kb_id) == expected:
                continue
            # Another worker may be publishing meanwhile. Its chunk rows are committed before their
            # vectors are written, so reading the vectors first and every chunk row of the knowledge
            # base (any status) second never takes a vector in flight for an orphan.
            present = vector.ids(kb_id)
            with self.db.session() as session:
                known = set(session.scalars(select(Chunk.id).where(Chunk.kb_id == kb_id)))
                rows = session.execute(
                    select(Chunk.id, Chunk.node_id, Chunk.text, Chunk.heading_path, Chunk.char_start, Chunk.char_end)
                    .join(DocumentVersion, DocumentVersion.id == Chunk.version_id)
                    .where(Chunk.kb_id == kb_id, DocumentVersion.status == PUBLISHED)
                ).all()
            extra = [(int(i), kb_id) for i in present - known]
            missing = [row for row in rows if row.id not in present]
            if not extra and not missing:
                continue
            log.warning("vector lane of %s: %d missing, %d extra; repairing", kb_id, len(missing), len(extra))
            if extra:
                vector.delete(extra)
            for i in range(0, len(missing), self.batch_chunks):
                part = missing[i:i + self.batch_chunks]
                texts = [self._indexed_text(r) for r in part]
                with bulk_embedding():
                    vectors = self._embedder().embed(texts)
                vector.add([r.id for r in part], vectors, [kb_id] * len(part), [r.node_id for r in part])
            repaired += len(missing) + len(extra)
        return repaired

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


class PublishWorker:
    """Several workers on one PostgreSQL store: every `interval` seconds, take over the publish jobs
    no worker holds (one whose worker was killed, whose lock went with its connection). Jobs a live
    worker holds are skipped (SKIP LOCKED), so the poll costs one indexed query when there is
    nothing to do."""

    def __init__(self, publisher: Publisher, interval: float) -> None:
        self.publisher = publisher
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="publish-worker", daemon=True)

    def start(self) -> "PublishWorker":
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                # A few at a time: they are chunked before they are claimed, and another worker
                # may claim them first.
                jobs = self.publisher.pending_jobs(limit=16)
                if jobs:
                    self.publisher.publish(jobs, wait=False)
            except Exception:  # noqa: BLE001 - logged; the job is back in draft or is retried next time
                log.exception("publish worker: a job failed")

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=60)


class PublishQueue:
    """Publishes in one background thread, so that a publish call returns at once with the status
    `publishing`. One thread, because publishes of one document must not overtake each other and
    the embedder serves one batch at a time anyway. A process that dies with work queued leaves
    those versions `publishing`; `Publisher.resume()` finishes them on the next start."""

    def __init__(self, publisher: Publisher) -> None:
        self.publisher = publisher
        self._pool: ThreadPoolExecutor | None = None
        self._futures: set[Future] = set()
        self._lock = threading.Lock()

    def submit(self, version_id: int, done: Callable[[bool], None] | None = None) -> Future:
        """Publish a version already marked `publishing`; `done(ok)` runs in the worker afterwards."""
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="publish")
            future = self._pool.submit(self._run, version_id, done)
            self._futures.add(future)
        future.add_done_callback(self._forget)
        return future

    def _run(self, version_id: int, done: Callable[[bool], None] | None) -> None:
        try:
            self.publisher.publish([version_id])
            ok = True
        except Exception:  # noqa: BLE001 - logged by the publisher, which put the version back in draft
            ok = False
        if done is not None:
            try:
                done(ok)
            except Exception:  # noqa: BLE001 - a follow-up must not kill the worker
                log.exception("after publishing version %s", version_id)

    def _forget(self, future: Future) -> None:
        with self._lock:
            self._futures.discard(future)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for every queued publish; True when none is left."""
        with self._lock:
            pending = list(self._futures)
        _, not_done = wait(pending, timeout=timeout)
        return not not_done

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
