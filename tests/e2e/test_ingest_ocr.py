"""Images and scanned PDFs through OCR (rag/ingest/formats/image.py, ocr.py, pdf.py): pages of a real
PDF (NIST SP 800-63B, office_docs) rendered to pixels and read back by tesseract, as PNG, JPEG,
TIFF and image-only PDF; the questions whose answers lie on those pages answered from the scan
with its page cited and marked OCR; a poorly read page reported; OCR absent, and each of its
bounds, refused with its reason; no tesseract outlives its parse."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import shutil
import struct
import time
import zlib
from pathlib import Path

import pypdfium2 as pdfium
import pytest
from PIL import Image, ImageFilter

from rag.ingest import sandbox
from rag.ingest.formats import FileTooComplex, UnreadableFile, parse_here
from rag.ingest.formats import ocr
from rag.ingest.read import parse_bytes
from rag.ingest.sandbox import Limits, ParsePool
from rag.service import KnowledgeService, Principal
from rag.settings import Settings

from ..support.paths import SHARED
from ..support.processes import processes

OFFICE = SHARED / "datasets" / "office_docs"
NIST = OFFICE / "files" / "pdf" / "nist-sp-800-63b.pdf"
QUESTIONS = {q["_id"]: q for q in map(json.loads, (OFFICE / "questions.jsonl").read_text().splitlines())}
LENGTH, ATTEMPTS = QUESTIONS["od001"], QUESTIONS["od002"]  # answered on pages 22 and 34
NOT_INSTALLED = "OCR is not installed: install tesseract-ocr (scripts/install.sh --ocr)"


def render(page: int, dpi: int = 300) -> Image.Image:
    """A page of the NIST PDF as a grey scan."""
    pdf = pdfium.PdfDocument(NIST)
    try:
        return pdf[page - 1].render(scale=dpi / 72, grayscale=True).to_pil().copy()
    finally:
        pdf.close()


def encoded(image: Image.Image, kind: str, dpi: int = 300, **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, kind, dpi=(dpi, dpi), **options)
    return buffer.getvalue()


def image_pdf(image: Image.Image, dpi: int = 300) -> bytes:
    """A one-page PDF holding only the image (no text layer), as a scanner writes one."""
    buffer = io.BytesIO()
    image.save(buffer, "PDF", resolution=dpi)
    return buffer.getvalue()


def words(text: str) -> str:
    return " ".join(text.split())


def tesseracts(parents: set[int]) -> set[int]:
    """The live tesseract processes whose parent is one of `parents` (a zombie is dead)."""
    return {p.pid for p in processes() if p.name == "tesseract" and p.state != "Z" and p.ppid in parents}


@pytest.fixture(scope="module")
def page22() -> Image.Image:
    return render(22)


@pytest.fixture
def ocr_limits():
    """Set this process's OCR bounds for a test (parse_here), the defaults again after it."""
    yield ocr.configure
    ocr.configure(ocr.OcrLimits())


def test_tesseract_is_installed() -> None:
    # scripts/install.sh --test installs it: the tests below must not pass by its absence.
    assert shutil.which("tesseract"), "tesseract-ocr is missing: bash scripts/install.sh --test (or --ocr)"


# ----- the parsers -----

def test_a_scanned_page_as_png_is_read_into_page_1_marked_ocr(page22) -> None:
    parsed = parse_bytes(encoded(page22, "PNG"), "scan-22.png")
    assert parsed.title == "Scan 22" and parsed.body.startswith("# Scan 22\n\n")
    assert (parsed.pages, parsed.unit, parsed.ocr) == ([(0, len(parsed.body), 1)], "page", [1])
    assert LENGTH["support"] in words(parsed.body)
    assert "### " not in parsed.body and "5.1.1.2 Memorized Secret Verifiers" in parsed.body
    assert parsed.warnings == []  # a clean 300-dpi page: every word read with confidence


