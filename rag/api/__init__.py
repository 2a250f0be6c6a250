"""The HTTP API (FastAPI): search, cited answers (streamed), an OpenAI-compatible chat endpoint,
knowledge management, with bearer tokens. `create_app()` builds it; `rag serve` runs it."""

from rag.api.app import create_app

__all__ = ["create_app"]
