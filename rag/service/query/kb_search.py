"""search_knowledge_base (search_knowledge_base.txt): search each knowledge base of a workspace the
caller picks, merge by score, keep the best top_k.

Its contract differs from search_knowledge on purpose: `query is required` comes before anything
else, top_k is enforced (1 to 50) rather than clamped, a knowledge base that fails is skipped and
logged. Beyond the document, the result names the knowledge bases that failed, so an empty result
tells "nothing matched" from "every knowledge base failed".
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy.exc import SQLAlchemyError

from rag.errors import InvalidArgument, NotFound, RagError, Unavailable
from rag.retrieve.types import Hit, Scope
from rag.service.checks import int_arg, name_key
from rag.service.arguments import TOP_K_DEFAULT, TOP_K_MAX
from rag.service.content.tree import workspace_kbs
from rag.service.identity.principal import Principal
from rag.service.arguments import check_query

if TYPE_CHECKING:
    from rag.service.identity.access import Access
    from rag.service.activity import ActivityLog
    from rag.service.engines import Engines
    from rag.store.db import Database

log = logging.getLogger(__name__)

QUERY_REQUIRED = "query is required"
WORKSPACE_REQUIRED = "workspace_id is required when you belong to more than one workspace"
NO_KNOWLEDGE_BASE = "no knowledge base configured for this workspace"
UNREACHABLE = "the knowledge base service is unreachable"
UNEXPECTED = "this tool call could not be completed"  # what a surface says for anything unanticipated


@dataclass
class KnowledgeBaseSearch:
    query: str
    workspace_id: str
    hits: list[Hit] = field(default_factory=list)
    note: str | None = None  # set only when the workspace has no knowledge base
    failed_knowledge_bases: list[dict[str, str]] = field(default_factory=list)  # {"id", "name"} of each


class KnowledgeBaseSearches:
    """search_knowledge_base, over the access policy and the retriever."""

    def __init__(self, db: Database, access: Access, activity: ActivityLog, engines: Engines) -> None:
        self.db = db
        self.access = access
        self.activity = activity
        self.engines = engines

    def search_knowledge_base(
        self,
        principal: Principal,
        query: object = None,
        workspace_id: object = None,
        kb_id: object = None,
        top_k: object = TOP_K_DEFAULT,
    ) -> KnowledgeBaseSearch:
        acting = principal
        try:
            if query is None or (isinstance(query, str) and not query.strip()):
                raise InvalidArgument(QUERY_REQUIRED)
            query = check_query(query)
            self.access.take(principal, "search")
            acting = principal.in_workspace(self._pick_workspace(principal, workspace_id))
            self.access.reader(acting)  # no knowledge-base access fails, as every node tool does
            k = int_arg(top_k, "top_k", 1, TOP_K_MAX, default=TOP_K_DEFAULT)
            result = self._search_workspace(acting, query, kb_id, k)
        except RagError as exc:
            self.activity.record(acting, "search_knowledge_base", None, exc.code)
            raise
        except Exception:
            self.activity.record(acting, "search_knowledge_base", None, "error")
            raise
        self.activity.record(acting, "search_knowledge_base", kb_id if isinstance(kb_id, str) else None, "ok", {
            "results": len(result.hits), "failed": len(result.failed_knowledge_bases), "query_chars": len(query),
        })
        return result

    @staticmethod
    def _pick_workspace(principal: Principal, workspace_id: object) -> str:
        if workspace_id is None:
            workspaces = list(principal.workspaces)
            if len(workspaces) != 1:
                raise InvalidArgument(WORKSPACE_REQUIRED)
            return workspaces[0]
        if not isinstance(workspace_id, str) or not workspace_id.strip():
            raise InvalidArgument("`workspace_id` must be a non-empty string")
        return workspace_id.strip()

    def _search_workspace(self, principal: Principal, query: str, kb_id: object, k: int) -> KnowledgeBaseSearch:
        result = KnowledgeBaseSearch(query, principal.workspace_id)
        if kb_id is not None and (not isinstance(kb_id, str) or not kb_id.strip()):
            raise InvalidArgument("`kb_id` must be a non-empty string")
        try:
            with self.db.session() as session:
                kbs = workspace_kbs(session, principal.workspace_id)
                if not kbs:
                    result.note = NO_KNOWLEDGE_BASE
                    return result
                # Only the knowledge bases the caller sees: a failure elsewhere must not name one
                # it cannot see.
                kbs = self.access.visible_among(session, principal, kbs)
                documents = self.access.visible_documents(session, principal)
        except SQLAlchemyError as exc:
            log.exception("listing the knowledge bases failed")
            raise Unavailable(UNREACHABLE) from exc
        if kb_id is not None:
            wanted = kb_id.strip()  # type: ignore[union-attr]
            kbs = [kb for kb in kbs if kb.id == wanted or kb.name_key == name_key(wanted)][:1]
            if not kbs:
                raise NotFound("knowledge base not found")
        retriever = self.engines.retriever
        asked = retriever.query(query, search=True)  # embedded once, whatever the number of knowledge bases
        for kb in kbs:
            try:
                result.hits += self.access.shown_hits(
                    principal, retriever.retrieve(asked, Scope(principal.workspace_id, (kb.id,), documents), k,
                                                  diverse=True)
                )
            except Exception:  # noqa: BLE001 - the document's rule: skip it, log it, go on with the others
                log.exception("knowledge base %s failed during search_knowledge_base; skipped", kb.id)
                result.failed_knowledge_bases.append({"id": kb.id, "name": kb.name})
        result.hits = sorted(result.hits, key=lambda h: -h.score)[:k]
        return result
