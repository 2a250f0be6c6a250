"""Sources in an archive: they travel idle and without their secrets (issue 29, section 1).

A source's row never holds a secret's value: `secret` is only the name of one that the target's
Settings supply (RAG_SOURCE_SECRETS__<NAME>), and it travels so that the imported source asks the
target for the same secret. What belongs to a sync running at the moment of the export does not
travel: the lease (`lease_owner`, `lease_until`) names a process of the exporting host, and
`progress` is that sync's; an imported source is idle, with its last finished sync, and its next
sync resumes from its items as a sync after kill -9 does. The import makes the same so of a row
an older or hand-made archive brings.

Settings are checked by the connector's own model when a source is added, and its errors are
written without secrets; still, an export is where a leak would leave the host for good, so the
rows of sources and of their items are searched for the value of every secret the exporting
service's Settings supply. Found in a message (the last error, a failure's reason) it is masked;
found in what a sync works from (settings, cursor, an item's id, version or state) the export is
refused: masking those would quietly break the imported source. Values shorter than
`MIN_SECRET_CHARS` are not searched for: they would match ordinary text.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rag.errors import InvalidArgument
from rag.store.models import SOURCE_IDLE

if TYPE_CHECKING:
    from rag.settings import Settings

LEFT_BEHIND = ("lease_owner", "lease_until", "progress")  # the running sync's, of the exporting host
MESSAGES = ("last_error", "last_failures")  # masked
MIN_SECRET_CHARS = 8
MASK = "[secret]"


def idle(row: dict[str, Any]) -> dict[str, Any]:
    """A source's row as it travels and loads: not leased, not running, no progress."""
    kept = {k: v for k, v in row.items() if k not in LEFT_BEHIND}
    kept["status"] = SOURCE_IDLE
    return kept


def secret_values(settings: Settings) -> list[str]:
    """The values of the secrets Settings supply (a `_FILE` form read from its file), longest first
    so that a secret inside another is masked as the longer one."""
    names = {key.removesuffix("_file") for key in settings.source_secrets}
    values = {settings.source_secret(name) for name in names}
    return sorted((v for v in values if v and len(v) >= MIN_SECRET_CHARS), key=len, reverse=True)


class SecretGuard:
    """Masks or refuses the rows of sources and source items that hold a secret's value."""

    def __init__(self, settings: Settings) -> None:
        self.values = secret_values(settings)
        self.names: dict[str, str] = {}  # source id -> "'name' of workspace 'ws'", for the messages

    def outgoing(self, table: str, row: dict[str, Any]) -> dict[str, Any]:
        if table == "sources":
            self.names[row["id"]] = f"{row['name']!r} of workspace {row['workspace_id']!r}"
            row = idle(row)
            if self.values:
                row = self._checked(row["id"], row, MESSAGES)
        elif table == "source_items" and self.values:
            row = self._checked(row["source_pk"], row, ())
        return row

    def _checked(self, source_pk: str, row: dict[str, Any], masked: tuple[str, ...]) -> dict[str, Any]:
        out = {}
        for column, value in row.items():
            if column in masked:
                out[column] = self._mask(value)
                continue
            if self._holds(value):
                raise InvalidArgument(
                    f"source {self.names.get(source_pk, repr(source_pk))} holds the value of a secret in its "
                    f"{'items' if 'item_id' in row else column}: change its settings (rag source change) or "
                    "sync it again before exporting; nothing was exported")
            out[column] = value
        return out

    def _holds(self, value: Any) -> bool:
        if value is None or isinstance(value, (bool, int, float)):
            return False
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        return any(secret in text or _escaped(secret) in text for secret in self.values)

    def _mask(self, value: Any) -> Any:
        if isinstance(value, str):
            for secret in self.values:
                value = value.replace(secret, MASK)
            return value
        if isinstance(value, list):
            return [self._mask(v) for v in value]
        if isinstance(value, dict):
            return {k: self._mask(v) for k, v in value.items()}
        return value


def _escaped(secret: str) -> str:
    """How the secret reads inside a JSON string (a quote or a backslash in it is escaped)."""
    return json.dumps(secret, ensure_ascii=False)[1:-1]
