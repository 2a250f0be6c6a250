"""The service layer: one KnowledgeService for every surface."""

from rag.service.core import KnowledgeService, SearchResult
from rag.service.ingest import IngestReport
from rag.service.principal import Principal

__all__ = ["IngestReport", "KnowledgeService", "Principal", "SearchResult"]
