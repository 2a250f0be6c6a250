"""Images (PNG, JPEG, TIFF): the text OCR reads on them (rag/ingest/formats/ocr.py), page by page.

An image is a scanned page: its body is the file name as the title heading and then the text
tesseract reads, one page (a TIFF holds one page a frame), with `pages` spans and every page in
`ocr`. Pillow decodes it here, in the parse worker, and only the decoder its suffix names (a .png
that is a TIFF inside is refused, not decoded as one). Before a frame is decoded its size (from
its header) is checked against `MAX_PIXELS`: a small file that declares a huge image (a
decompression bomb) is refused unexpanded. An image in which OCR finds no text is refused: there
is nothing to search in it.
"""

from __future__ import annotations

import io

from PIL import Image, ImageOps, UnidentifiedImageError

from rag.ingest.formats import UnreadableFile, too_complex
from rag.ingest.formats.markdown import escape_text
from rag.ingest.formats.ocr import NOT_INSTALLED, OcrReader, blank
from rag.ingest.parse import ParsedDocument

MAX_PIXELS = 80_000_000  # one frame: A4 at 600 dpi is 35 million; 80 million grey is 80 MB, RGBA 320 MB


def _open(data: bytes, kind: str) -> Image.Image:
    try:
        return Image.open(io.BytesIO(data), formats=[kind])
    except Image.DecompressionBombError:  # Pillow's own bound (twice its MAX_IMAGE_PIXELS), past ours
        raise too_complex("pixels", f"an image of more than {MAX_PIXELS:,} pixels") from None
    except UnidentifiedImageError:
        raise UnreadableFile(f"not a {kind} image (its content does not match the file's extension)") from None
    except (OSError, ValueError, SyntaxError):
        raise UnreadableFile(f"a damaged {kind} image (its header cannot be read)") from None


def _frame(image: Image.Image, kind: str) -> Image.Image:
    """The current frame decoded, upright (a camera's EXIF orientation), after its size is checked."""
    width, height = image.size
    if width * height > MAX_PIXELS:
        raise too_complex("pixels", f"an image of {width} × {height} pixels, more than {MAX_PIXELS:,}")
    try:
        image.load()
        return ImageOps.exif_transpose(image) if kind == "JPEG" else image.copy()
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError):
        raise UnreadableFile(f"a damaged or truncated {kind} image") from None


def _dpi(image: Image.Image) -> float | None:
    dpi = image.info.get("dpi")
    try:
        return float(dpi[0]) if dpi else None
    except (TypeError, ValueError, IndexError):
        return None


def _parse(data: bytes, title: str, kind: str) -> ParsedDocument:
    image = _open(data, kind)
    if not OcrReader.available():
        raise UnreadableFile(f"an image, which only OCR reads; {NOT_INSTALLED}")
    reader = OcrReader()
    frames = getattr(image, "n_frames", 1) if kind == "TIFF" else 1
    reader.check_pages(frames)
    body = f"# {escape_text(title)}\n\n"
    spans: list[tuple[int, int, int]] = []
    found = False
    for index in range(frames):
        try:
            image.seek(index)
        except (EOFError, OSError, ValueError):
            raise UnreadableFile(f"a damaged TIFF image (page {index + 1} cannot be read)") from None
        frame = _frame(image, kind)
        start = 0 if index == 0 else len(body)
        if not blank(frame):
            text = reader.read(frame, index + 1, _dpi(frame))
            if text:
                body += text + "\n\n"
                found = True
        spans.append((start, len(body), index + 1))
    if not found:
        raise UnreadableFile("an image in which OCR found no text")
    body = body.rstrip("\n") + "\n"
    spans = [(min(s, len(body)), min(e, len(body)), n) for s, e, n in spans]
    spans[-1] = (spans[-1][0], len(body), spans[-1][2])
    return ParsedDocument(title=title, body=body, pages=spans, unit="page", ocr=reader.pages, warnings=reader.warnings)


def parse_png(data: bytes, fallback_title: str) -> ParsedDocument:
    return _parse(data, fallback_title, "PNG")


def parse_jpeg(data: bytes, fallback_title: str) -> ParsedDocument:
    return _parse(data, fallback_title, "JPEG")


def parse_tiff(data: bytes, fallback_title: str) -> ParsedDocument:
    return _parse(data, fallback_title, "TIFF")
