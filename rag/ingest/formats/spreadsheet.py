"""Spreadsheets (.xlsx, .csv, .tsv): each sheet a section, each row a record under its header row.

A table's row means little without its column names, and a chunk of a sheet is retrieved alone; so
each row becomes one paragraph that names its columns: "Region: West; Q3 revenue: 4.2M". The
header row is the sheet's first row with two or more values (the first non-empty row where none
has two); rows above it (a sheet's title, a note) are kept as plain paragraphs. Empty cells are
left out of a record, empty rows and columns with them; a column whose header cell is empty is
named by its letter (xlsx: "column D") or number (csv: "column 4"). A sheet with only its header
row keeps that row as a paragraph.

The body is Markdown: the workbook's title (its properties' title, else the file name) as the first
heading, then "## <sheet name>" and the sheet's records. `ParsedDocument.pages` holds one
(start, end, n) span per sheet (n its 1-based position among the workbook's sheets, `unit`
"sheet", `names` n -> the sheet's name), the first starting at 0; `ParsedDocument.rows` one
(start, end, row) span per record, row the number the spreadsheet application shows beside it
(a CSV file's record number, a blank line counted as an empty row).

xlsx: openpyxl (MIT) in read-only mode (rows streamed, never the whole sheet in memory) with
data_only, so a formula reads as the value the application that saved the file computed and stored
(a file written by a library that stores none reads as empty there). Dates, times, percentages and
numbers are written as their cell's format shows them, roughly: a date as 2025-10-17, a percentage
as 12.5%, a number with the decimals and thousands separators its format asks for. The package is a
zip, checked first like a Word document's (rag/ingest/formats/package.py): a decompression bomb,
too many parts, sheets, rows or cells refused before openpyxl opens it; rows and cells are counted
again as they are read (a file that names its XML namespace otherwise escapes the first count).
A password-protected workbook (an OLE container, not a zip) is refused as encrypted.

csv/tsv: comma-separated for .csv, tab-separated for .tsv (no guessing: a sniffer guesses wrong on
a one-column file or a text with commas), UTF-8 (a BOM allowed) else refused, one sheet named by the
file's title; rows, cells and a field's size bounded (MAX_FIELD_CHARS, through csv.field_size_limit,
restored after).
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
from typing import Any, Callable, Iterable, Iterator

import openpyxl
from openpyxl.utils import get_column_letter

from rag.ingest.formats import UnreadableFile, decode_text, too_complex
from rag.ingest.formats.markdown import escape_text
from rag.ingest.formats.package import Package, Tally, check_package
from rag.ingest.parse import ParsedDocument

MAX_EXPANDED = 200_000_000
MAX_MEMBERS = 10_000
MAX_SHEETS = 200
MAX_ROWS = 200_000  # records (non-empty rows) in all sheets together
# Cells read (empty ones inside a row included) in all sheets together: openpyxl reads ~20,000 a
# second on a loaded 2-core machine, so a million take ~50 s, within the parse worker's 120 s of CPU.
MAX_CELLS = 1_000_000
MAX_FIELD_CHARS = 1_000_000  # one CSV field
MAX_CHARS = 20_000_000  # the text written: a bound on what one file may put in the store

_MAIN = "xl/workbook.xml"
_SHEET = re.compile(r"xl/worksheets/sheet\d+\.xml")
_CELL_TAGS = (b"<c>", b"<c ")
_ROW_TAGS = (b"<row>", b"<row ")
_SHARED_STRING_TAGS = (b"<si>", b"<si ")
_NO_TITLE = {"", "sheet1", "workbook", "book1"}
_DECIMALS = re.compile(r"0\.(0+)")


# ----- records: one sheet's rows as paragraphs -----

class _Writer:
    """The body as it is written, with its sheet and row spans, within the bounds."""

    def __init__(self, title: str) -> None:
        self.parts: list[str] = [f"# {escape_text(title)}\n\n"]
        self.length = len(self.parts[0])
        self.pages: list[tuple[int, int, int]] = []
        self.names: dict[int, str] = {}
        self.rows: list[tuple[int, int, int]] = []
        self.cells = 0

    def _add(self, text: str) -> tuple[int, int]:
        start = self.length
        self.parts.append(text)
        self.length += len(text)
        if self.length > MAX_CHARS:
            raise too_complex("characters", f"more than {MAX_CHARS} of text")
        return start, self.length

    def count(self, cells: int) -> None:
        self.cells += cells
        if self.cells > MAX_CELLS:
            raise too_complex("cells", f"more than {MAX_CELLS}")

    def sheet(self, number: int, name: str, rows: Iterable[tuple[int, list[str]]],
              column: Callable[[int], str]) -> None:
        """One sheet's section from its rows, (row number, the cells' text), `column(i)` naming the
        i-th (0-based) column where the header row does not; a sheet with no values has none."""
        records: list[tuple[int, str]] = []
        header: list[str] | None = None
        header_row = 0
        above: list[tuple[int, list[str]]] = []  # non-empty rows before the header
        for row, values in rows:
            filled = sum(1 for v in values if v)
            if not filled:
                continue
            if header is None and filled < 2:
                above.append((row, values))
            elif header is None:
                header, header_row = [escape_text(v or column(i)) for i, v in enumerate(values)], row
                records += [(r, _joined(cells)) for r, cells in above]
                above = []
            else:
                width = len(header)
                records.append((row, "; ".join(f"{header[i] if i < width else escape_text(column(i))}: {escape_text(v)}"
                                               for i, v in enumerate(values) if v)))
            if len(self.rows) + len(records) > MAX_ROWS:
                raise too_complex("rows", f"more than {MAX_ROWS}")
        if header is None and above:  # no row of two values: the first names the one column
            (row, first), rest = above[0], above[1:]
            label = _joined(first)
            records = [(r, f"{label}: {_joined(cells)}") for r, cells in rest] or [(row, label)]
        elif header is not None and all(r < header_row for r, _ in records):  # a header and no row under it
            records.append((header_row, "; ".join(v for v in header if v)))
        if not records:
            return
        start = 0 if not self.pages else self.length
        self._add(f"## {escape_text(name)}\n\n")
        for row, text in records:
            begin, end = self._add("\\" + text if text.startswith("#") else text)
            self.rows.append((begin, end, row))
            self._add("\n\n")
        self.pages.append((start, self.length, number))
        self.names[number] = name

    def document(self, title: str) -> ParsedDocument:
        body = "".join(self.parts).rstrip("\n") + "\n"
        if self.pages:
            start, _, number = self.pages[-1]
            self.pages[-1] = (start, len(body), number)
        return ParsedDocument(title=title, body=body, pages=self.pages, unit="sheet", names=self.names,
                              rows=self.rows)


def _joined(values: list[str]) -> str:
    return "; ".join(escape_text(v) for v in values if v)


# ----- xlsx -----

def _number(value: float | int, number_format: str) -> str:
    """A number as its cell's format shows it, roughly (decimals, thousands, percent, currency)."""
    fmt = (number_format or "General").split(";")[0]
    plain = re.sub(r'"[^"]*"|\\.|\[[^\]]*\]', "", fmt)  # quoted text, escapes, [colour]/[$-locale]
    if fmt == "General" or not re.search(r"[0#?]", plain):
        if isinstance(value, float):
            return f"{value:.15g}" if not value.is_integer() or abs(value) >= 1e15 else str(int(value))
        return str(value)
    decimals = _DECIMALS.search(plain)
    places = len(decimals.group(1)) if decimals else 0
    if "%" in plain:
        return f"{value * 100:,.{places}f}%" if "," in plain else f"{value * 100:.{places}f}%"
    text = f"{value:,.{places}f}" if "," in plain else f"{value:.{places}f}"
    symbol = next((s for s in ("$", "€", "£", "¥") if s in fmt), "")
    if symbol:
        text = f"-{symbol}{text[1:]}" if text.startswith("-") else f"{symbol}{text}"
    return text


