"""Sources as objects of the service: added, listed, shown, synced, paused, resumed and removed, by
the CLI, the HTTP API and the editor alike, with the access rule in one place.

Who may do what: an admin with knowledge-base access all (and knowledge:write) adds, changes,
syncs and removes sources. Anyone who may read sees the sources whose target lies inside what they
see: the whole workspace's under access all, under folder access those whose target folder is one
of their folders or below one (a source that has not made its folder yet is inside nobody's
folders). Settings never hold a secret: a source names one (`secret`), which Settings supplies
(RAG_SOURCE_SECRETS__<NAME> or its _FILE form). A source's settings (`config`: server paths,
URLs, account names) and its secret's name are shown to those who manage it only (an admin with
access all); other readers see its kind, name, target, state and counts.

What a source may reach is the operator's to say: a local path only inside RAG_SOURCES__LOCAL_ROOTS
unless the operator added the source (rag/service/sources/local.py), a private or loopback host
only when RAG_SOURCES__ALLOW_HOSTS names it (a source's own `allow_hosts` may only narrow that
list: rag/sources/addresses.py).

A sync runs at most once at a time per source, across processes and workers: it holds a lease on
the source's row (one conditional UPDATE, the same on SQLite and PostgreSQL), renews it while it
runs, and a sync killed with kill -9 leaves a lease that expires (RAG_SOURCES__LEASE_SECONDS),
after which the next sync takes the source and resumes (rag/service/sources/engine.py). A lease
names its holder (host, pid): once a holder on this host is gone, its source shows `stale` and the
next sync takes it at once, without waiting the lease out.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Callable

from pydantic import ValidationError
from sqlalchemy import func, or_, select, update

from rag import telemetry
from rag.errors import AlreadyExists, Busy, InvalidArgument, NotFound, RagError
from rag.service.checks import name_key, name_problem
from rag.service.sources.engine import Progress, SyncEngine, SyncReport, Target, iter_limited
from rag.service.sources.local import LocalPaths
from rag.sources.addresses import widening
from rag.sources.base import Connector, FetchLimits, SourceConfig, SourceUnavailable, SyncContext
from rag.sources.registry import connector_class, kinds
from rag.store.models import DOCUMENT, SOURCE_IDLE, SOURCE_RUNNING, KnowledgeBase, Node, Source, SourceItem, utcnow

if TYPE_CHECKING:
    from rag.service.activity import ActivityLog
    from rag.service.content.catalog import Catalog
    from rag.service.identity.access import Access
    from rag.service.identity.principal import Principal
    from rag.settings import Settings
    from rag.store.db import Database

log = logging.getLogger(__name__)

NOT_FOUND = "source not found"
BUSY = "a sync of this source is running already; it is synced once at a time"
SOURCE_STALE = "stale"
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_SECRET = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,99}$")


def parse_every(value: str | int | None, minimum: int) -> int | None:
    """A schedule: "30m", "6h", "1d", "90s" or seconds; None, "" or "manual": synced on demand only."""
    if value is None or value == "" or value == "manual":
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        seconds = value
    else:
        match = re.fullmatch(r"\s*(\d{1,7})\s*([smhd]?)\s*", str(value))
        if match is None:
            raise InvalidArgument("`every` is a duration such as 30m, 6h or 1d (or 'manual')")
        seconds = int(match.group(1)) * _UNITS[match.group(2) or "s"]
    if seconds < minimum:
        raise InvalidArgument(f"`every` must be at least {minimum} seconds")
    if seconds > 366 * 86_400:
        raise InvalidArgument("`every` must be at most a year")
    return seconds


def _when(value: datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is None:  # SQLite gives naive datetimes back; they were written as UTC
        value = value.replace(tzinfo=timezone.utc)
    return value.isoformat(timespec="seconds")


def _aware(value: datetime | None) -> datetime | None:
    return value.replace(tzinfo=timezone.utc) if value is not None and value.tzinfo is None else value


def holder_gone(owner: str | None) -> bool:
    """Whether the process holding a lease (`host:pid:nonce`) is known to be gone: one on this host
    whose pid no longer runs (or is a zombie, killed and not yet reaped). A holder on another host
    is known gone only when its lease lapses."""
    host, _, rest = (owner or "").partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's process: alive
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read(4096).rpartition(b")")[2].split()[:1] == [b"Z"]
    except OSError:
        return False


def lease_lapsed(row: Source) -> bool:
    """The source's lease has run out, or its holder is gone: nothing is syncing it."""
    until = _aware(row.lease_until)
    return until is None or until < utcnow() or holder_gone(row.lease_owner)