def test_jpeg_and_each_frame_of_a_tiff_as_its_own_page(page22) -> None:
    page34 = render(34, dpi=200)
    jpeg = parse_bytes(encoded(page34, "JPEG", dpi=200, quality=85), "photo.jpg")
    assert jpeg.ocr == [1] and ATTEMPTS["support"] in words(jpeg.body)
    tiff = io.BytesIO()
    page22.save(tiff, "TIFF", save_all=True, append_images=[render(34)], compression="tiff_deflate", dpi=(300, 300))
    parsed = parse_bytes(tiff.getvalue(), "fax.tiff")
    assert [n for _, _, n in parsed.pages] == [1, 2] and parsed.ocr == [1, 2]
    assert all(a[1] == b[0] for a, b in zip(parsed.pages, parsed.pages[1:])) and parsed.pages[-1][1] == len(parsed.body)
    text = {n: words(parsed.body[s:e]) for s, e, n in parsed.pages}
    assert LENGTH["support"] in text[1] and ATTEMPTS["support"] in text[2]


def test_pdf_pages_without_a_text_layer_are_read_by_ocr_and_the_others_keep_their_text(page22) -> None:
    mixed = pdfium.PdfDocument(image_pdf(page22))
    source = pdfium.PdfDocument(NIST)
    mixed.import_pages(source, [20], index=0)  # page 21 of the original, with its text layer, first
    buffer = io.BytesIO()
    mixed.save(buffer)
    mixed.close()
    source.close()
    parsed = parse_bytes(buffer.getvalue(), "mixed.pdf")
    assert [n for _, _, n in parsed.pages] == [1, 2] and parsed.ocr == [2]
    text = {n: parsed.body[s:e] for s, e, n in parsed.pages}
    assert "This publication is available free of charge from: https://doi.org/10.6028/NIST.SP.800-63b" in text[1]
    assert "Reauthentication 30 days" in text[1].splitlines()  # the text layer's table row, not OCR's
    assert LENGTH["support"] in words(text[2]) and LENGTH["support"] not in words(text[1])


def test_the_image_only_pdf_of_office_docs_goes_through_ocr_which_finds_nothing() -> None:
    # Six pages of a 16 × 16-pixel picture each: rendered and read, and no text on them.
    data = (OFFICE / "files" / "pdf" / "bad-no-text-layer.pdf").read_bytes()
    with pytest.raises(UnreadableFile) as refused:
        parse_bytes(data, "bad-no-text-layer.pdf")
    assert str(refused.value) == "a PDF with no text: it has no text layer, and OCR found none on its 6 pages"


def test_a_page_read_with_low_confidence_is_reported_by_number(page22) -> None:
    blurred = page22.crop((0, 0, 2550, 1700)).filter(ImageFilter.GaussianBlur(5))  # ~ a third of words right
    parsed = parse_bytes(encoded(blurred, "PNG"), "blurred.png")
    assert parsed.ocr == [1] and len(parsed.warnings) == 1
    found = re.fullmatch(r"page 1: read by OCR with low confidence \(mean word confidence (\d+) of 100, under 70\); "
                         r"its text may be wrong", parsed.warnings[0])
    assert found and int(found.group(1)) < 70
    scanned = parse_bytes(image_pdf(page22.crop((0, 0, 2550, 1700))), "top-half.pdf")
    assert scanned.warnings == [] and scanned.ocr == [1]  # the same page sharp: nothing to report


def test_a_blank_or_noisy_image_is_refused_with_nothing_to_search() -> None:
    blank = Image.new("L", (1700, 2200), 255)
    noise = Image.effect_noise((1200, 800), 100)
    for name, image in (("blank.png", blank), ("noise.png", noise)):
        with pytest.raises(UnreadableFile) as refused:
            parse_bytes(encoded(image, "PNG"), name)
        assert str(refused.value) == "an image in which OCR found no text", name


def test_an_image_not_of_its_suffix_is_refused_undecoded(page22) -> None:
    png = encoded(page22.crop((0, 0, 800, 400)), "PNG")
    for data, name, message in (
            (png, "photo.jpg", "not a JPEG image (its content does not match the file's extension)"),
            (b"# notes\n", "scan.png", "not a PNG image (its content does not match the file's extension)"),
            (png[:200], "cut.png", "a damaged or truncated PNG image")):
        with pytest.raises(UnreadableFile) as refused:
            parse_bytes(data, name)
        assert str(refused.value) == message, name


