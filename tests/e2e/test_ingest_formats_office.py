"""PowerPoint decks, Excel workbooks and CSV/TSV files: what each parser reads out of files an office
application saved (tests/data/formats, made by LibreOffice from 18F handbook pages), every kind of
bad file refused with its reason and nothing half-written, and the slide, or the sheet and rows,
carried to the citations of search and ask."""

from __future__ import annotations

import csv
import io
import shutil
import time
import zipfile
from pathlib import Path

import openpyxl
import pytest
from sqlalchemy import select

from rag.ingest.formats import UnreadableFile, parse_here
from rag.ingest.formats import pptx as pptx_format
from rag.ingest.formats import spreadsheet as sheet_format
from rag.ingest.read import parse_bytes
from rag.render import hit_payload, hit_text, source_payload
from rag.store.models import Chunk, Node

from ..support.ingested import ingested_folder

DATA = Path(__file__).resolve().parents[1] / "data" / "formats"
DECK = DATA / "work-schedules.pptx"
BOOK = DATA / "performance-dates.xlsx"
MAX_HOURS = "What is the maximum number of hours you can work in a single day on a variable day schedule?"
SELF_ASSESSMENT = "When is the self-assessment submittal due date?"
SELF_ASSESSMENT_RECORD = "Date: 2025-10-17; Item: Self-assessment submittal due date; Days into the FY25 cycle: 381"


def refusal(data: bytes, name: str, parse=parse_bytes) -> str:
    with pytest.raises(UnreadableFile) as caught:
        parse(data, name)
    return str(caught.value)


def spans_tile(parsed) -> bool:
    starts = [s for s, _, _ in parsed.pages]
    ends = [e for _, e, _ in parsed.pages]
    return starts[0] == 0 and ends[-1] == len(parsed.body) and starts[1:] == ends[:-1]


def sections(parsed) -> dict[int, str]:
    return {n: parsed.body[s:e] for s, e, n in parsed.pages}


def records(parsed) -> dict[tuple[int, int], str]:
    """(sheet, row) -> the record's text."""
    found = {}
    for s, e, row in parsed.rows:
        sheet = next(n for a, b, n in parsed.pages if a <= s < b)
        found[(sheet, row)] = parsed.body[s:e]
    return found


def workbook(build) -> bytes:
    book = openpyxl.Workbook()
    build(book)
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()