@dataclass
class SourceInfo:
    """A source as its callers see it."""

    row: Source
    knowledge_base: str
    items: int
    manages: bool  # the caller manages sources: it sees the settings and the secret's name

    def payload(self) -> dict[str, Any]:
        r = self.row
        payload: dict[str, Any] = {
            "name": r.name, "kind": r.kind, "knowledge_base": self.knowledge_base, "folder": r.folder,
            "every_seconds": r.every_seconds, "paused": bool(r.paused),
            # `stale`: marked running by a sync whose process is gone (killed), until the next sync takes it.
            "status": SOURCE_STALE if r.status == SOURCE_RUNNING and lease_lapsed(r) else r.status,
            "items": self.items,
            "last_sync": {
                "started_at": _when(r.last_started_at), "finished_at": _when(r.last_finished_at),
                "outcome": r.last_outcome, "counts": r.last_counts or {}, "error": r.last_error,
                "failures": [list(f) for f in (r.last_failures or [])],
            },
            "next_run_at": _when(r.next_run_at), "created_at": _when(r.created_at),
        }
        if payload["status"] == SOURCE_RUNNING and r.progress:
            payload["progress"] = dict(r.progress)
        if self.manages:
            payload["config"] = dict(r.config or {})
            payload["secret"] = r.secret
        return payload


