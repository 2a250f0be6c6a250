"""Every format ingestion reads: parse throughput per format (pages, slides, rows or characters per
second, parsing alone), OCR seconds per page, and the share of ingest time in parsing against
embedding.

The files: one folder per format under a temporary directory, made from real text and real files:
office_docs' PDFs, Word and HTML files (../shared/datasets/office_docs), the fixtures under tests/data
(a deck, a workbook, an EPUB, a notebook, a code repository), and, for the formats whose throughput
needs volume, files built here from the 18F handbook's pages (a CSV and a workbook of one record per
paragraph, a mail folder of one message per page) and a scanned page rendered from a PDF for OCR.

Parsing alone: each file through `parse_bytes` (the bounded worker a service uses), best of
`--repeat`. Ingest: each format's folder through `KnowledgeService.ingest_directory` into one fresh
home with an EMPTY embedding cache (the model really runs; it is loaded and warmed before the clock
starts), the parse and embed seconds recorded as benchmarks/pdf_ingest.py records them.

    python -m benchmarks.formats
    python -m benchmarks.formats --only csv,xlsx --repeat 5 --json out.json
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from benchmarks import write_json
from benchmarks.fixture100k import DATASETS
from benchmarks.ingest_throughput import WARMUP_TEXT, ParseTimer, PublishRecorder

ROOT = Path(__file__).resolve().parent.parent
OFFICE = DATASETS / "office_docs" / "files"
HANDBOOK = DATASETS / "handbook_18f" / "pages"
TEST_DATA = ROOT / "tests" / "data"


def handbook_paragraphs(limit: int) -> list[tuple[str, str]]:
    """(page stem, paragraph) of the handbook's pages, prose only, up to `limit`."""
    out = []
    for path in sorted(HANDBOOK.rglob("*.md")):
        for block in path.read_text(encoding="utf-8").split("\n\n"):
            text = " ".join(block.split())
            if len(text) > 80 and not text.startswith(("#", "---", "{%", "|", "-", "*", "<")):
                out.append((path.stem, text))
                if len(out) >= limit:
                    return out
    return out


def _csv(folder: Path, rows: int) -> None:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["Page", "Paragraph", "Words"])
    for stem, text in handbook_paragraphs(rows):
        writer.writerow([stem, text, len(text.split())])
    (folder / "handbook-paragraphs.csv").write_text(buffer.getvalue(), encoding="utf-8")


