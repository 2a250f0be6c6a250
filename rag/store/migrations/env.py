"""Alembic environment: the connection comes from rag.store.db (config.attributes['connection'])."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from rag.store.models import Base

target_metadata = Base.metadata


def run() -> None:
    connection = context.config.attributes.get("connection")
    if connection is None:  # `alembic` run by hand with -x url=...
        url = context.get_x_argument(as_dictionary=True)["url"]
        engine = create_engine(url)
        with engine.begin() as conn:
            _migrate(conn)
        return
    _migrate(connection)


def _migrate(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


run()
