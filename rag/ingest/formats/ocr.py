"""OCR: a page's pixels in, its text out, through Debian's `tesseract` command (tesseract-ocr).

Used by the image formats (rag/ingest/formats/image.py) and by PDF pages with no text layer
(rag/ingest/formats/pdf.py). OCR is optional: where the command is not installed (or
`RAG_PARSING__OCR_COMMAND` is empty) those files are refused with `NOT_INSTALLED`, which says how
to add it (`scripts/install.sh --ocr`). The command, not pytesseract: one program and no Python
package, and this module bounds it itself.

Each page is one `tesseract stdin stdout tsv` run in a parse worker (rag/ingest/sandbox.py), fed an
8-bit grey PGM this module writes: tesseract (leptonica) never decodes the file's own bytes, Pillow
and PDFium do that in the worker, under its bounds. The child inherits the worker's address-space
limit (RLIMIT_AS), and gets its own:

- **one core** (`OMP_THREAD_LIMIT=1`): the pool runs as many workers as cores, one file each;
- **seconds a page** (`OcrLimits.page_seconds`, its CPU limit too) and **seconds a file**
  (`OcrLimits.seconds`, rendering included): killed past either, the file refused `(time: …)`;
- **its output**: at most `MAX_OUTPUT` bytes of TSV a page;
- **the worker's life**: PR_SET_PDEATHSIG kills it when the worker is killed (the pool's
  wall-clock bound), so no tesseract outlives the parse that started it.

A file's OCR has its own time (`seconds`), beside the worker's: the pool gives a file that may be
OCR'd (`may_read`) `timeout_seconds + seconds` of wall clock, since 180 s would hold only ~90
pages at the ~2 s of CPU a dense 300-dpi page takes here (NIST SP 800-63B pages 20-29: 1.97 s
each in tesseract, 0.14 s in the worker), while every other file keeps the shorter bound.

The TSV gives each word a confidence (0-100). A page whose mean word confidence is under
`LOW_CONFIDENCE` is named in a warning: measured on page 22 of NIST SP 800-63B, degraded, a mean
of 95 read 100% of the words right, 84.6 read 92%, 70.4 read 81%, 56 read 63%, 35 read 12%; under
70 a fifth of the words or more are wrong.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import resource
import selectors
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from rag.ingest.formats import UnreadableFile, too_complex
from rag.ingest.formats.markdown import escape_block

LOW_CONFIDENCE = 70  # mean word confidence (0-100) under which a page's text is reported as doubtful
MAX_OUTPUT = 4 << 20  # bytes of TSV from one page (a dense 300-dpi page writes ~60 kB)
OCR_PIXELS = 36_000_000  # a page is scaled down to this before OCR (Tabloid at 300 dpi; ~220 MB in tesseract)
DPI = 300  # what a PDF page is rendered at
OCR_SUFFIXES = frozenset({".pdf", ".png", ".jpg", ".jpeg", ".tif", ".tiff"})
NOT_INSTALLED = "OCR is not installed: install tesseract-ocr (scripts/install.sh --ocr)"
_LANGUAGES = re.compile(r"^[A-Za-z_]+(?:\+[A-Za-z_]+)*$")
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class OcrLimits:
    """OCR's settings and bounds (ParseSettings' `ocr_*` in rag/settings.py documents each)."""

    command: str = "tesseract"
    languages: str = "eng"
    max_pages: int = 300
    page_seconds: float = 60.0
    seconds: float = 600.0


_limits = OcrLimits()


def configure(limits: OcrLimits) -> None:
    """This process's OCR takes these (a parse worker, before each file: they come with the job)."""
    global _limits
    _limits = limits


def may_read(filename: str, limits: OcrLimits) -> bool:
    """Whether a file of this name may go through OCR (so its parse gets OCR's time too)."""
    return bool(limits.command) and PurePath(filename).suffix.lower() in OCR_SUFFIXES


