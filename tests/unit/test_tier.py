"""The unit tier stays the inner loop: collecting and running tests/unit alone imports neither the
service nor a model runtime (torch, onnxruntime, chromadb, sentence-transformers)."""

from __future__ import annotations

import sys

import pytest

HEAVY = ("rag.service", "torch", "onnxruntime", "chromadb", "sentence_transformers", "uvicorn")


def test_the_unit_tier_loads_no_service_and_no_model(request: pytest.FixtureRequest):
    if any(not item.nodeid.startswith("tests/unit/") for item in request.session.items):
        pytest.skip("other tiers were collected in this run (they import the service)")
    assert [name for name in HEAVY if name in sys.modules] == []