# ----- OCR absent -----

def test_without_tesseract_images_and_scans_are_refused_saying_how_to_add_it(page22) -> None:
    mixed = pdfium.PdfDocument(image_pdf(page22.crop((0, 0, 2550, 800))))
    source = pdfium.PdfDocument(NIST)
    mixed.import_pages(source, [20], index=0)
    buffer = io.BytesIO()
    mixed.save(buffer)
    for absent in ("", "/nonexistent/tesseract"):
        with ParsePool(1, Limits(ocr=ocr.OcrLimits(command=absent))) as pool:
            with pytest.raises(UnreadableFile) as refused:
                pool.parse(encoded(page22, "PNG"), "scan.png")
            assert str(refused.value) == f"an image, which only OCR reads; {NOT_INSTALLED}"
            with pytest.raises(UnreadableFile) as refused:
                pool.parse((OFFICE / "files" / "pdf" / "bad-no-text-layer.pdf").read_bytes(), "scan.pdf")
            assert str(refused.value) == f"a PDF with no extractable text (scanned or image-only); {NOT_INSTALLED}"
            parsed = pool.parse(buffer.getvalue(), "mixed.pdf")  # its text is read, the scanned page named
            assert parsed.ocr == [] and parsed.warnings == [f"page 2 has no text layer and was not read: {NOT_INSTALLED}"]
            assert "Reauthentication 30 days" in parsed.body.splitlines()


def test_the_setting_hides_tesseract_from_the_parse_workers(monkeypatch, tmp_path, page22) -> None:
    monkeypatch.setenv("RAG_PARSING__OCR_COMMAND", "")
    settings = Settings(home=tmp_path / "home")
    assert settings.parsing.ocr_command == ""
    sandbox.configure_from(settings.parsing)  # as a service does with its settings
    try:
        with pytest.raises(UnreadableFile) as refused:
            parse_bytes(encoded(page22.crop((0, 0, 800, 400)), "PNG"), "scan.png")
        assert NOT_INSTALLED in str(refused.value)
    finally:
        monkeypatch.delenv("RAG_PARSING__OCR_COMMAND")
        sandbox.configure_from(Settings(home=tmp_path / "home").parsing)


# ----- bounds -----

