"""Who is calling: the identity every service call carries, and what it may see."""

from __future__ import annotations

from dataclasses import dataclass, field

ACCESS_NONE = "none"
ACCESS_ALL = "all"
ACCESS_FOLDERS = "folders"


@dataclass(frozen=True)
class Principal:
    actor: str
    workspace_id: str
    role: str = "admin"  # viewer | editor | admin
    scopes: frozenset[str] = field(default_factory=lambda: frozenset({"knowledge:read", "knowledge:write"}))
    access: str = ACCESS_ALL  # none | all | folders
    folder_ids: tuple[str, ...] = ()
    is_agent: bool = False

    @classmethod
    def local_admin(cls, workspace_id: str) -> "Principal":
        """Whoever can open RAG_HOME administers it: the local CLI needs no token."""
        return cls(actor="local-cli", workspace_id=workspace_id)
