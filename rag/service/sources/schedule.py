"""`rag serve` runs the sources that are due: one thread that looks every RAG_SOURCES__POLL_SECONDS
for scheduled sources whose next run has come, and syncs them one after another. Several workers or
replicas may each run one: a source's lease (rag/service/sources/manage.py) lets one of them sync it."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from rag.errors import Busy

if TYPE_CHECKING:
    from rag.service.sources.manage import Sources

log = logging.getLogger(__name__)


class Scheduler:
    def __init__(self, sources: Sources, poll_seconds: float) -> None:
        self.sources = sources
        self.poll_seconds = poll_seconds
        self.stopping = threading.Event()  # also the running sync's stop: it ends after the item at hand
        self.thread = threading.Thread(target=self._loop, name="rag-source-schedule", daemon=True)

    def start(self) -> Scheduler:
        self.thread.start()
        return self

    def _loop(self) -> None:
        while not self.stopping.is_set():
            try:
                for source_pk in self.sources.due():
                    if self.stopping.is_set():
                        break
                    self._run(source_pk)
            except Exception:  # noqa: BLE001 - a store that is down now may be up at the next look
                log.warning("looking for sources that are due failed", exc_info=True)
            self.stopping.wait(self.poll_seconds)

    def _run(self, source_pk: str) -> None:
        try:
            report = self.sources.run(source_pk, stop=self.stopping)
        except Busy:  # another worker took it first
            return
        log.info("scheduled sync of source %s: %s %s", source_pk, report.outcome, report.summary())

    def stop(self, timeout: float = 30.0) -> None:
        self.stopping.set()
        if self.thread.is_alive():
            self.thread.join(timeout)
