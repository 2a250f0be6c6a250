"""Bearer tokens: who a caller is, in which workspaces, with which role, scopes and access.

A token belongs to one principal (a person or an agent) and is made for one workspace, its home.
Only the SHA-256 of the secret is stored; the secret is shown once, when the token is made.
Scopes: `knowledge:read` always, `knowledge:write` only when given. Knowledge-base access: none,
all, or selected folders; an agent's token starts with none unless told, a person's with all.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Iterable

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from rag.errors import InvalidArgument, NotFound, PermissionDenied, Unauthenticated
from rag.service.activity import recorded
from rag.service.arguments import MAX_EXPIRY_DAYS, MAX_TOKEN_NAME_CHARS
from rag.service.content.tree import ensure_workspace
from rag.service.checks import MAX_NAME_CHARS, id_arg, int_arg, lookup_name_arg, name_arg, name_key
from rag.service.identity.principal import (
    ACCESS_ALL,
    ACCESS_FOLDERS,
    ACCESS_LEVELS,
    ACCESS_NONE,
    ROLES,
    SCOPE_READ,
    SCOPES,
    Principal,
    Standing,
)
from rag.service.content.views import View
from rag.store.models import (
    AGENT,
    FOLDER,
    PERSON,
    ApiToken,
    KnowledgeBase,
    Membership,
    Node,
    PrincipalRecord,
    utcnow,
)

if TYPE_CHECKING:
    from rag.service.identity.access import Access
    from rag.service.activity import ActivityLog
    from rag.settings import Settings
    from rag.store.db import Database

log = logging.getLogger(__name__)

TOKEN_PREFIX = "rag_"
INVALID_TOKEN = "invalid or expired token"
ONE_AUTHORIZATION = "send one Authorization header, not several"  # which would count? neither
LAST_USED_EVERY = timedelta(minutes=1)  # last_used_at is a hint, not worth a write per request


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def _aware(moment: datetime | None) -> datetime | None:
    """SQLite hands back naive datetimes; every one here was written in UTC."""
    return moment.replace(tzinfo=timezone.utc) if moment is not None and moment.tzinfo is None else moment


def actor_name(kind: str, name: str, principal_id: str) -> str:
    """How the activity history names a token's principal: "<kind>:<name> (<id>)", at most 200 characters."""
    return f"{kind}:{name} ({principal_id})"[:200]


def is_agent_actor(actor: str | None) -> bool:
    """Is this history actor (as actor_name writes it) an agent?"""
    return bool(actor) and actor.startswith(f"{AGENT}:")


@dataclass
class TokenInfo(View):
    """A token as listings show it: never its secret, nor its hash."""

    token_id: str
    principal_id: str
    name: str
    kind: str  # person | agent
    workspace_id: str  # its home workspace
    role: str
    scopes: list[str]
    access: str
    folder_ids: list[str]
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    last_used_at: datetime | None
    home_only: bool = False  # acts in its home workspace only (made by a workspace's admin)

    @property
    def active(self) -> bool:
        expires = _aware(self.expires_at)
        return self.revoked_at is None and (expires is None or expires > utcnow())


