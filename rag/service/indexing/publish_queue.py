"""Running publishes: in one background thread of this process (PublishQueue), and, on a shared
PostgreSQL store, by taking over the jobs of workers that died (PublishWorker).

Both only call the Publisher (publish.py), which does the work and owns its order.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Callable

from rag.shutdown import STOPPING
from rag.service.indexing.publish import Publisher

log = logging.getLogger(__name__)


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
        """Finish the queued publishes; when the server is stopping (SIGTERM), only the one under
        way: the others stay `publishing` in the store, and the next start publishes them
        (`Publisher.resume`), so a long queue never holds a shutdown past its bound."""
        with self._lock:
            pool, self._pool = self._pool, None
            queued = len(self._futures)
        if pool is not None:
            stopping = STOPPING.is_set()
            if stopping and queued > 1:
                log.info("stopping: %d queued publishes are left to the next start", queued - 1)
            pool.shutdown(wait=True, cancel_futures=stopping)
