"""The knowledge base editor: the web page where people review what agents write and check what
answers cite, served by `rag serve` at `/` (rag/web/pages.py)."""

from rag.web.pages import install

__all__ = ["install"]