class Tokens:
    """The token operations take no caller: the local CLI (whoever can open RAG_HOME) administers
    tokens. A surface that lets a token holder do it passes `by`, which must then be a person who
    is an admin of the workspace concerned."""

    def __init__(self, db: Database, settings: Settings, access: Access, activity: ActivityLog) -> None:
        self.db = db
        self.settings = settings
        self.access = access
        self.activity = activity

    # ----- the public operations -----

    def create_token(
        self,
        workspace: str,
        role: str,
        scopes: Iterable[str] = (),
        access: str | None = None,
        folders: Iterable[str] = (),
        agent: bool = False,
        expires_days: int | None = None,
        name: str | None = None,
        principal_id: str | None = None,
        by: Principal | None = None,
    ) -> tuple[str, TokenInfo]:
        """A new token; returns (secret, info). The secret is never shown again. With principal_id,
        the token is another one of that principal, whose role in `workspace` becomes `role`."""
        actor = self._admin(by, workspace)  # before the workspace is made: a caller may not make one
        ensure_workspace(self.db, self.settings, workspace)
        return self._create_token(actor, workspace, role, scopes, access, folders, agent,
                                  expires_days, name, principal_id, by is None)

    def list_tokens(self, workspace: str | None = None, by: Principal | None = None) -> list[TokenInfo]:
        """Every token (of one workspace), newest first, revoked and expired ones included."""
        if by is not None and workspace is None:
            workspace = by.workspace_id  # a token holder sees one workspace's tokens, never all
        return self._list_tokens(self._admin(by, workspace), workspace)

    def revoke_token(self, token_id: str, by: Principal | None = None) -> TokenInfo:
        """Revoke a token for good; revoking it again changes nothing."""
        token_id = id_arg(token_id, "token_id", "token not found")
        with self.db.session() as session:
            token = session.get(ApiToken, token_id)
            workspace = token.workspace_id if token is not None else None
        if by is not None and workspace != by.workspace_id:
            raise NotFound("token not found")  # a token of another workspace is none of the caller's business
        return self._revoke_token(self._admin(by, workspace), token_id)

    def authenticate(self, secret: object) -> Principal:
        """The principal a bearer secret speaks for. Unknown, revoked and expired secrets get the
        same answer, so it never tells whether a token existed."""
        if not isinstance(secret, str) or not secret.startswith(TOKEN_PREFIX) or len(secret) > 200:
            raise Unauthenticated(INVALID_TOKEN)
        return self._principal(ApiToken.secret_hash == _hash(secret))

    def authenticate_token_id(self, token_id: str) -> Principal:
        """The principal of a token the server itself holds the id of (an editor session, made by
        signing in with the secret: rag/service/identity/sessions.py), under the same rules as authenticate."""
        return self._principal(ApiToken.id == token_id)

    def _principal(self, which: Any) -> Principal:
        now = utcnow()
        with self.db.session() as session:
            token = session.scalar(select(ApiToken).where(which))
            if token is None or token.revoked_at is not None or (token.expires_at and _aware(token.expires_at) <= now):
                raise Unauthenticated(INVALID_TOKEN)
            who = session.get(PrincipalRecord, token.principal_id)
            roles = {ws: role for ws, role in session.execute(
                select(Membership.workspace_id, Membership.role).where(Membership.principal_id == token.principal_id)
            )}
            if who is None or token.workspace_id not in roles:
                raise Unauthenticated(INVALID_TOKEN)
            stale = token.last_used_at is None or now - _aware(token.last_used_at) > LAST_USED_EVERY
            if token.home_only:
                roles = {token.workspace_id: roles[token.workspace_id]}
            standings = self._standings(session, token.principal_id, roles, token.workspace_id, now)
            principal = Principal(
                actor=actor_name(who.kind, who.name, who.id),
                workspace_id=token.workspace_id,
                role=roles[token.workspace_id],
                scopes=frozenset(token.scopes),
                access=token.access,
                folder_ids=tuple(token.folder_ids),
                is_agent=who.kind == AGENT,
                memberships=tuple(sorted(roles.items())),
                standings=standings,
                token_id=token.id,
                principal_id=who.id,
            )
        if stale:
            self._touch(principal.token_id, now)
        return principal

    def _touch(self, token_id: str, now: datetime) -> None:
        """last_used_at is a hint: failing to write it (a full disk, a busy store) must not fail a read."""
        try:
            with self.db.session() as session:
                session.execute(update(ApiToken).where(ApiToken.id == token_id).values(last_used_at=now))
        except Exception:  # noqa: BLE001
            log.warning("could not record when token %s was last used", token_id, exc_info=True)

    @staticmethod
    def _standings(session: Session, principal_id: str, roles: dict[str, str], home: str,
                   now: datetime) -> tuple[tuple[str, Standing], ...]:
        """The principal's standing in each of its other workspaces: the role of its membership
        and the union of what its active tokens for that workspace grant."""
        others = [ws for ws in roles if ws != home]
        if not others:
            return ()
        grants: dict[str, list[ApiToken]] = {ws: [] for ws in others}
        for token in session.scalars(select(ApiToken).where(
            ApiToken.principal_id == principal_id, ApiToken.workspace_id.in_(others), ApiToken.revoked_at.is_(None)
        )):
            if token.expires_at is None or _aware(token.expires_at) > now:
                grants[token.workspace_id].append(token)
        standings = []
        for ws in sorted(others):
            tokens = grants[ws]
            scopes = frozenset(scope for t in tokens for scope in t.scopes)
            if any(t.access == ACCESS_ALL for t in tokens):
                access, folders = ACCESS_ALL, ()
            else:
                folders = tuple(dict.fromkeys(f for t in tokens if t.access == ACCESS_FOLDERS for f in t.folder_ids))
                access = ACCESS_FOLDERS if folders else ACCESS_NONE
            standings.append((ws, Standing(roles[ws], scopes, access, folders)))
        return tuple(standings)

    # ----- the recorded bodies -----

    def _admin(self, by: Principal | None, workspace: str | None) -> Principal:
        """Who acts: the local administrator, or `by`, an admin person of the workspace."""
        if by is None:
            return Principal.local_admin(workspace or self.settings.default_workspace)
        if by.is_agent:
            raise PermissionDenied("tokens are managed by people who are admins, never by agents")
        acting = by.in_workspace(workspace) if workspace else by
        self.access.require_all(acting, "managing tokens")  # else a folder-scoped admin could mint a wider token
        self.access.require_role(acting, "admin")
        return acting

    @recorded("create_token", detail=("workspace", "role", "access", "agent", "expires_days"),
              after=lambda made: {"created_token": made[1].token_id})
    def _create_token(self, actor: Principal, workspace: str, role: str, scopes: Iterable[str], access: str | None,
                      folders: Iterable[str], agent: bool, expires_days: int | None, name: str | None,
                      principal_id: str | None, any_principal: bool = False) -> tuple[str, TokenInfo]:
        """`any_principal`: the local administrator may add any principal to a workspace; an admin
        who is a token holder only makes tokens for members of its own workspace, and any other
        principal id answers as an unknown one does."""
        if role not in ROLES:
            raise InvalidArgument("`role` must be viewer, editor or admin")
        granted = self._scopes(scopes)
        folder_specs = [folders] if isinstance(folders, str) else list(folders or ())
        access = access if access is not None else (ACCESS_FOLDERS if folder_specs else ACCESS_NONE if agent else ACCESS_ALL)
        if access not in ACCESS_LEVELS:
            raise InvalidArgument("`access` must be none, all or folders")
        if (access == ACCESS_FOLDERS) != bool(folder_specs):
            raise InvalidArgument("folders are given with access 'folders', and access 'folders' needs folders")
        days = None if expires_days is None else int_arg(expires_days, "expires_days", 1, MAX_EXPIRY_DAYS)
        if name is not None and (not isinstance(name, str) or not name.strip() or len(name) > MAX_TOKEN_NAME_CHARS):
            raise InvalidArgument(f"`name` must be 1 to {MAX_TOKEN_NAME_CHARS} characters")
        if name is not None:
            name = name_arg(name, "token")  # it becomes the actor's name in the activity history
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        with self.db.session() as session:
            folder_ids = list(dict.fromkeys(self._resolve_folder(session, workspace, s) for s in folder_specs))
            if principal_id is not None:
                principal_id = id_arg(principal_id, "principal_id", "principal not found")
                if not any_principal and session.get(Membership, (principal_id, workspace)) is None:
                    raise NotFound("principal not found")
            who = self._principal_record(session, principal_id, agent, name)
            membership = session.get(Membership, (who.id, workspace))
            if membership is None:
                session.add(Membership(principal_id=who.id, workspace_id=workspace, role=role))
            else:
                membership.role = role
            token = ApiToken(
                principal_id=who.id, workspace_id=workspace, secret_hash=_hash(secret), scopes=granted,
                access=access, folder_ids=folder_ids, home_only=not any_principal,
                expires_at=utcnow() + timedelta(days=days) if days else None,
            )
            session.add(token)
            session.flush()
            info = self._info(token, who, role)
        return secret, info

    @staticmethod
    def _scopes(scopes: Iterable[str]) -> list[str]:
        given = [scopes] if isinstance(scopes, str) else list(scopes or ())
        for scope in given:
            if scope not in SCOPES:
                raise InvalidArgument(f"unknown scope {scope!r}: the scopes are knowledge:read and knowledge:write")
        return [s for s in SCOPES if s == SCOPE_READ or s in given]  # read always, write only when given

    @staticmethod
    def _principal_record(session: Session, principal_id: str | None, agent: bool, name: str | None) -> PrincipalRecord:
        kind = AGENT if agent else PERSON
        if principal_id is None:
            who = PrincipalRecord(name=(name or "").strip() or f"{kind}-{secrets.token_hex(3)}", kind=kind)
            session.add(who)
            session.flush()
            return who
        who = session.get(PrincipalRecord, principal_id) if isinstance(principal_id, str) else None
        if who is None:
            raise NotFound("principal not found")
        if who.kind != kind:
            raise InvalidArgument(f"principal {principal_id} is {'an' if who.kind == AGENT else 'a'} {who.kind}")
        return who

    def _resolve_folder(self, session: Session, workspace: str, spec: object) -> str:
        """A folder by node id, by its path in the default knowledge base (`travel-and-leave/x`) or
        by `KB:path` in another (`KB:` alone is that knowledge base's root folder)."""
        if not isinstance(spec, str) or not spec.strip():
            raise InvalidArgument("a folder must be a node id or a path")
        spec = spec.strip()
        # No stored folder has a path that no name can spell: not found, before any look-up.
        lookup_name_arg(spec, f"folder not found in workspace {workspace!r}", max_chars=4 * MAX_NAME_CHARS)
        node = session.get(Node, spec)
        if node is not None and node.workspace_id == workspace:
            if node.kind != FOLDER:
                raise InvalidArgument(f"{spec!r} is a document, not a folder")
            return node.id
        kb_name, path = spec.split(":", 1) if ":" in spec else (self.settings.default_kb, spec)
        kb = session.scalar(select(KnowledgeBase).where(
            KnowledgeBase.workspace_id == workspace, KnowledgeBase.name_key == name_key(kb_name)
        ))
        folder_id = kb.root_id if kb is not None else None
        for part in (p for p in path.split("/") if p.strip()):
            folder_id = session.scalar(select(Node.id).where(
                Node.parent_id == folder_id, Node.name_key == name_key(" ".join(part.split())), Node.kind == FOLDER
            )) if folder_id else None
        if folder_id is None:
            raise NotFound(f"folder {spec!r} not found in workspace {workspace!r}")
        return folder_id

    @recorded("list_tokens")
    def _list_tokens(self, actor: Principal, workspace: str | None) -> list[TokenInfo]:
        with self.db.session() as session:
            stmt = (
                select(ApiToken, PrincipalRecord, Membership.role)
                .join(PrincipalRecord, PrincipalRecord.id == ApiToken.principal_id)
                .join(Membership, (Membership.principal_id == ApiToken.principal_id)
                      & (Membership.workspace_id == ApiToken.workspace_id))
                .order_by(ApiToken.created_at.desc(), ApiToken.id)
            )
            if workspace is not None:
                stmt = stmt.where(ApiToken.workspace_id == workspace)
            return [self._info(token, who, role) for token, who, role in session.execute(stmt)]

    @recorded("revoke_token", target="token_id")
    def _revoke_token(self, actor: Principal, token_id: str) -> TokenInfo:
        with self.db.session() as session:
            token = session.get(ApiToken, token_id) if isinstance(token_id, str) else None
            if token is None:
                raise NotFound("token not found")
            if token.revoked_at is None:
                token.revoked_at = utcnow()
            who = session.get(PrincipalRecord, token.principal_id)
            membership = session.get(Membership, (token.principal_id, token.workspace_id))
            return self._info(token, who, membership.role if membership else "viewer")

    @staticmethod
    def _info(token: ApiToken, who: PrincipalRecord, role: str) -> TokenInfo:
        return TokenInfo(
            token.id, who.id, who.name, who.kind, token.workspace_id, role, list(token.scopes), token.access,
            list(token.folder_ids), token.created_at, token.expires_at, token.revoked_at, token.last_used_at,
            bool(token.home_only),
        )