def _xlsx(folder: Path, rows: int) -> None:
    import openpyxl

    book = openpyxl.Workbook(write_only=True)
    records = handbook_paragraphs(rows)
    for name, part in (("First half", records[: len(records) // 2]), ("Second half", records[len(records) // 2:])):
        sheet = book.create_sheet(name)
        sheet.append(["Page", "Paragraph", "Words"])
        for stem, text in part:
            sheet.append([stem, text, len(text.split())])
    book.save(folder / "handbook-paragraphs.xlsx")


def _mail(folder: Path, count: int) -> None:
    from email.message import EmailMessage

    pages = sorted(HANDBOOK.rglob("*.md"))[:count]
    for n, path in enumerate(pages):
        message = EmailMessage()
        message["Subject"] = path.stem.replace("-", " ").capitalize()
        message["From"] = "handbook@example.org"
        message["To"] = "team@example.org"
        message["Date"] = f"Mon, 07 Sep 2026 10:{n % 60:02d}:00 +0000"
        message.set_content(path.read_text(encoding="utf-8"))
        (folder / f"{n:03d}-{path.stem}.eml").write_bytes(bytes(message))


def _scan(folder: Path) -> None:
    """Page 2 of NIST SP 800-63B rendered at 300 dpi, as a PNG (for OCR)."""
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(str(OFFICE / "pdf" / "nist-sp-800-63b.pdf"))
    try:
        for index in (1, 9):
            pdf[index].render(scale=300 / 72).to_pil().convert("L").save(folder / f"nist-page-{index + 1}.png")
    finally:
        pdf.close()


def _code(folder: Path) -> None:
    """The small repository under tests/data/code (a tarball), unpacked."""
    import tarfile

    with tarfile.open(TEST_DATA / "code" / "datasette-block-robots.tar.gz") as archive:
        archive.extractall(folder, filter="data")


def _copy(*sources: Path, suffixes: tuple[str, ...]) -> Callable[[Path], None]:
    def make(folder: Path) -> None:
        for source in sources:
            files = [source] if source.is_file() else sorted(p for p in source.rglob("*") if p.is_file())
            for path in files:
                if path.suffix.lower() in suffixes:
                    shutil.copy(path, folder / path.name)
    return make


def formats(rows: int) -> dict[str, Callable[[Path], None]]:
    """Format -> how its folder is made."""
    return {
        "pdf": _copy(OFFICE / "pdf", suffixes=(".pdf",)),
        "docx": _copy(OFFICE / "docx", suffixes=(".docx",)),
        "html": _copy(OFFICE / "html", suffixes=(".html",)),
        "pptx": _copy(TEST_DATA / "formats", suffixes=(".pptx",)),
        "xlsx": lambda folder: (_xlsx(folder, rows), _copy(TEST_DATA / "formats", suffixes=(".xlsx",))(folder)),
        "csv": lambda folder: _csv(folder, rows),
        "eml": lambda folder: _mail(folder, 60),
        "epub": _copy(TEST_DATA / "epub", suffixes=(".epub",)),
        "ipynb": _copy(TEST_DATA / "notebook", suffixes=(".ipynb",)),
        "code": _code,
        "ocr": _scan,
    }


def units(parsed: Any) -> tuple[int, str]:
    """What a parsed file counts in: a sheet's rows, slides, pages, else characters."""
    if parsed.unit == "sheet":
        return len(parsed.rows), "rows"
    if parsed.pages:
        return len(parsed.pages), f"{parsed.unit}s"
    return len(parsed.body), "chars"


def parse_only(name: str, folder: Path, repeat: int) -> dict[str, Any]:
    from rag.ingest.formats import UnreadableFile
    from rag.ingest.read import parse_bytes

    files, seconds, count, kind, refused, ocr_pages = 0, 0.0, 0, "", 0, 0
    from rag.ingest.formats import supported_suffixes

    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in supported_suffixes()):
        data = path.read_bytes()
        best, parsed = float("inf"), None
        for _ in range(repeat):
            started = time.perf_counter()
            try:
                parsed = parse_bytes(data, path.name)
            except UnreadableFile:
                parsed = None
            best = min(best, time.perf_counter() - started)
        files += 1
        if parsed is None:
            refused += 1
            continue
        n, kind = units(parsed)
        count += n
        seconds += best
        ocr_pages += len(parsed.ocr)
    row = {"format": name, "files": files, "refused": refused, "units": count, "unit": kind,
           "parse_s": round(seconds, 3), "per_s": (round(count / seconds) if kind == "chars" else round(count / seconds, 1))
           if seconds else None,
           "ocr_pages": ocr_pages}
    if ocr_pages:
        row["ocr_s_per_page"] = round(seconds / ocr_pages, 2)
    return row


def ingest(folders: dict[str, Path]) -> list[dict[str, Any]]:
    from rag.service import KnowledgeService, Principal
    from rag.settings import Settings

    tmp = Path(tempfile.mkdtemp(prefix="rag-formats-bench-"))
    settings = Settings(home=tmp / "home", embed_cache=tmp / "embeddings.sqlite")  # fresh and empty
    rows = []
    try:
        with KnowledgeService(settings) as svc:
            principal = Principal.local_admin("default")
            svc.index.open()
            svc.embedder.inner.embed([WARMUP_TEXT] * svc.embedder.inner.batch_size)  # the model, not the cache
            recorder = PublishRecorder(svc.publisher)
            for name, folder in folders.items():
                with ParseTimer() as parsing:
                    recorder.embed_s = {"chunks": 0.0, "sentences": 0.0}
                    started = time.perf_counter()
                    report = svc.ingest_directory(principal, folder, f"bench-{name}")
                    total = time.perf_counter() - started
                    embed = sum(recorder.embed_s.values())
                    rows.append({
                        "format": name, "files": len(report.added), "refused": len(report.failed),
                        "chunks": report.chunks, "seconds": round(total, 2), "parse_s": round(parsing.seconds, 2),
                        "embed_s": round(embed, 2), "parse_share": round(parsing.seconds / total, 3),
                        "embed_share": round(embed / total, 3),
                    })
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


def table(rows: list[dict[str, Any]], keys: tuple[str, ...]) -> None:
    print("| " + " | ".join(keys) + " |")
    print("| --- |" + " ---: |" * (len(keys) - 1))
    for row in rows:
        print("| " + " | ".join(str(row.get(k, "–")) for k in keys) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated formats (default: all)")
    parser.add_argument("--repeat", type=int, default=3, help="parse-only repeats per file")
    parser.add_argument("--rows", type=int, default=2000, help="records in the built CSV and workbook")
    parser.add_argument("--no-ingest", action="store_true", help="parsing alone")
    parser.add_argument("--json", help="write the result here ('-': standard output)")
    args = parser.parse_args()
    makers = formats(args.rows)
    chosen = args.only.split(",") if args.only else list(makers)
    unknown = set(chosen) - set(makers)
    if unknown:
        parser.error(f"no format named {', '.join(sorted(unknown))} (known: {', '.join(makers)})")
    load = round(os.getloadavg()[0], 2)
    with tempfile.TemporaryDirectory(prefix="rag-formats-") as tmp:
        folders = {}
        for name in chosen:
            folder = Path(tmp) / name
            folder.mkdir()
            makers[name](folder)
            if any(folder.iterdir()):
                folders[name] = folder
            else:
                print(f"(no {name} files: skipped)")
        parsed = [parse_only(name, folder, args.repeat) for name, folder in folders.items()]
        print(f"\nParsing alone, best of {args.repeat} (load {load} -> {round(os.getloadavg()[0], 2)})\n")
        table(parsed, ("format", "files", "refused", "units", "unit", "parse_s", "per_s", "ocr_pages", "ocr_s_per_page"))
        ingested = [] if args.no_ingest else ingest(folders)
        if ingested:
            print("\nIngest, end to end, empty embedding cache\n")
            table(ingested, ("format", "files", "refused", "chunks", "seconds", "parse_s", "parse_share", "embed_s",
                             "embed_share"))
    write_json({"parse_only": parsed, "ingest": ingested, "loadavg_1m_before": load}, args.json)


if __name__ == "__main__":
    main()
