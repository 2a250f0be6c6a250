"""The store's migrations as the tests drive them (alembic, with the package's own ini)."""

from __future__ import annotations

from rag.store.db import _ALEMBIC_INI


def alembic_config():
    from alembic.config import Config

    config = Config(str(_ALEMBIC_INI))
    config.set_main_option("script_location", str(_ALEMBIC_INI.parent / "migrations"))
    return config
