"""`python -m benchmarks.sources` at 12 pages, as a check of what it measures rather than of its
timings: for a website on 127.0.0.1 and a Git repository, a re-sync of nothing changed embeds
nothing and writes nothing, and three changed items give exactly three documents a new version.
The embedding cache is the tests' shared one (speed is not the point here)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from benchmarks.sources import CORPUS, KINDS, main


def test_the_sources_benchmark_resyncs_nothing_and_counts_three_new_versions(tmp_path: Path) -> None:
    if not CORPUS.is_file():
        pytest.skip(f"the SciFact corpus is not at {CORPUS}")
    out = tmp_path / "sources.json"
    cache = os.environ.get("RAG_EMBED_CACHE", str(tmp_path / "embeddings.sqlite"))
    result = main(["--pages", "12", "--home", str(tmp_path / "run"), "--embed-cache", cache, "--json", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(result))
    assert set(result["kinds"]) == set(KINDS)
    for kind, measured in result["kinds"].items():
        first, again, changed = measured["first"], measured["resync"], measured["changed"]
        assert first["outcome"] == "ok" and first["added"] == 12 and not first["failed"], (kind, first)
        assert first["chunks"] > 0 and first["texts_embedded"] > 0 and first["new_versions"] == 12, (kind, first)
        assert again["outcome"] == "ok" and again["unchanged"] == 12, (kind, again)
        assert again["texts_embedded"] == 0 and again["chunks"] == 0 and again["new_versions"] == 0, (kind, again)
        assert changed["updated"] == 3 and changed["added"] == 0 and changed["unchanged"] == 9, (kind, changed)
        assert changed["new_versions"] == 3 and changed["documents_with_new_version"] == 3, (kind, changed)
        assert set(measured["figures"]["shares"]) >= {"listing", "fetching", "parsing", "indexing", "embedding"}