def _value(value: Any, number_format: str) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, dt.datetime):
        if value.time() == dt.time(0):
            return value.date().isoformat()
        return value.isoformat(sep=" ", timespec="minutes" if value.second == 0 else "seconds")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dt.time):
        return value.isoformat(timespec="minutes" if value.second == 0 else "seconds")
    if isinstance(value, dt.timedelta):
        return str(value)
    if isinstance(value, (int, float)):
        return _number(value, number_format)
    return " ".join(str(value).split())


def _letter(index: int) -> str:
    return f"column {get_column_letter(index + 1)}"


def _sheet_rows(sheet, writer: _Writer) -> Iterator[tuple[int, list[str]]]:
    """(row number, cells' text) of each row of a read-only sheet."""
    sheet.reset_dimensions()  # the size the file declares may be wrong: read the rows it holds
    number = 0
    for cells in sheet.iter_rows():
        number += 1
        writer.count(len(cells))
        values: list[str] = []
        for cell in cells:
            if getattr(cell, "row", None):
                number = cell.row
            values.append(_value(cell.value, getattr(cell, "number_format", "General")))
        while values and not values[-1]:
            values.pop()
        yield number, values


def _xlsx_check(data: bytes) -> None:
    """The package within its bounds (read at each call: a test may lower them)."""
    cells, rows = Tally(_CELL_TAGS, MAX_CELLS, "cells"), Tally(_ROW_TAGS, 1_048_576, "rows")
    strings = Tally(_SHARED_STRING_TAGS, MAX_CELLS, "cells")

    class _Sheet(Tally):
        def add(self, window: bytes) -> None:
            cells.add(window)
            rows.add(window)

    sheets = _Sheet(_CELL_TAGS + _ROW_TAGS, 0, "")
    names = check_package(
        data, Package("Excel workbook", ".xlsx", _MAIN, MAX_MEMBERS, MAX_EXPANDED),
        lambda name: sheets if _SHEET.fullmatch(name) else strings if name == "xl/sharedStrings.xml" else None)
    if sum(1 for name in names if _SHEET.fullmatch(name)) > MAX_SHEETS:
        raise too_complex("sheets", f"more than {MAX_SHEETS}")


