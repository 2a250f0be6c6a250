"""The service layer: one KnowledgeService for every surface."""

from rag.service.core import KnowledgeService
from rag.service.search import SearchResult
from rag.service.ingest import IngestReport
from rag.service.kb_search import KnowledgeBaseSearch
from rag.service.principal import Principal
from rag.service.tokens import TokenInfo

__all__ = ["IngestReport", "KnowledgeBaseSearch", "KnowledgeService", "Principal", "SearchResult", "TokenInfo"]
