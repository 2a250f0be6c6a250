"""The connectors by kind: "module:Class", imported on first use (a command that syncs no bucket
never imports boto3). Adding a connector is one module and one line here."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from rag.errors import InvalidArgument

if TYPE_CHECKING:
    from rag.sources.base import Connector

CONNECTORS: dict[str, str] = {
    "folder": "rag.sources.folder:FolderConnector",
    "website": "rag.sources.website:WebsiteConnector",
    "git": "rag.sources.git:GitConnector",
    "s3": "rag.sources.s3:S3Connector",
    "notion": "rag.sources.notion:NotionExport",
    "confluence": "rag.sources.confluence:ConfluenceExport",
    "imap": "rag.sources.imap:ImapConnector",
}


def kinds() -> list[str]:
    return sorted(CONNECTORS)


def connector_class(kind: str) -> type[Connector]:
    where = CONNECTORS.get(kind)
    if where is None:
        raise InvalidArgument(f"unknown source kind {kind!r}; the kinds are: {', '.join(kinds())}")
    module, name = where.split(":")
    return getattr(import_module(module), name)