def parse_xlsx(data: bytes, fallback_title: str) -> ParsedDocument:
    _xlsx_check(data)
    try:
        book = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except Exception:  # openpyxl raises a variety (KeyError, XML errors, ValueError) for a broken part
        raise UnreadableFile("a damaged Excel workbook that cannot be read") from None
    try:
        if len(book.sheetnames) > MAX_SHEETS:
            raise too_complex("sheets", f"more than {MAX_SHEETS}")
        core = " ".join((book.properties.title or "").split())
        title = core if core.lower() not in _NO_TITLE else fallback_title
        writer = _Writer(title)
        for number, name in enumerate(book.sheetnames, start=1):
            sheet = book[name]
            if not hasattr(sheet, "iter_rows"):  # a chart sheet: no cells
                continue
            writer.sheet(number, " ".join(name.split()), _sheet_rows(sheet, writer), _letter)
    except UnreadableFile:
        raise
    except Exception:
        raise UnreadableFile("a damaged Excel workbook that cannot be read") from None
    finally:
        book.close()
    if not writer.rows:
        raise UnreadableFile("an Excel workbook with no values")
    return writer.document(title)


# ----- csv, tsv -----

def _csv_rows(text: str, delimiter: str, writer: _Writer) -> Iterator[tuple[int, list[str]]]:
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=False)
    for number, cells in enumerate(reader, start=1):
        writer.count(max(len(cells), 1))
        values = [" ".join(c.split()) for c in cells]
        while values and not values[-1]:
            values.pop()
        yield number, values


def _parse_delimited(data: bytes, fallback_title: str, delimiter: str, kind: str) -> ParsedDocument:
    text = decode_text(data)
    writer = _Writer(fallback_title)
    previous = csv.field_size_limit(MAX_FIELD_CHARS)
    try:
        writer.sheet(1, fallback_title, _csv_rows(text, delimiter, writer), lambda i: f"column {i + 1}")
    except csv.Error as exc:
        if "field larger than field limit" in str(exc):
            raise too_complex("field size", f"a field of more than {MAX_FIELD_CHARS} characters") from None
        raise UnreadableFile(f"a damaged {kind} file ({exc})") from None
    finally:
        csv.field_size_limit(previous)
    if not writer.rows:
        raise UnreadableFile(f"a {kind} file with no values")
    return writer.document(fallback_title)


def parse_csv(data: bytes, fallback_title: str) -> ParsedDocument:
    return _parse_delimited(data, fallback_title, ",", "CSV")


def parse_tsv(data: bytes, fallback_title: str) -> ParsedDocument:
    return _parse_delimited(data, fallback_title, "\t", "TSV")