class Sources:
    def __init__(self, db: Database, settings: Settings, access: Access, activity: ActivityLog, catalog: Catalog,
                 engine: SyncEngine) -> None:
        self.db = db
        self.settings = settings
        self.access = access
        self.activity = activity
        self.catalog = catalog
        self.engine = engine
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.stopping = threading.Event()  # set when the service closes: background syncs end after their item
        self._background: set[threading.Thread] = set()  # the syncs start_sync runs, waited for by close()
        self._background_lock = threading.Lock()

    # ----- who may -----

    def _require_admin(self, principal: Principal) -> None:
        self.access.require_role(principal, "admin")
        self.access.require_all(principal, "managing sources")
        self.access.require_write(principal)

    def _visible(self, session, principal: Principal, row: Source) -> bool:
        if self.access.sees_all(principal):
            return True
        folder = self._target_node(session, row)
        return folder is not None and self.access.visible(session, principal, folder)

    @staticmethod
    def _target_node(session, row: Source) -> Node | None:
        kb = session.get(KnowledgeBase, row.kb_id)
        node = session.get(Node, kb.root_id) if kb is not None and kb.root_id else None
        for part in [p for p in row.folder.split("/") if p]:
            if node is None:
                return None
            node = session.scalar(select(Node).where(Node.parent_id == node.id, Node.name_key == name_key(part)))
        return node

    def _row(self, session, principal: Principal, name: object) -> Source:
        if not isinstance(name, str) or not name.strip():
            raise InvalidArgument("`name` must be a source's name")
        row = session.scalar(select(Source).where(
            Source.workspace_id == principal.workspace_id, Source.name_key == name_key(name)))
        if row is None or not self._visible(session, principal, row):
            raise NotFound(NOT_FOUND)
        return row

    def _info(self, session, principal: Principal, row: Source) -> SourceInfo:
        kb = session.get(KnowledgeBase, row.kb_id)
        items = session.scalar(select(func.count()).select_from(SourceItem).where(SourceItem.source_pk == row.id))
        admin = principal.role == "admin" and self.access.sees_all(principal)  # who manages sources
        return SourceInfo(row, kb.name if kb else "?", int(items or 0), admin)

    # ----- managing -----

    def check_config(self, principal: Principal, kind: str, config: dict[str, Any]) -> dict[str, Any]:
        """The settings, checked by the kind's own model, then against what the operator allows
        (`reach`); a clear InvalidArgument or PermissionDenied otherwise."""
        checked = self._validated(kind, config)
        self.reach(connector_class(kind), checked, principal.operator)
        return checked.model_dump(mode="json", exclude_defaults=True)

    @staticmethod
    def _validated(kind: str, config: dict[str, Any]) -> SourceConfig:
        cls = connector_class(kind)
        if not isinstance(config, dict):
            raise InvalidArgument("`config` must be an object")
        try:
            return cls.Config.model_validate(config)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'config'}: {e['msg']}" for e in exc.errors()[:5])
            raise InvalidArgument(f"invalid settings for a {kind} source: {problems}") from None

    def reach(self, cls: type[Connector], config: SourceConfig, by_operator: bool) -> SourceConfig:
        """`config` with its local paths resolved, when the operator allows what it reaches: its own
        `allow_hosts` within RAG_SOURCES__ALLOW_HOSTS (InvalidArgument), its local paths inside
        RAG_SOURCES__LOCAL_ROOTS unless the operator added it (PermissionDenied)."""
        wider = widening(self.settings.sources.allow_hosts, getattr(config, "allow_hosts", None) or [])
        if wider:
            raise InvalidArgument(
                f"allow_hosts may only narrow the hosts the operator allows (RAG_SOURCES__ALLOW_HOSTS); "
                f"not allowed there: {', '.join(wider[:5])}")
        if by_operator:
            return config
        resolved = LocalPaths.of(self.settings).checked(cls.local_paths(config))
        return config.model_copy(update=resolved) if resolved else config

    def add(self, principal: Principal, name: str, kind: str, config: dict[str, Any], kb_name: str | None = None,
            folder: str = "", every: str | int | None = None, secret: str | None = None) -> SourceInfo:
        self._require_admin(principal)
        if not isinstance(name, str) or not _NAME.match(name):
            raise InvalidArgument("a source's name is 1 to 100 letters, digits, '.', '_' or '-', starting with a "
                                  "letter or digit")
        if kind not in kinds():
            raise InvalidArgument(f"unknown source kind {kind!r}; the kinds are: {', '.join(kinds())}")
        settings = self._validated(kind, config or {})
        secret = self._secret_name(kind, secret)
        folder = self._folder_arg(folder)
        every_seconds = parse_every(every, self.settings.sources.min_every_seconds)
        self.reach(connector_class(kind), settings, principal.operator)  # what it may reach, once its shape is right
        checked = settings.model_dump(mode="json", exclude_defaults=True)
        kb = self.catalog.knowledge_base(principal, kb_name or self.settings.default_kb, create=True)
        with self.db.session() as session:
            taken = session.scalar(select(Source.id).where(
                Source.workspace_id == principal.workspace_id, Source.name_key == name_key(name)))
            if taken is not None:
                raise AlreadyExists(f"a source named {name!r} exists already")
            row = Source(workspace_id=principal.workspace_id, name=name, name_key=name_key(name), kind=kind,
                         config=checked, added_by_operator=principal.operator, secret=secret, kb_id=kb.id,
                         folder=folder, every_seconds=every_seconds,
                         status=SOURCE_IDLE, next_run_at=utcnow() if every_seconds else None)
            session.add(row)
            session.flush()
            info = self._info(session, principal, row)
        self.activity.record(principal, "source_add", name, "ok", {"kind": kind})
        return info

    @staticmethod
    def _secret_name(kind: str, secret: str | None) -> str | None:
        if secret in (None, ""):
            if connector_class(kind).needs_secret:
                raise InvalidArgument(f"a {kind} source needs `secret`: the name of a secret Settings supplies "
                                      "(RAG_SOURCE_SECRETS__<NAME>)")
            return None
        if not isinstance(secret, str) or not _SECRET.match(secret):
            raise InvalidArgument("`secret` is the name of a secret (letters, digits and '_'), never its value")
        return secret.lower()

    @staticmethod
    def _folder_arg(folder: object) -> str:
        if folder in (None, ""):
            return ""
        if not isinstance(folder, str):
            raise InvalidArgument("`folder` must be a path such as 'docs/site'")
        parts = [" ".join(p.split()) for p in folder.strip("/").split("/")]
        for part in parts:
            problem = name_problem(part) if part else "must not be empty"
            if problem:
                raise InvalidArgument(f"`folder`: a folder name {problem}")
        return "/".join(parts)

    def list(self, principal: Principal) -> list[SourceInfo]:
        self.access.reader(principal)
        with self.db.session() as session:
            rows = session.scalars(select(Source).where(Source.workspace_id == principal.workspace_id)
                                   .order_by(Source.name_key)).all()
            return [self._info(session, principal, r) for r in rows if self._visible(session, principal, r)]

    def show(self, principal: Principal, name: str) -> SourceInfo:
        self.access.reader(principal)
        with self.db.session() as session:
            return self._info(session, principal, self._row(session, principal, name))

    def set_paused(self, principal: Principal, name: str, paused: bool) -> SourceInfo:
        self._require_admin(principal)
        with self.db.session() as session:
            row = self._row(session, principal, name)
            row.paused = paused
            if not paused and row.every_seconds:
                row.next_run_at = utcnow()
            session.flush()
            info = self._info(session, principal, row)
        self.activity.record(principal, "source_pause" if paused else "source_resume", name, "ok")
        return info

    def change(self, principal: Principal, name: str, *, config: dict[str, Any] | None = None,
               every: str | int | None = ..., secret: str | None = ...) -> SourceInfo:  # type: ignore[assignment]
        """New settings (checked, replacing the old ones), schedule or secret name. New settings
        from anyone but the operator make the source a workspace admin's: its local paths are held
        to the operator's roots from then on."""
        self._require_admin(principal)
        with self.db.session() as session:
            row = self._row(session, principal, name)
            if config is not None:
                row.config = self.check_config(principal, row.kind, config)
                row.added_by_operator = principal.operator
            if every is not ...:
                row.every_seconds = parse_every(every, self.settings.sources.min_every_seconds)
                row.next_run_at = utcnow() if row.every_seconds else None
            if secret is not ...:
                row.secret = self._secret_name(row.kind, secret)
            session.flush()
            info = self._info(session, principal, row)
        self.activity.record(principal, "source_change", name, "ok")
        return info

    def remove(self, principal: Principal, name: str, keep_documents: bool = True) -> dict[str, Any]:
        """The source goes; its documents stay (they become ordinary documents) unless told otherwise."""
        self._require_admin(principal)
        with self.db.session() as session:
            row = self._row(session, principal, name)
            if row.status == SOURCE_RUNNING and not lease_lapsed(row):
                raise InvalidArgument(BUSY + "; remove it once the sync ends")
            root_key, workdir = f"source:{row.id}", self.settings.home / "sources" / row.id
            node_ids = list(session.scalars(select(Node.id).where(Node.ingest_root == root_key)))
            documents = session.scalar(select(func.count()).select_from(Node).where(
                Node.ingest_root == root_key, Node.kind == DOCUMENT))
            if keep_documents:
                session.execute(update(Node).where(Node.ingest_root == root_key).values(ingest_root=None))
            session.delete(row)
        if not keep_documents:
            self.engine.edits.remove_nodes(node_ids)
        shutil.rmtree(workdir, ignore_errors=True)  # what its connector kept (a clone, a cache)
        self.activity.record(principal, "source_remove", name, "ok", {"documents_removed": 0 if keep_documents
                                                                      else documents})
        return {"name": name, "removed": True, "documents": documents,
                "documents_kept": keep_documents}

    # ----- syncing -----

    def sync(self, principal: Principal, name: str, progress: Progress | None = None,
             stop: threading.Event | None = None) -> tuple[SourceInfo, SyncReport]:
        """Sync the source now, in this thread. Refused while another sync of it runs."""
        self._require_admin(principal)
        with self.db.session() as session:
            source_pk = self._row(session, principal, name).id
        report = self.run(source_pk, progress, stop)
        self.activity.record(principal, "source_sync", name, report.outcome, report.summary())
        return self.show(principal, name), report

    def start_sync(self, principal: Principal, name: str) -> SourceInfo:
        """Sync the source in the background (the HTTP API's and the editor's "sync now"): the
        source is taken before this returns (Busy when a sync of it runs), then synced in a thread
        that ends, after the item at hand, when the service closes."""
        self._require_admin(principal)
        with self.db.session() as session:
            source_pk = self._row(session, principal, name).id
        if not self._take_lease(source_pk):
            raise Busy(BUSY)

        def work() -> None:
            try:
                report = self._run_leased(source_pk, None, self.stopping)
                self.activity.record(principal, "source_sync", name, report.outcome, report.summary())
            finally:
                with self._background_lock:
                    self._background.discard(thread)

        thread = threading.Thread(target=work, name=f"rag-sync-{source_pk}", daemon=True)
        with self._background_lock:
            self._background.add(thread)
        thread.start()
        return self.show(principal, name)

    def close(self, timeout: float = 30.0) -> None:
        """Stop the background syncs and wait for them (bounded): each ends after the item at hand
        and writes its end (outcome `stopped`, the lease let go) while the store is still open. A
        daemon thread left running would die with the process, leaving the source `running` under
        a lease the next sync must wait out."""
        self.stopping.set()
        deadline = time.monotonic() + timeout
        with self._background_lock:
            running = list(self._background)
        for thread in running:
            thread.join(max(0.0, deadline - time.monotonic()))

    def run(self, source_pk: str, progress: Progress | None = None, stop: threading.Event | None = None
            ) -> SyncReport:
        """One sync of the source with this id, holding its lease; Busy when another holds it."""
        if not self._take_lease(source_pk):
            raise Busy(BUSY)
        return self._run_leased(source_pk, progress, stop)

    def _run_leased(self, source_pk: str, progress: Progress | None, stop: threading.Event | None) -> SyncReport:
        progress = progress or (lambda *_: None)
        stop = stop or threading.Event()
        renewing = threading.Event()
        beat = _Heartbeat(self, source_pk, renewing)
        beat.start()
        report: SyncReport | None = None
        try:
            row, target, connector = self._prepare(source_pk, stop)
            with connector:
                report = self.engine.run(target, connector, beat.wrap(progress), stop, beat.note)
                cursor = connector.cursor() if report.complete and report.error is None else None
        except (_NotRunnable, SourceUnavailable) as exc:  # it cannot be listed: said, nothing archived
            report = SyncReport(knowledge_base="", complete=False, error=str(exc))
            cursor = None
        except RagError as exc:  # a backend down while publishing: what was stored is published next time
            log.warning("the sync of source %s stopped: %s", source_pk, exc.message)
            report = SyncReport(knowledge_base="", complete=False, error=exc.message)
            cursor = None
        except Exception:
            log.exception("the sync of source %s failed", source_pk)
            report = SyncReport(knowledge_base="", complete=False,
                                error="the sync stopped on an unexpected error (see the server's log)")
            cursor = None
        finally:
            renewing.set()
            beat.join(5)
            self._finish(source_pk, report, cursor if report is not None else None)
        return report

    def _prepare(self, source_pk: str, stop: threading.Event) -> tuple[Source, Target, Connector]:
        with self.db.session() as session:
            row = session.get(Source, source_pk)
            kb = session.get(KnowledgeBase, row.kb_id)
            session.expunge(kb)
            session.expunge(row)
        cls = connector_class(row.kind)
        secret = None
        if row.secret:
            secret = self.settings.source_secret(row.secret)
            if secret is None:
                raise _NotRunnable(f"the secret {row.secret!r} this source names is not set "
                                   f"(RAG_SOURCE_SECRETS__{row.secret.upper()} or its _FILE form)")
        try:
            config = self.reach(cls, cls.Config.model_validate(row.config or {}), row.added_by_operator)
        except ValidationError:
            raise _NotRunnable("the source's settings are no longer valid; change them (rag source show)") from None
        except RagError as exc:  # a path outside the roots (a link swapped since), a host no longer allowed
            raise _NotRunnable(exc.message) from None
        s = self.settings.sources
        workdir = self.settings.home / "sources" / row.id
        with self.db.session() as session:  # what each item's last fetch kept (an ETag), for conditional fetches
            previous = {item_id: dict(state) for item_id, state in session.execute(
                select(SourceItem.item_id, SourceItem.state).where(SourceItem.source_pk == row.id)) if state}
        context = SyncContext(
            source_name=row.name, workspace=row.workspace_id, secret=secret, cursor=dict(row.cursor or {}),
            limits=FetchLimits(max_bytes=s.max_item_bytes, timeout_seconds=s.request_timeout_seconds,
                               total_seconds=s.item_timeout_seconds, max_items=s.max_items,
                               concurrency=s.concurrency, attempts=s.attempts, backoff_seconds=s.backoff_seconds),
            previous=previous, allow_hosts=tuple(s.allow_hosts), stop=stop, workdir=workdir,
            parse_caller=f"source:{row.workspace_id}:{row.id}",  # as the Target's: one share per sync
        )
        connector = cls(config, context)
        connector.items = _limited(connector.items, s.max_items)  # type: ignore[method-assign]
        target = Target(
            kb=kb, folder=tuple(p for p in row.folder.split("/") if p), root_key=f"source:{row.id}",
            provider=cls.provider, id_prefix=f"{cls.provider}:{row.workspace_id}:{connector.resource()}:",
            source_pk=row.id, vanished=cls.vanished, moves=getattr(cls, "moves_by_version", True),
        )
        return row, target, connector

    # ----- the lease -----

    def _take_lease(self, source_pk: str) -> bool:
        """Take the source's lease: free, lapsed, or held by a process known gone (a sync killed on
        this host; rag/service/sources/manage.py `holder_gone`). One conditional UPDATE either way."""
        if self._take_lease_where(source_pk, None):
            return True
        with self.db.session() as session:
            owner = session.scalar(select(Source.lease_owner).where(Source.id == source_pk))
        return owner is not None and holder_gone(owner) and self._take_lease_where(source_pk, owner)

    def _take_lease_where(self, source_pk: str, dead_owner: str | None) -> bool:
        now = utcnow()
        free = (Source.lease_owner == dead_owner if dead_owner is not None
                else or_(Source.lease_until.is_(None), Source.lease_until < now))
        with self.db.session() as session:
            taken = session.execute(
                update(Source).where(Source.id == source_pk, free)
                .values(lease_owner=self.owner, lease_until=now + timedelta(seconds=self.settings.sources.lease_seconds),
                        status=SOURCE_RUNNING, last_started_at=now, progress={"stage": "listing"})
                .execution_options(synchronize_session=False)
            ).rowcount
        return taken == 1

    def renew(self, source_pk: str, progress: dict[str, Any] | None) -> None:
        values: dict[str, Any] = {"lease_until": utcnow() + timedelta(seconds=self.settings.sources.lease_seconds)}
        if progress is not None:
            values["progress"] = progress
        with self.db.session() as session:
            session.execute(update(Source).where(Source.id == source_pk, Source.lease_owner == self.owner)
                            .values(**values).execution_options(synchronize_session=False))

    def _finish(self, source_pk: str, report: SyncReport | None, cursor: dict | None) -> None:
        now = utcnow()
        with self.db.session() as session:
            row = session.get(Source, source_pk)
            if row is None:
                return
            row.status, row.lease_owner, row.lease_until, row.progress = SOURCE_IDLE, None, None, None
            row.last_finished_at = now
            if report is not None:
                telemetry.count(telemetry.SYNCS, row.name, report.outcome)
                row.last_outcome = report.outcome
                row.last_error = report.error
                row.last_counts = {k: v for k, v in report.summary().items() if k != "knowledge_base"}
                row.last_failures = [list(f) for f in report.failed[:50]] or None
            if cursor is not None:
                row.cursor = cursor
            if row.every_seconds:
                row.next_run_at = now + timedelta(seconds=row.every_seconds)

    # ----- the schedule -----

    def due(self, limit: int = 10) -> list[str]:
        """Sources whose next run has come, not paused and not running (for `rag serve`'s scheduler)."""
        now = utcnow()
        with self.db.session() as session:
            return list(session.scalars(
                select(Source.id).where(Source.every_seconds.is_not(None), Source.paused.is_(False),
                                        Source.next_run_at <= now,
                                        or_(Source.lease_until.is_(None), Source.lease_until < now))
                .order_by(Source.next_run_at).limit(limit)))