def png_header_only(width: int, height: int) -> bytes:
    """A PNG that declares width × height grey pixels and holds a few rows: a decompression bomb's header."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    rows = zlib.compress(b"\0" * (width + 1) * 4)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", rows) + chunk(b"IEND", b""))


def test_an_image_declaring_too_many_pixels_is_refused_before_it_is_decoded() -> None:
    with ParsePool(1, Limits(memory_mib=512)) as pool:  # decoding either would pass it: `memory`
        for (width, height), words in (((9500, 9000), "an image of 9500 × 9000 pixels, more than 80,000,000"),
                                       ((30_000, 30_000), "an image of more than 80,000,000 pixels")):  # Pillow's
            with pytest.raises(FileTooComplex) as refused:
                pool.parse(png_header_only(width, height), "poster.png")
            assert refused.value.bound == "pixels" and str(refused.value) == (
                f"the file is too complex to read within this service's limits (pixels: {words})")


def test_ocr_pages_and_seconds_are_bounded_and_tesseract_is_killed(ocr_limits, page22) -> None:
    tiff = io.BytesIO()
    small = page22.crop((0, 0, 2550, 600))
    small.save(tiff, "TIFF", save_all=True, append_images=[small, small])
    ocr_limits(ocr.OcrLimits(max_pages=2))
    with pytest.raises(FileTooComplex) as refused:
        parse_here(tiff.getvalue(), "fax.tif")
    assert str(refused.value).endswith("(pages: 3 pages to read by OCR, more than 2)")

    png = encoded(page22, "PNG")
    for limits, message in ((ocr.OcrLimits(page_seconds=0.2), "(time: OCR of page 1 took more than 0.2 s)"),
                            (ocr.OcrLimits(seconds=0.2), "(time: more than 0.2 s of OCR)")):
        ocr_limits(limits)
        started = time.monotonic()
        with pytest.raises(FileTooComplex) as refused:
            parse_here(png, "scan.png")
        assert str(refused.value).endswith(message) and time.monotonic() - started < 5
        assert tesseracts({os.getpid()}) == set()  # killed and reaped, not left running


def test_a_worker_killed_mid_ocr_takes_its_tesseract_with_it(page22) -> None:
    poster = Image.new("L", (5100, 6600), 255)  # four pages: ~10 s of OCR, time to see it run
    for x, y in ((0, 0), (2550, 0), (0, 3300), (2550, 3300)):
        poster.paste(page22, (x, y))
    data = encoded(poster, "PNG")

    async def cancel_while_reading(pool: ParsePool) -> int:
        task = asyncio.create_task(pool.parse_async(data, "poster.png"))
        deadline = time.monotonic() + 60
        while not (running := tesseracts({s.process.pid for s in pool._slots if s.process})):
            assert time.monotonic() < deadline and not task.done(), "tesseract never started"
            await asyncio.sleep(0.02)
        task.cancel()  # the pool kills the worker (nobody waits for it any more)
        with pytest.raises(asyncio.CancelledError):
            await task
        return running.pop()

    with ParsePool(1) as pool:
        child = asyncio.run(cancel_while_reading(pool))
        deadline = time.monotonic() + 10
        while tesseracts({1, child} | {int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()}) & {child}:
            assert time.monotonic() < deadline, "tesseract outlived its worker"
            time.sleep(0.05)


# ----- through the service: the scan answers, its page cited and marked -----

@pytest.fixture(scope="module")
def scans(tmp_path_factory: pytest.TempPathFactory, page22):
    root = tmp_path_factory.mktemp("scans")
    files = root / "files"
    files.mkdir()
    (files / "scan-22.png").write_bytes(encoded(page22, "PNG"))
    (files / "scan-34.pdf").write_bytes(image_pdf(render(34)))
    (files / "blurred.png").write_bytes(encoded(page22.crop((0, 0, 2550, 1700)).filter(ImageFilter.GaussianBlur(5)),
                                                "PNG"))
    shutil.copy(OFFICE / "files" / "pdf" / "bad-no-text-layer.pdf", files / "no-text.pdf")
    with KnowledgeService(Settings(home=root / "home")) as svc:
        svc.ensure_workspace("default")
        admin = Principal.local_admin("default")
        report = svc.ingest_directory(admin, files)
        yield svc, admin, report


def test_ingest_reads_scans_and_reports_the_poor_page(scans) -> None:
    _, _, report = scans
    assert sorted(report.added) == ["blurred.png", "scan-22.png", "scan-34.pdf"]
    assert dict(report.failed) == {
        "no-text.pdf": "a PDF with no text: it has no text layer, and OCR found none on its 6 pages"}
    assert [(label, w.split(" (")[0]) for label, w in report.warnings] == [
        ("blurred.png", "page 1: read by OCR with low confidence")]


@pytest.mark.parametrize(("question", "source"), [(LENGTH, "fs:scan-22.png"), (ATTEMPTS, "fs:scan-34.pdf")],
                         ids=["png", "pdf"])
def test_ask_answers_from_the_scan_citing_page_1_read_by_ocr(scans, question, source) -> None:
    svc, admin, _ = scans
    answer = svc.ask(admin, question["question"])
    first = answer.sources[0]
    assert first.source == source
    assert (first.hits[0].page, first.hits[0].locator) == (1, {"ocr": True})
    assert any(key in answer.text for key in question["answer_keys"])
    documents = [d.payload() for d in svc.search_documents(admin, question["question"], 3)]
    assert (documents[0]["page"], documents[0]["ocr"]) == (1, True)