def blank(image: Any) -> bool:
    """An image of one shade (a blank page): nothing to read, and nothing to warn about."""
    low, high = image.convert("L").getextrema()
    return high - low < 32


class OcrReader:
    """One file's OCR: its pages one by one under the file's bounds, with the pages read and the
    warnings about them. Raises UnreadableFile(NOT_INSTALLED) where OCR is not installed."""

    def __init__(self, limits: OcrLimits | None = None) -> None:
        self.limits = limits or _limits
        if not _LANGUAGES.match(self.limits.languages):
            raise UnreadableFile(f"OCR languages {self.limits.languages!r} are not tesseract language names")
        found = shutil.which(self.limits.command) if self.limits.command else None
        if found is None:
            raise UnreadableFile(NOT_INSTALLED)
        self.command = found
        self.deadline = time.monotonic() + self.limits.seconds
        self.pages: list[int] = []
        self.warnings: list[str] = []

    @staticmethod
    def available(limits: OcrLimits | None = None) -> bool:
        limits = limits or _limits
        return bool(limits.command) and shutil.which(limits.command) is not None

    def check_pages(self, count: int) -> None:
        """Refuse a file with more pages to read than the bound, before reading any."""
        if count > self.limits.max_pages:
            raise too_complex("pages", f"{count} pages to read by OCR, more than {self.limits.max_pages}")

    def read(self, image: Any, page: int, dpi: float | None = None) -> str:
        """The page's text as Markdown paragraphs ("" for none); `image` a PIL image, `dpi` its
        resolution where known (tesseract guesses it from the text otherwise)."""
        self.check_pages(len(self.pages) + 1)
        gray = image.convert("L")
        width, height = gray.size
        if width * height > OCR_PIXELS:  # more pixels than OCR gains from: scaled down, dpi with it
            factor = (OCR_PIXELS / (width * height)) ** 0.5
            gray = gray.resize((max(1, int(width * factor)), max(1, int(height * factor))))
            dpi = dpi * factor if dpi else None
            width, height = gray.size
        pgm = b"P5\n%d %d\n255\n" % (width, height) + gray.tobytes()
        argv = [self.command, "stdin", "stdout", "-l", self.limits.languages]
        if dpi and 70 <= dpi <= 2400:
            argv += ["--dpi", str(round(dpi))]
        tsv = self._run([*argv, "tsv"], pgm, page)
        self.pages.append(page)
        text, words, confidence = _from_tsv(tsv)
        if not words:
            self.warnings.append(f"page {page}: OCR found no text on it")
        elif confidence is not None and confidence < LOW_CONFIDENCE:
            self.warnings.append(
                f"page {page}: read by OCR with low confidence (mean word confidence {confidence:.0f} of 100, "
                f"under {LOW_CONFIDENCE}); its text may be wrong")
        return text

    def _run(self, argv: list[str], data: bytes, page: int) -> str:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise too_complex("time", f"more than {self.limits.seconds:g} s of OCR")
        seconds = min(self.limits.page_seconds, left)
        try:
            code, out, err = run_bounded(argv, data, seconds, MAX_OUTPUT)
        except TimeoutError:
            if seconds < self.limits.page_seconds:
                raise too_complex("time", f"more than {self.limits.seconds:g} s of OCR") from None
            raise too_complex("time", f"OCR of page {page} took more than {self.limits.page_seconds:g} s") from None
        except OverflowError:
            raise too_complex("output", f"OCR of page {page} wrote more than {MAX_OUTPUT >> 20} MB") from None
        if code == -signal.SIGXCPU:
            raise too_complex("time", f"OCR of page {page} took more than {self.limits.page_seconds:g} s of CPU")
        if code != 0:
            message = err.decode("utf-8", "replace")
            if "Failed loading language" in message or "Error opening data file" in message:
                raise UnreadableFile(f"OCR cannot read {self.limits.languages!r}: install its language data "
                                     f"(tesseract-ocr-{self.limits.languages.split('+')[0].lower()})")
            raise UnreadableFile(f"OCR failed on page {page} (tesseract ended with {code})")
        return out.decode("utf-8", "replace")