class _NotRunnable(Exception):
    """The source cannot be synced as it stands (a missing secret, settings no longer valid)."""


def _limited(items: Callable, limit: int) -> Callable:
    return lambda: iter_limited(items(), limit)


class _Heartbeat(threading.Thread):
    """Renews the sync's lease while it runs, and writes its progress to the source's row (at most
    every few seconds), so `rag source show` and /v1/sources show a running sync moving."""

    def __init__(self, sources: Sources, source_pk: str, done: threading.Event) -> None:
        super().__init__(name="rag-source-lease", daemon=True)
        self.sources, self.source_pk, self.done = sources, source_pk, done
        self.latest: dict[str, Any] | None = None
        self.lock = threading.Lock()

    def wrap(self, progress: Progress) -> Progress:
        def report(stage: str, done: int, total: int) -> None:
            with self.lock:
                self.latest = {**(self.latest or {}), "stage": stage, "done": done, "total": total}
            progress(stage, done, total)
        return report

    def note(self, counts: dict[str, Any]) -> None:
        with self.lock:
            self.latest = {**(self.latest or {}), **counts}

    def run(self) -> None:
        interval = max(1.0, min(5.0, self.sources.settings.sources.lease_seconds / 3))
        while not self.done.wait(interval):
            with self.lock:
                latest = dict(self.latest) if self.latest else None
            try:
                self.sources.renew(self.source_pk, latest)
            except Exception:  # noqa: BLE001 - a missed renewal is retried; the sync goes on
                log.warning("renewing the lease of source %s failed", self.source_pk, exc_info=True)
