"""Connectors: where knowledge lives (a folder, a website, a Git repository, a bucket, an export).

A connector only lists items and fetches their bytes (rag/sources/base.py); the sync engine
(rag/service/sources/engine.py) decides what changed, and the format parsers (rag/ingest/) turn
bytes into documents. Adding a connector is one module here and one entry in registry.py.
"""