def rewritten(package: bytes, name: str, change) -> bytes:
    """The package with its member `name` changed by `change(bytes) -> bytes`."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(package)) as source, zipfile.ZipFile(buffer, "w") as target:
        for member in source.infolist():
            data = source.read(member)
            target.writestr(member, change(data) if member.filename == name else data)
    return buffer.getvalue()


def bomb(main: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as package:
        package.writestr("[Content_Types].xml", "<Types/>")
        package.writestr(main, "<x/>")
        package.writestr("docProps/padding.bin", b"\0" * 20_000_000)  # 20 MB that packs into ~20 kB
    return buffer.getvalue()


# ----- PowerPoint -----

def test_pptx_slides_titles_lists_tables_and_notes() -> None:
    parsed = parse_bytes(DECK.read_bytes(), DECK.name)  # through a parse worker, as ingest reads it
    assert parsed.title == "Work schedules" and parsed.unit == "slide"
    assert [n for _, _, n in parsed.pages] == [1, 2, 3, 4, 5, 6] and spans_tile(parsed)
    slide = sections(parsed)
    assert slide[1].startswith("# Work schedules\n\n- Each of us has a work schedule")  # the deck's title: slide 1's
    assert slide[2].startswith("## Standard schedule\n\n- Overtime and comp time: Yes")
    # Speaker notes close their slide, marked as such.
    assert slide[2].rstrip().endswith("By default, new TTS employees are on a standard schedule.")
    assert "\n\nNotes: You are scheduled to arrive and depart at the same time" in slide[2]
    assert ("  - Example 1: You work four, 10 hour days each week. You have one specific day off each week."
            in slide[3].splitlines())  # a level-1 bullet
    table = [line for line in slide[5].splitlines() if line.startswith("|")]
    assert table[:3] == ["| Day | Hours |", "| --- | --- |", "| Monday | 10 |"] and table[-1] == "| Total | 40 |"
    assert slide[5].index("The maximum number of hours you can work in a single day is 12") < slide[5].index("| Day")
    assert slide[6].startswith("## Slide 6\n\nIf you are on a flexible schedule")  # an untitled slide
    assert "Notes: For example: you typically work 10 hours on Thursdays." in slide[6]
    assert "PowerPoint Presentation" not in parsed.body  # python-pptx's stand-in title is no title


def test_pptx_title_from_properties_and_markup_kept_as_text() -> None:
    import pptx

    deck = pptx.Presentation()
    deck.core_properties.title = "Quarterly review"
    blank = deck.slides.add_slide(deck.slide_layouts[6])
    box = blank.shapes.add_textbox(0, 0, 100, 100).text_frame
    box.text = "# not a heading <img src=x onerror=alert(1)> [x](javascript:alert(1))"
    bare = blank.shapes.add_textbox(0, 200, 100, 100)  # below the first
    bare.text_frame.text = "A shape with no geometry"
    sp_pr = bare._element.spPr  # neither preset nor custom geometry, and no text box: python-pptx
    sp_pr.remove(sp_pr.prstGeom)  # knows no type for it, but its text is read
    del bare._element.nvSpPr.cNvSpPr.attrib["txBox"]
    buffer = io.BytesIO()
    deck.save(buffer)
    parsed = parse_here(buffer.getvalue(), "review.pptx")
    assert parsed.title == "Quarterly review"
    assert parsed.body == ("# Quarterly review\n\n## Slide 1\n\n"
                           "\\# not a heading &lt;img src=x onerror=alert(1)> &#91;x](javascript:alert(1))\n\n"
                           "A shape with no geometry\n")


# ----- Excel -----

def test_xlsx_sheets_records_and_a_formulas_cached_value() -> None:
    data = BOOK.read_bytes()
    parsed = parse_bytes(data, BOOK.name)
    assert parsed.title == "Performance management important dates"
    assert (parsed.unit, parsed.names) == ("sheet", {1: "Mid year", 2: "End of year"})
    assert [n for _, _, n in parsed.pages] == [1, 2] and spans_tile(parsed)
    sheet = sections(parsed)
    assert sheet[1].startswith("# Performance management important dates\n\n## Mid year\n\n")
    assert sheet[2].startswith("## End of year\n\nDate: 2025-09-30; Item: End of FY25 performance cycle")
    found = records(parsed)
    # Column C holds a formula: the value LibreOffice computed and saved is what is read.
    formula = openpyxl.load_workbook(io.BytesIO(data))["End of year"]["C4"].value
    assert formula == "=A4-DATE(2024,10,1)"
    assert found[(2, 4)] == SELF_ASSESSMENT_RECORD  # the sheet's own row 4 (row 1 is the header)
    assert found[(1, 2)] == "Date: 2024-10-01; Item: FY25 performance cycle begins; Days into the FY25 cycle: 0"
    assert found[(2, 6)] == ("Date: Oct 23 - Nov 7, 2025; Item: Supervisors hold 1:1 performance review "
                             "meetings with their direct reports")  # a text date and no formula: no third field
    assert sorted(found) == [(1, r) for r in range(2, 10)] + [(2, r) for r in range(2, 11)]


def test_xlsx_header_empty_rows_and_columns_and_formats() -> None:
    import datetime as dt

    def build(book) -> None:
        sheet = book.active
        sheet.title = "Revenue"
        sheet["A1"] = "Quarterly revenue by region"  # a title above the table
        sheet["A3"], sheet["C3"], sheet["D3"] = "Region", "Q3 revenue", "Share"  # column B is empty
        sheet["A5"], sheet["C5"], sheet["D5"] = "West", 4200000.5, 0.125
        sheet["C5"].number_format, sheet["D5"].number_format = '"$"#,##0.00', "0.0%"
        sheet["A6"], sheet["E6"], sheet["F6"] = "East", dt.datetime(2024, 3, 1, 14, 30), True  # no header there
        book.create_sheet("Blank")
        names = book.create_sheet("People")
        names["B2"], names["B3"], names["B4"] = "Name", "Ada", "Grace"  # one column

    parsed = parse_here(workbook(build), "revenue.xlsx")
    assert parsed.names == {1: "Revenue", 3: "People"}  # the empty sheet has no section; numbers are positions
    assert records(parsed) == {
        (1, 1): "Quarterly revenue by region",
        (1, 5): "Region: West; Q3 revenue: $4,200,000.50; Share: 12.5%",
        (1, 6): "Region: East; column E: 2024-03-01 14:30; column F: TRUE",
        (3, 3): "Name: Ada", (3, 4): "Name: Grace",
    }
    assert parsed.title == "Revenue"  # no title in its properties: the file's name


def test_csv_and_tsv_records_with_the_row_numbers_a_spreadsheet_shows() -> None:
    text = ('\ufeffRegion,Q3 revenue\r\nWest,4.2M\r\n\r\nEast,3.1M\r\n"North","line one\nline two"\r\n'
            'South,"2,0M <b>"\r\n')
    parsed = parse_bytes(text.encode(), "revenue.csv", "Revenue")
    assert (parsed.title, parsed.unit, parsed.names) == ("Revenue", "sheet", {1: "Revenue"})
    assert records(parsed) == {(1, 2): "Region: West; Q3 revenue: 4.2M", (1, 4): "Region: East; Q3 revenue: 3.1M",
                               (1, 5): "Region: North; Q3 revenue: line one line two",
                               (1, 6): "Region: South; Q3 revenue: 2,0M &lt;b>"}
    tsv = parse_bytes(b"Region\tQ3 revenue\tNote\nWest\t4.2M\t\n", "revenue.tsv", "Revenue")
    assert tsv.body == "# Revenue\n\n## Revenue\n\nRegion: West; Q3 revenue: 4.2M\n"
    assert refusal("Région,x\n".encode("latin-1"), "r.csv") == "not UTF-8 text (invalid byte at offset 1)"
    assert refusal(b"\n\n", "empty.csv") == "a CSV file with no values"


# ----- bad files: each refused with a reason a user understands -----

def test_bad_office_files_are_refused_with_their_reason() -> None:
    deck, book = DECK.read_bytes(), BOOK.read_bytes()
    assert refusal((DATA / "encrypted.xlsx").read_bytes(), "e.xlsx") == (
        "an encrypted (password-protected) Excel workbook; it cannot be read without its password")
    assert refusal(deck[: len(deck) // 2], "cut.pptx") == "a damaged or truncated PowerPoint presentation"
    assert refusal(book[: len(book) // 2], "cut.xlsx") == "a damaged or truncated Excel workbook"
    assert refusal(book, "book.pptx") == "not a PowerPoint presentation (a zip file without ppt/presentation.xml)"
    assert refusal(deck, "deck.xlsx") == "not an Excel workbook (a zip file without xl/workbook.xml)"
    assert refusal(b"%PDF-1.7\n", "deck.pptx") == (
        "not a PowerPoint presentation (its content does not match the .pptx extension)")
    broken = rewritten(book, "xl/workbook.xml", lambda xml: b"<not xml")
    assert refusal(broken, "broken.xlsx") == "a damaged Excel workbook that cannot be read"
    strict = rewritten(book, "xl/workbook.xml", lambda xml: xml.replace(
        b"http://schemas.openxmlformats.org/spreadsheetml/2006/main", b"http://purl.oclc.org/ooxml/spreadsheetml/main"))
    assert refusal(strict, "strict.xlsx") == ("an Excel workbook saved as Strict Open XML, which this service does not "
                                              "read; save it as an ordinary .xlsx file to ingest it")
    strict = rewritten(deck, "ppt/presentation.xml", lambda xml: xml.replace(
        b"http://schemas.openxmlformats.org/presentationml/2006/main", b"http://purl.oclc.org/ooxml/presentationml/main"))
    assert refusal(strict, "strict.pptx").startswith("a PowerPoint presentation saved as Strict Open XML")
    # Entities that would expand to 10^9 characters (billion laughs) in the shared strings: refused at once.
    entities = '<!ENTITY a "xxxxxxxxxx">' + "".join(
        f'<!ENTITY {chr(98 + i)} "{f"&{chr(97 + i)};" * 10}">' for i in range(8))
    laughs = rewritten(book, "xl/sharedStrings.xml", lambda xml: xml.replace(
        b"?>", f"?><!DOCTYPE sst [{entities}]>".encode(), 1).replace(b">Date<", b">&i;<", 1))
    began = time.perf_counter()
    assert refusal(laughs, "laughs.xlsx") == "a damaged Excel workbook that cannot be read"
    assert time.perf_counter() - began < 20


@pytest.mark.parametrize("module,name,main,kind", [
    (pptx_format, "bomb.pptx", "ppt/presentation.xml", "a PowerPoint presentation"),
    (sheet_format, "bomb.xlsx", "xl/workbook.xml", "an Excel workbook"),
])
def test_a_decompression_bomb_is_refused_before_it_is_expanded(monkeypatch, module, name, main, kind) -> None:
    monkeypatch.setattr(module, "MAX_EXPANDED", 5_000_000)
    data = bomb(main)
    assert len(data) < 100_000
    # In this process: the lowered cap is this process's (a parse worker has its own modules).
    assert refusal(data, name, parse_here) == (
        f"{kind} that expands to more than 5 MB (a decompression bomb?); refused")


def too_complex(bound: str) -> str:
    return f"the file is too complex to read within this service's limits ({bound})"


def test_each_bound_is_refused_by_name(monkeypatch) -> None:
    deck, book = DECK.read_bytes(), BOOK.read_bytes()
    for module, data, name, value, message in (
        (pptx_format, deck, "MAX_SLIDES", 5, "slides: more than 5"),
        (pptx_format, deck, "MAX_SHAPES", 10, "shapes: more than 10"),
        (pptx_format, deck, "MAX_TABLE_CELLS", 11, "table cells: more than 11"),
        (pptx_format, deck, "MAX_CHARS", 500, "characters: more than 500 of text"),
        (sheet_format, book, "MAX_ROWS", 10, "rows: more than 10"),
        (sheet_format, book, "MAX_CELLS", 40, "cells: more than 40"),
        (sheet_format, book, "MAX_SHEETS", 1, "sheets: more than 1"),
        (sheet_format, book, "MAX_CHARS", 500, "characters: more than 500 of text"),
    ):
        with monkeypatch.context() as patch:
            patch.setattr(module, name, value)
            suffix = ".pptx" if module is pptx_format else ".xlsx"
            assert refusal(data, f"file{suffix}", parse_here) == too_complex(message)
    limit = csv.field_size_limit()
    monkeypatch.setattr(sheet_format, "MAX_FIELD_CHARS", 100)
    assert refusal(b"a,b\n1," + b"x" * 101 + b"\n", "wide.csv", parse_here) == too_complex(
        "field size: a field of more than 100 characters")
    assert csv.field_size_limit() == limit  # the process's own limit is given back
    monkeypatch.setattr(sheet_format, "MAX_CELLS", 5)  # a CSV's cells are counted as they are read
    assert refusal(b"a,b\n1,2\n3,4\n", "cells.csv", parse_here) == too_complex("cells: more than 5")


def test_the_default_bounds_through_the_worker() -> None:
    rows = b"name,count\n" + b"x,1\n" * (sheet_format.MAX_ROWS + 1)
    assert refusal(rows, "long.csv") == too_complex(f"rows: more than {sheet_format.MAX_ROWS}")
    cells = b"".join([b'<worksheet><sheetData><row r="1">', b"<c><v>1</v></c>" * (sheet_format.MAX_CELLS + 1),
                      b"</row></sheetData></worksheet>"])
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as package:
        package.writestr("xl/workbook.xml", "<workbook/>")
        package.writestr("xl/worksheets/sheet1.xml", cells)
    began = time.perf_counter()
    # Counted as the package is inflated, before openpyxl reads a cell.
    assert refusal(buffer.getvalue(), "wide.xlsx") == too_complex(f"cells: more than {sheet_format.MAX_CELLS}")
    assert time.perf_counter() - began < 20


# ----- through the service: slides and sheets in citations -----

def _folder(root: Path) -> Path:
    files = root / "files"
    files.mkdir()
    shutil.copy(DECK, files / DECK.name)
    shutil.copy(BOOK, files / BOOK.name)
    shutil.copy(DATA / "encrypted.xlsx", files / "encrypted.xlsx")
    deck = DECK.read_bytes()
    (files / "cut.pptx").write_bytes(deck[: len(deck) // 2])
    (files / "latin1.csv").write_bytes("Région,x\n".encode("latin-1"))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as package:  # past the default 200 MB
        package.writestr("xl/workbook.xml", "<workbook/>")
        with package.open("xl/media/padding.bin", "w", force_zip64=True) as padding:
            for _ in range(205):
                padding.write(b"\0" * 1_000_000)
    (files / "bomb.xlsx").write_bytes(buffer.getvalue())
    (files / "regions.csv").write_text("Region,Q3 revenue\nWest,4.2M\nEast,3.1M\n")
    return files


@pytest.fixture(scope="module")
def office(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("office")
    files = _folder(root)
    with ingested_folder(root / "home", files) as (svc, admin, report):
        yield svc, admin, files, report


def test_ingest_reads_decks_and_sheets_and_refuses_bad_files_by_name(office) -> None:
    svc, admin, files, report = office
    assert sorted(report.added) == [BOOK.name, "regions.csv", DECK.name]
    failed = dict(report.failed)
    assert sorted(failed) == ["bomb.xlsx", "cut.pptx", "encrypted.xlsx", "latin1.csv"]
    assert failed["encrypted.xlsx"].endswith("an encrypted (password-protected) Excel workbook; "
                                             "it cannot be read without its password")
    assert "a decompression bomb?" in failed["bomb.xlsx"] and "truncated PowerPoint" in failed["cut.pptx"]
    assert "not UTF-8 text" in failed["latin1.csv"]
    with svc.db.session() as session:  # nothing half-written for a refused file
        names = set(session.scalars(select(Node.source_label).where(Node.kind == "document")))
        assert names == {f"fs:{rel}" for rel in report.added}
        locators = session.execute(select(Chunk.locator, Node.source_label).join(Node)).all()
    assert {loc["slide"] for loc, label in locators if label == f"fs:{DECK.name}"} == {1, 2, 3, 4, 5, 6}
    assert {loc["sheet"] for loc, label in locators if label == f"fs:{BOOK.name}"} == {"Mid year", "End of year"}
    assert {loc["sheet"] for loc, label in locators if label == "fs:regions.csv"} == {"Regions"}
    again = svc.ingest_directory(admin, files)
    assert sorted(again.unchanged) == sorted(report.added) and len(again.failed) == 4


def expected_rows(hit_text_: str) -> list[int]:
    """The rows of the End of year sheet whose records the excerpt holds, read from the parse."""
    parsed = parse_here(BOOK.read_bytes(), BOOK.name)
    rows = [row for (sheet, row), text in records(parsed).items() if sheet == 2 and text in hit_text_]
    return [min(rows), max(rows)]


def test_search_and_ask_cite_the_slide_and_the_sheets_rows(office) -> None:
    svc, admin, _, _ = office
    top = svc.search(admin, MAX_HOURS, 5).hits[0]
    assert top.source == f"fs:{DECK.name}" and top.locator == {"slide": 5} and top.page is None
    assert "The maximum number of hours you can work in a single day is 12" in top.text
    assert hit_text(hit_payload(top)).splitlines()[2] == "slide: 5"

    top = svc.search(admin, SELF_ASSESSMENT, 5).hits[0]
    assert top.source == f"fs:{BOOK.name}" and SELF_ASSESSMENT_RECORD in top.text
    assert top.locator == {"sheet": "End of year", "rows": expected_rows(top.text)}
    first, last = top.locator["rows"]
    assert first <= 4 <= last
    assert hit_text(hit_payload(top)).splitlines()[2] == f"sheet: End of year, rows {first}-{last}"

    answer = svc.ask(admin, SELF_ASSESSMENT)
    cited = source_payload(answer.sources[0])
    assert cited["source"] == f"fs:{BOOK.name}" and "2025-10-17" in answer.text
    held = [e for e in cited["excerpts"] if SELF_ASSESSMENT_RECORD in e["text"]]
    assert held and all(e["sheet"] == "End of year" and e["rows"] == expected_rows(e["text"]) for e in held)


def test_slides_and_sheets_are_stored_and_cited_on_both_deployments(svc, admin, tmp_path: Path) -> None:
    """SQLite and PostgreSQL (with the Chroma server) alike: the locators stored and read back."""
    folder = tmp_path / "office"
    folder.mkdir()
    shutil.copy(DECK, folder / DECK.name)
    shutil.copy(BOOK, folder / BOOK.name)
    report = svc.ingest_directory(admin, folder)
    assert sorted(report.added) == [BOOK.name, DECK.name] and not report.failed
    top = svc.search(admin, MAX_HOURS, 3).hits[0]
    assert (top.locator, top.title) == ({"slide": 5}, "Work schedules")
    top = svc.search(admin, SELF_ASSESSMENT, 3).hits[0]
    assert top.locator == {"sheet": "End of year", "rows": expected_rows(top.text)}
    doc = svc.get_document(admin, top.node_id)
    assert doc.content[top.char_start:top.char_end] == top.text
