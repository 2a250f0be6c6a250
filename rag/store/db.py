"""Opening the store: engine, migrations (alembic), sessions."""

from __future__ import annotations

import logging
import re
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Iterator

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.orm import Session, sessionmaker

log = logging.getLogger(__name__)

_ALEMBIC_INI = Path(__file__).with_name("alembic.ini")
MIGRATION_LOCK = 0x7261675F6D6967  # "rag_mig": the advisory lock that serialises schema upgrades


def make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn, _record) -> None:  # pragma: no cover - exercised by every test
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20)


@lru_cache(maxsize=1)
def head_revision() -> str | None:
    """The newest revision of the migrations, read from their files' `revision` and `down_revision`
    lines without loading alembic; None when they do not form one line of revisions."""
    revisions, parents = set(), set()
    for path in (_ALEMBIC_INI.parent / "migrations" / "versions").glob("*.py"):
        source = path.read_text(encoding="utf-8")
        found = {name: re.search(rf"^{name} = (?:'([^']*)'|\"([^\"]*)\"|None)$", source, re.M)
                 for name in ("revision", "down_revision")}
        if found["revision"] is None or found["down_revision"] is None:
            return None
        revisions.add(next(filter(None, found["revision"].groups()), None))
        parents.add(next(filter(None, found["down_revision"].groups()), None))
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 and None not in revisions else None


def at_head(engine: Engine) -> bool:
    """Whether the schema is already at the newest revision: then opening the store needs no
    alembic at all (importing it and reading its scripts is a good part of a cold command's start)."""
    head = head_revision()
    if head is None:
        return False
    try:
        with engine.connect() as conn:
            stamped = [row[0] for row in conn.execute(text("SELECT version_num FROM alembic_version"))]
    except Exception:  # noqa: BLE001 - no version table yet (a new store): alembic makes it
        return False
    return stamped == [head]


def migrate(engine: Engine) -> None:
    """Bring the schema to the newest revision (idempotent)."""
    if at_head(engine):
        return
    from alembic import command
    from alembic.config import Config

    cfg = Config(str(_ALEMBIC_INI))
    cfg.set_main_option("script_location", str(_ALEMBIC_INI.parent / "migrations"))
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            # Several workers or replicas may start at once on an empty database: one migrates,
            # the others wait for it here (the lock goes with this transaction) and find it done.
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")


class Database:
    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url)
        migrate(self.engine)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A unit of work: committed when the block ends, rolled back on an exception."""
        session = self._sessions()
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()

    def close(self) -> None:
        self.engine.dispose()
