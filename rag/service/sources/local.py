"""Where a source may read this server's disk (issue 49, defect 2).

A folder, an export (Notion, Confluence), a local Git repository (an absolute path or a file://
URL) and a Git cache directory are paths on the server. Whoever adds a source through the HTTP
API, MCP or the editor is a workspace's admin, not the operator of the machine: such a path is
taken only inside a directory the operator lists in RAG_SOURCES__LOCAL_ROOTS (none by default),
once links are resolved (realpath), and never in or above RAG_HOME (the store, the tokens, other
sources' mirrors under RAG_HOME/sources/), whatever the roots say. It is checked when the source
is added, when its settings change, and before every sync (a link swapped in since is caught).

The operator owns the machine: a source added by `rag source add` on the command line (in
process, or relayed to `rag serve` through its local secret) is marked `added_by_operator` and
reads any path the service can, on every sync, until a workspace's admin changes its settings;
`rag ingest DIR` is the operator's too. The refusal says the same whether the path exists or not.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rag.errors import PermissionDenied

if TYPE_CHECKING:
    from rag.settings import Settings

REFUSED = ("{path!r} is not inside a directory the operator lets sources read (RAG_SOURCES__LOCAL_ROOTS; "
           "never the service's own home); a source on any path is added by the operator with `rag source add`")


def _real(path: str | os.PathLike) -> Path:
    return Path(os.path.realpath(os.path.expanduser(os.fspath(path))))


@dataclass(frozen=True)
class LocalPaths:
    roots: tuple[Path, ...]
    home: Path

    @classmethod
    def of(cls, settings: Settings) -> LocalPaths:
        return cls(tuple(_real(r) for r in settings.sources.local_roots if r), _real(settings.home))

    def check(self, path: str) -> str:
        """`path` resolved (links followed), when a source not the operator's may read it;
        PermissionDenied otherwise."""
        real = _real(path)
        inside = any(real.is_relative_to(root) for root in self.roots)
        if not inside or real.is_relative_to(self.home) or self.home.is_relative_to(real):
            raise PermissionDenied(REFUSED.format(path=path))
        return str(real)

    def checked(self, paths: dict[str, str]) -> dict[str, str]:
        """Each setting that names a local path, resolved and checked."""
        return {name: self.check(path) for name, path in paths.items()}
