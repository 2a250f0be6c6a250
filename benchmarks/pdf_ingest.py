"""PDF ingest throughput: pages per second end to end, and the share of the time spent parsing
against embedding.

The PDFs of office_docs (`files/pdf/`, the two bad ones included: they are refused, and their
refusal is timed too) go through `KnowledgeService.ingest_directory` into a fresh temporary home
with a fresh, EMPTY embedding cache, so the model really runs; the model is loaded and warmed before
the clock starts. Parsing is every `parse_bytes` call of the ingest; embedding is every list the
publisher embeds (chunks, then the extractive answer's sentences: benchmarks/ingest_throughput.py's
PublishRecorder); the rest is reading, chunking and writing the store and the lanes. A second table
times the parser alone on each file (best of `--repeat`).

    python -m benchmarks.pdf_ingest
    python -m benchmarks.pdf_ingest --folder ../shared/datasets/office_docs/files/pdf --json out.json
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import write_json
from benchmarks.fixture100k import DATASETS
from benchmarks.ingest_throughput import WARMUP_TEXT, ParseTimer, PublishRecorder

DEFAULT_FOLDER = DATASETS / "office_docs" / "files" / "pdf"


def parse_only(folder: Path, repeat: int) -> list[dict[str, Any]]:
    from rag.ingest.formats import UnreadableFile
    from rag.ingest.read import parse_bytes

    rows = []
    for path in sorted(folder.glob("*.pdf")):
        data = path.read_bytes()
        best, pages, outcome = float("inf"), 0, "ok"
        for _ in range(repeat):
            started = time.perf_counter()
            try:
                pages = len(parse_bytes(data, path.name).pages)
            except UnreadableFile as exc:
                outcome = str(exc).split(";")[0]
            best = min(best, time.perf_counter() - started)
        rows.append({"file": path.name, "pages": pages, "parse_ms": round(best * 1000, 1),
                     "pages_per_s": round(pages / best, 1) if pages else None, "outcome": outcome})
    return rows


def run(folder: Path) -> dict[str, Any]:
    from rag.service import KnowledgeService, Principal
    from rag.settings import Settings

    tmp = Path(tempfile.mkdtemp(prefix="rag-pdf-bench-"))
    settings = Settings(home=tmp / "home", embed_cache=tmp / "embeddings.sqlite")  # fresh and empty
    result: dict[str, Any] = {"folder": str(folder), "loadavg_1m_before": round(os.getloadavg()[0], 2)}
    try:
        with KnowledgeService(settings) as svc:
            principal = Principal.local_admin("default")
            svc.index.open()
            svc.embedder.inner.embed([WARMUP_TEXT] * svc.embedder.inner.batch_size)  # the model, not the cache
            recorder = PublishRecorder(svc.publisher)
            with ParseTimer() as parsing:
                started = time.perf_counter()
                report = svc.ingest_directory(principal, folder, "bench")
                total = time.perf_counter() - started
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    embed = sum(recorder.embed_s.values())
    result.update({
        "files_ingested": len(report.added), "files_refused": len(report.failed), "pages": parsing.pages,
        "chunks": report.chunks, "seconds": round(total, 2), "parse_s": round(parsing.seconds, 2),
        "embed_s": round(embed, 2), "other_s": round(total - parsing.seconds - embed, 2),
        "pages_per_s": round(parsing.pages / total, 2),
        "parse_share": round(parsing.seconds / total, 3), "embed_share": round(embed / total, 3),
        "loadavg_1m_after": round(os.getloadavg()[0], 2),
    })
    return result


def print_tables(result: dict[str, Any], files: list[dict[str, Any]]) -> None:
    print(f"\nPDF ingest, end to end ({result['folder']}; load {result['loadavg_1m_before']} -> "
          f"{result['loadavg_1m_after']})\n")
    keys = ("files_ingested", "files_refused", "pages", "chunks", "seconds", "pages_per_s", "parse_s", "parse_share",
            "embed_s", "embed_share", "other_s")
    print("| " + " | ".join(keys) + " |")
    print("|" + " ---: |" * len(keys))
    print("| " + " | ".join(str(result[k]) for k in keys) + " |")
    print("\nParsing alone (best of the repeats)\n")
    print("| file | pages | parse ms | pages/s | outcome |\n| --- | ---: | ---: | ---: | --- |")
    for row in files:
        print(f"| {row['file']} | {row['pages']} | {row['parse_ms']} | {row['pages_per_s'] or '–'} | {row['outcome']} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folder", type=Path, default=DEFAULT_FOLDER, help="a folder of PDFs")
    parser.add_argument("--repeat", type=int, default=3, help="parse-only repeats per file")
    parser.add_argument("--json", help="write the result here ('-': standard output)")
    args = parser.parse_args()
    files = parse_only(args.folder, args.repeat)
    result = run(args.folder)
    print_tables(result, files)
    write_json({"ingest": result, "parse_only": files}, args.json)


if __name__ == "__main__":
    main()
