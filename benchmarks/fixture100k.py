"""Benchmark fixtures: a SciFact knowledge base and a 100,000-chunk one, built through our ingest path.

The 100k fixture is real text (SciFact + the HotpotQA dev500 corpus + the 18F handbook pages, all
as records), repeated with new ids (``<id>~r2``, ``~r3`` ...) until the knowledge base holds at
least 100,000 chunks. Repeated text gets its vectors from the shared embedding cache, so only the
unique chunks are really embedded. Each batch is one ``ingest_records`` call with its own provider
name (``scifact-r2`` ...), so a later batch never removes an earlier one and an interrupted build
resumes where it stopped. The built homes are cached under ``.cache/bench/`` (gitignored).

    python -m benchmarks.fixture100k             # build (or reuse) the 100k fixture
    python -m benchmarks.fixture100k --scifact   # the SciFact-only one
    python -m benchmarks.fixture100k --rebuild
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import sys
import time
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[1]
DATASETS = Path("/work/shared/datasets")
BENCH_CACHE = ROOT / ".cache" / "bench"
# The tests' shared cache by default (tests/conftest.py), or the one RAG_EMBED_CACHE names.
EMBED_CACHE = Path(os.environ.get("RAG_EMBED_CACHE") or ROOT / ".cache" / "embeddings.sqlite")
KB = "bench"
TARGET_CHUNKS = 100_000
SOURCES = ("handbook", "hotpotqa", "scifact")  # SciFact last: its vectors may already be cached by others


def read_jsonl(path: Path) -> Iterator[dict]:
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def handbook_records() -> list[dict]:
    """Each handbook page as a record whose body is what directory ingest would make of it."""
    from rag.ingest.parse import humanize, parse_file_text

    pages = DATASETS / "handbook_18f" / "pages"
    records = []
    for file in sorted(pages.rglob("*.md")):
        parsed = parse_file_text(file.read_text(encoding="utf-8-sig"), file.suffix, humanize(file.stem))
        records.append({"_id": file.relative_to(pages).as_posix(), "title": parsed.title, "text": parsed.body})
    return records


def source_records(source: str) -> list[dict]:
    if source == "scifact":
        return [{"_id": r["_id"], "title": r.get("title"), "text": r["text"]} for r in read_jsonl(DATASETS / "scifact" / "corpus.jsonl")]
    if source == "hotpotqa":
        return [{"_id": r["_id"], "title": r.get("title"), "text": r["text"]} for r in read_jsonl(DATASETS / "hotpotqa_dev500" / "corpus.jsonl")]
    if source == "handbook":
        return handbook_records()
    raise ValueError(source)


def open_service(home: Path, writer: bool = True, keyword_engine: str | None = None, building: bool = False):
    """The fixture's service; a writer fills a keyword engine's index from the chunks on opening.
    `building`: publishes skip the extractive answer's sentence vectors (a model is named, never
    called): no search reads them, and at 100,000 chunks they would be most of the build."""
    from rag.service import KnowledgeService
    from rag.settings import Settings

    settings = Settings(home=home, embed_cache=EMBED_CACHE, **({"llm_model": "openai/unused"} if building else {}))
    if keyword_engine:
        settings = settings.model_copy(
            update={"retrieve": settings.retrieve.model_copy(update={"keyword_engine": keyword_engine})}
        )
    return KnowledgeService(settings, writer=writer)


def chunk_count(home: Path) -> int:
    with sqlite3.connect(home / "rag.db") as conn:
        return int(conn.execute("SELECT count(*) FROM chunks").fetchone()[0])


def _chunks_per_record(home: Path, provider: str) -> dict[str, int]:
    """record id -> chunks, for the records one provider ingested (source_id ends with ':' + id)."""
    with sqlite3.connect(home / "rag.db") as conn:
        rows = conn.execute(
            "SELECT n.source_id, count(c.id) FROM nodes n JOIN chunks c ON c.node_id = n.id "
            "WHERE n.source_id LIKE ? GROUP BY n.source_id",
            (provider + ":%",),
        ).fetchall()
    return {sid.split(":", 3)[3]: n for sid, n in rows}


def _providers(home: Path) -> set[str]:
    """Providers that already ingested into this home: their batch is complete (see build_100k)."""
    if not (home / "rag.db").exists():
        return set()
    with sqlite3.connect(home / "rag.db") as conn:
        rows = conn.execute("SELECT DISTINCT substr(source_id, 1, instr(source_id, ':') - 1) FROM nodes "
                            "WHERE source_id IS NOT NULL").fetchall()
    return {r[0] for r in rows}


def _progress(label: str):
    last = [0.0]

    def report(stage: str, done: int, total: int) -> None:
        now = time.perf_counter()
        if done == total or now - last[0] > 15:
            last[0] = now
            print(f"  {label} {stage}: {done}/{total}", flush=True)

    return report


def _ingest(svc, principal, provider: str, records: list[dict]) -> None:
    started = time.perf_counter()
    report = svc.ingest_records(principal, records, KB, provider=provider, progress=_progress(provider))
    print(f"  {provider}: {report.summary()} in {time.perf_counter() - started:.0f}s", flush=True)


def _meta_path(home: Path) -> Path:
    return home / "fixture.json"


def load_meta(home: Path) -> dict | None:
    path = _meta_path(home)
    return json.loads(path.read_text()) if path.exists() else None


def build_100k(rebuild: bool = False, target: int = TARGET_CHUNKS) -> Path:
    """The cached 100k home; built (or finished, if an earlier build was interrupted) when needed."""
    home = BENCH_CACHE / "home100k"
    meta = load_meta(home)
    if meta and not rebuild and meta.get("target") == target:
        return home
    if rebuild and home.exists():
        shutil.rmtree(home)
    from rag.service import Principal

    # A batch's documents are committed before it publishes, and opening the service finishes an
    # interrupted publish, so a provider already present is a complete batch: a resumed build skips it.
    started = time.perf_counter()
    records = {s: source_records(s) for s in SOURCES}
    with open_service(home, building=True) as svc:
        principal = Principal.local_admin("default")
        done = _providers(home)
        for source in SOURCES:  # round 1: the originals (unique text; the model runs on what is not cached)
            if source not in done:
                _ingest(svc, principal, source, records[source])
        per_record = {s: _chunks_per_record(home, s) for s in SOURCES}
        unique = sum(sum(c.values()) for c in per_record.values())
        print(f"unique chunks: {unique}; cache hits/misses so far: {svc.embedder.hits}/{svc.embedder.misses}")
        round_no = 2
        while (count := chunk_count(home)) < target:
            for source in SOURCES:
                missing = target - count
                if missing <= 0:
                    break
                if f"{source}-r{round_no}" in done:
                    continue
                take, planned = [], 0  # only as many repeats as the target still needs
                for rec in records[source]:
                    take.append({**rec, "_id": f"{rec['_id']}~r{round_no}"})
                    planned += per_record[source].get(rec["_id"], 1)
                    if planned >= missing:
                        break
                _ingest(svc, principal, f"{source}-r{round_no}", take)
                count = chunk_count(home)
                print(f"  chunks now: {count}", flush=True)
            round_no += 1
        hits, misses = svc.embedder.hits, svc.embedder.misses
    seconds = time.perf_counter() - started
    meta = {
        "target": target, "chunks": chunk_count(home), "unique_chunks": unique, "rounds": round_no - 1,
        "build_seconds": round(seconds, 1), "cache_hits": hits, "cache_misses": misses,
        "built_at": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    _meta_path(home).write_text(json.dumps(meta, indent=2))
    print(json.dumps(meta, indent=2))
    return home


def build_scifact(rebuild: bool = False) -> Path:
    """The cached SciFact home: the corpus as records, nothing else."""
    home = BENCH_CACHE / "home_scifact"
    if load_meta(home) and not rebuild:
        return home
    if rebuild and home.exists():
        shutil.rmtree(home)
    from rag.service import Principal

    started = time.perf_counter()
    with open_service(home, building=True) as svc:
        _ingest(svc, Principal.local_admin("default"), "scifact", source_records("scifact"))
        hits, misses = svc.embedder.hits, svc.embedder.misses
    meta = {
        "chunks": chunk_count(home), "build_seconds": round(time.perf_counter() - started, 1),
        "cache_hits": hits, "cache_misses": misses, "built_at": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    _meta_path(home).write_text(json.dumps(meta, indent=2))
    print(json.dumps(meta, indent=2))
    return home


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scifact", action="store_true", help="build the SciFact-only fixture instead")
    parser.add_argument("--rebuild", action="store_true", help="delete the cached fixture and build it again")
    parser.add_argument("--target", type=int, default=TARGET_CHUNKS, help="chunks in the large fixture")
    args = parser.parse_args(argv)
    home = build_scifact(args.rebuild) if args.scifact else build_100k(args.rebuild, args.target)
    print(f"fixture: {home} ({chunk_count(home)} chunks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
