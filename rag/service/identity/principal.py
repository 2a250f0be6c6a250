"""Who is calling: the identity every service call carries, and what it may see.

A principal is a person or an agent. It acts in one workspace at a time (`workspace_id`, its
token's home workspace unless a call picks another of its `memberships`), with the role of its
membership there, the token's scopes and the token's knowledge-base access (none, all, or
selected folders).

In another of its workspaces, what a token may do is the intersection of the token's grants and
the principal's standing there (the role of that membership and what its own active tokens for
that workspace allow): a token's access never widens a membership. A folder-scoped token names
folders of its home workspace only, so elsewhere it has no access at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from rag.errors import NotFound

ACCESS_NONE = "none"
ACCESS_ALL = "all"
ACCESS_FOLDERS = "folders"
ACCESS_LEVELS = (ACCESS_NONE, ACCESS_ALL, ACCESS_FOLDERS)

ROLES = ("viewer", "editor", "admin")  # in ascending order of what they may do

SCOPE_READ = "knowledge:read"
SCOPE_WRITE = "knowledge:write"
SCOPES = (SCOPE_READ, SCOPE_WRITE)


@dataclass(frozen=True)
class Standing:
    """What a principal may do in one workspace: its role there, and the union of what its active
    tokens made for that workspace grant (scopes, knowledge-base access, folders)."""

    role: str
    scopes: frozenset[str] = frozenset()
    access: str = ACCESS_NONE
    folder_ids: tuple[str, ...] = ()


def narrower_access(token_access: str, standing: Standing) -> tuple[str, tuple[str, ...]]:
    """A token's access (of its home workspace) as it applies in another workspace: only an
    access-all token carries anything there, and then no more than the standing allows."""
    if token_access != ACCESS_ALL or standing.access == ACCESS_NONE:
        return ACCESS_NONE, ()
    return standing.access, standing.folder_ids


@dataclass(frozen=True)
class Principal:
    actor: str  # how the activity history names the caller
    workspace_id: str
    role: str = "admin"  # viewer | editor | admin, in workspace_id
    scopes: frozenset[str] = field(default_factory=lambda: frozenset(SCOPES))
    access: str = ACCESS_ALL  # none | all | folders
    folder_ids: tuple[str, ...] = ()
    is_agent: bool = False
    # (workspace id, role) of every membership; empty means the home workspace alone, with `role`.
    memberships: tuple[tuple[str, str], ...] = ()
    # (workspace id, standing) of each membership other than the home one; see the module text.
    standings: tuple[tuple[str, Standing], ...] = ()
    token_id: str | None = None  # None: not a token's (the local CLI, tests)
    principal_id: str | None = None
    # The operator of the machine (the `rag` command, in process or relayed through the local
    # secret), never a token's caller: only the operator adds a source on any local path.
    operator: bool = False

    @classmethod
    def local_admin(cls, workspace_id: str) -> "Principal":
        """Whoever can open RAG_HOME administers it: the local CLI needs no token."""
        return cls(actor="local-cli", workspace_id=workspace_id, operator=True)

    @property
    def workspaces(self) -> dict[str, str]:
        """The workspaces this principal may act in, with its role in each."""
        return dict(self.memberships) or {self.workspace_id: self.role}

    def in_workspace(self, workspace_id: str) -> "Principal":
        """The same principal acting in another of its workspaces, with the intersection of this
        token's grants and its standing there; a workspace it is not in reads as missing."""
        role = self.workspaces.get(workspace_id)
        if role is None:
            raise NotFound("workspace not found")
        if workspace_id == self.workspace_id:
            return self
        standing = dict(self.standings).get(workspace_id, Standing(role))
        access, folders = narrower_access(self.access, standing)
        return replace(
            self, workspace_id=workspace_id, role=role, scopes=self.scopes & standing.scopes,
            access=access, folder_ids=folders, memberships=self.memberships, standings=self.standings,
        )
