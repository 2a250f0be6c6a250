"""The service layer: one KnowledgeService for every surface."""

from rag.service.core import KnowledgeService
from rag.service.query.search import SearchResult
from rag.service.indexing.ingest import IngestReport
from rag.service.query.kb_search import KnowledgeBaseSearch
from rag.service.identity.principal import Principal
from rag.service.identity.tokens import TokenInfo

__all__ = ["IngestReport", "KnowledgeBaseSearch", "KnowledgeService", "Principal", "SearchResult", "TokenInfo"]