def _from_tsv(tsv: str) -> tuple[str, int, float | None]:
    """(the text as Markdown paragraphs, the words read, their mean confidence) from tesseract's
    TSV: level 5 rows are words, numbered by block, paragraph and line."""
    paragraphs: dict[tuple[str, str], dict[str, list[str]]] = {}
    confidences: list[float] = []
    for row in tsv.splitlines()[1:]:
        cells = row.split("\t")
        if len(cells) != 12 or cells[0] != "5" or not cells[11].strip():
            continue
        try:
            confidence = float(cells[10])
        except ValueError:
            continue
        if confidence >= 0:
            confidences.append(confidence)
        paragraphs.setdefault((cells[2], cells[3]), {}).setdefault(cells[4], []).append(cells[11].strip())
    blocks = ["\n".join(escape_block(" ".join(words)) for words in lines.values()) for lines in paragraphs.values()]
    mean = sum(confidences) / len(confidences) if confidences else None
    return "\n\n".join(blocks), sum(len(w) for lines in paragraphs.values() for w in lines.values()), mean


# ----- the child process -----

_libc: Any = None


def _child_setup(parent: int, cpu_seconds: int) -> None:
    """In the child, before exec: killed with its parent (the worker), its own CPU bound."""
    if _libc is not None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the worker went before the line above ran
        os._exit(1)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = cpu_seconds if hard == resource.RLIM_INFINITY else min(cpu_seconds, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def run_bounded(argv: list[str], data: bytes, seconds: float, max_output: int) -> tuple[int, bytes, bytes]:
    """Run `argv` with `data` on its stdin: (exit code, stdout, the first 4 kB of stderr). Killed and
    TimeoutError past `seconds`, killed and OverflowError past `max_output` bytes of stdout."""
    global _libc
    if _libc is None:
        with contextlib.suppress(OSError, AttributeError):  # not Linux: the timeout still ends it
            _libc = ctypes.CDLL(None, use_errno=True)
    parent = os.getpid()
    process = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, close_fds=True,
        env={**os.environ, "OMP_THREAD_LIMIT": "1"},
        preexec_fn=lambda: _child_setup(parent, int(seconds) + 1))  # a parse worker has no threads
    deadline = time.monotonic() + seconds
    try:
        out, err = _exchange(process, data, deadline, max_output)
        code = process.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        raise TimeoutError from None
    finally:
        if process.returncode is None:
            process.kill()
            process.wait()
        for stream in (process.stdin, process.stdout, process.stderr):
            with contextlib.suppress(OSError):
                stream.close()
    return code, out, err


def _exchange(process: subprocess.Popen, data: bytes, deadline: float, max_output: int) -> tuple[bytes, bytes]:
    """Write `data` to the process and read its stdout and stderr until both close, all at once
    (a pipe fills while the other side waits on another)."""
    out, err = bytearray(), bytearray()
    view, written = memoryview(data), 0
    with selectors.DefaultSelector() as selector:
        for stream, event in ((process.stdin, selectors.EVENT_WRITE), (process.stdout, selectors.EVENT_READ),
                              (process.stderr, selectors.EVENT_READ)):
            os.set_blocking(stream.fileno(), False)
            selector.register(stream, event)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            for key, _ in selector.select(left):
                stream = key.fileobj
                if stream is process.stdin:
                    try:
                        written += os.write(stream.fileno(), view[written:written + 65536])
                    except BrokenPipeError:  # it stopped reading (an error): its exit code says why
                        written = len(data)
                    if written >= len(data):
                        selector.unregister(stream)
                        stream.close()
                    continue
                chunk = os.read(stream.fileno(), 65536)
                if not chunk:
                    selector.unregister(stream)
                elif stream is process.stdout:
                    out += chunk
                    if len(out) > max_output:
                        raise OverflowError
                elif len(err) < 4096:
                    err += chunk
    return bytes(out), bytes(err[:4096])
