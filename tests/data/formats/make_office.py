"""Write the deck, the workbook and the encrypted workbook in this folder from 18F handbook pages.

    python tests/data/formats/make_office.py      # from the repository root, ../shared/datasets beside it

Needs python-pptx and openpyxl (the project's own), LibreOffice (`soffice`: Debian's
libreoffice-calc and libreoffice-impress) and, for the encrypted copy, msoffcrypto-tool (MIT; `pip
install msoffcrypto-tool`). None of these is needed by the tests, which read the files written here.

The text comes from two pages of the 18F/TTS handbook (public domain in the US, CC0 1.0 elsewhere):
work-schedules.md becomes the deck, performance-management/dates.md the workbook. Each is first
written by python-pptx / openpyxl and then opened and saved again by LibreOffice (`soffice
--headless --convert-to`), so the committed files are what a presentation or spreadsheet application
writes: its own XML, its own parts, and the formulas' values computed and stored beside them
(openpyxl writes a formula without a value; LibreOffice calculates it on load and saves the result).
"""

from __future__ import annotations

import datetime as dt
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import openpyxl
import pptx
from pptx.util import Inches, Pt

HERE = Path(__file__).resolve().parent
PAGES = HERE.parents[2].parent / "shared" / "datasets" / "handbook_18f" / "pages"
SCHEDULES = PAGES / "general-information-and-resources" / "employee-resources-policies" / "work-schedules.md"
DATES = PAGES / "performance-management" / "dates.md"
PASSWORD = "handbook"
CYCLE_START = dt.date(2024, 10, 1)  # "October 1, 2024: FY25 performance cycle begins"


def plain(text: str) -> str:
    """A line of the page as plain text: links as their words, emphasis, code and template tags gone."""
    text = re.sub(r"\{%.*?%\}", "", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.replace("**", "").replace("`", "").replace("***", "")
    text = re.sub(r"(?<!\w)\*(\S[^*]*?)\*(?!\w)", r"\1", text)
    return " ".join(text.split())


def section(page: str, heading: str) -> list[str]:
    """The lines under a heading of the page, up to the next heading."""
    lines = page.splitlines()
    start = next(i for i, line in enumerate(lines) if re.fullmatch(r"#+\s+" + re.escape(heading) + r"\s*", line))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("#")), len(lines))
    return lines[start + 1:end]


def bullets(lines: list[str]) -> list[str]:
    return [plain(line[2:]) for line in lines if line.startswith("- ")]


def prose(lines: list[str]) -> list[str]:
    return [plain(line) for line in lines if line.strip() and not line.startswith(("- ", "|", "For example"))]


def table(lines: list[str]) -> list[list[str]]:
    rows = [[plain(c) for c in line.strip().strip("|").split("|")] for line in lines if line.startswith("|")]
    return [row for row in rows if not all(set(c) <= set("- ") for c in row)]


def drop(shape) -> None:
    element = shape._element
    element.getparent().remove(element)


def deck(path: Path) -> None:
    page = SCHEDULES.read_text(encoding="utf-8")
    prs = pptx.Presentation()
    prs.core_properties.title = "Work schedules"
    # One layout ("Title and Content") for every slide: LibreOffice writes a master per layout used.
    layout_content = prs.slide_layouts[1]

    first = prs.slides.add_slide(layout_content)
    first.shapes.title.text = "Work schedules"
    intro = plain(page.split("---", 2)[2].strip().splitlines()[0])
    first.placeholders[1].text = intro.split(". ")[0] + "."

    for heading in ("Standard schedule", "Compressed schedule", "Flexible schedule"):
        lines = section(page, heading)
        slide = prs.slides.add_slide(layout_content)
        slide.shapes.title.text = heading
        body = slide.placeholders[1].text_frame
        items = bullets(lines)
        body.text = items[0]
        for number, item in enumerate(items[1:], start=1):
            paragraph = body.add_paragraph()
            # The compressed schedule's two examples sit under their own line, one level down.
            paragraph.text, paragraph.level = item, int(heading == "Compressed schedule" and number >= 3)
        slide.notes_slide.notes_text_frame.text = " ".join(prose(lines))

    lines = section(page, "Variable Day")
    slide = prs.slides.add_slide(layout_content)
    slide.shapes.title.text = "Variable Day"
    drop(slide.placeholders[1])
    box = slide.shapes.add_textbox(Inches(0.5), Inches(1.6), Inches(9), Inches(1.5)).text_frame
    box.word_wrap = True
    box.text = " ".join(bullets(lines) + prose(lines))
    box.paragraphs[0].font.size = Pt(16)
    rows = table(lines)
    shape = slide.shapes.add_table(len(rows), 2, Inches(2.5), Inches(3.2), Inches(5), Inches(3))
    for r, row in enumerate(rows):
        for c, value in enumerate(row):
            shape.table.cell(r, c).text = value

    lines = section(page, "Holidays and flexible schedules")
    slide = prs.slides.add_slide(layout_content)  # no title: the parser calls it "Slide 6"
    drop(slide.shapes.title)
    drop(slide.placeholders[1])
    box = slide.shapes.add_textbox(Inches(0.5), Inches(0.5), Inches(9), Inches(3)).text_frame
    box.word_wrap = True
    paragraphs = prose(lines)
    box.text = paragraphs[1]
    for item in bullets(lines):
        box.add_paragraph().text = item
    slide.notes_slide.notes_text_frame.text = next(plain(line) for line in lines if line.startswith("For example: "))
    prs.save(path)


def workbook(path: Path) -> None:
    page = DATES.read_text(encoding="utf-8")
    book = openpyxl.Workbook()
    book.properties.title = "Performance management important dates"
    sheets = (("Mid year", "Mid year performance review important dates"),
              ("End of year", "End of year performance review important dates"))
    for index, (name, heading) in enumerate(sheets):
        sheet = book.active if index == 0 else book.create_sheet()
        sheet.title = name
        sheet.append(["Date", "Item", "Days into the FY25 cycle"])
        for date, item in table(section(page, heading))[1:]:
            try:
                value: object = dt.datetime.strptime(date, "%B %d, %Y")
            except ValueError:
                value = date  # a range ("April - May 2025") stays text
            sheet.append([value, item])
            row = sheet.max_row
            if isinstance(value, dt.datetime):
                sheet.cell(row, 1).number_format = "yyyy-mm-dd"
                sheet.cell(row, 3).value = f"=A{row}-DATE({CYCLE_START.year},{CYCLE_START.month},{CYCLE_START.day})"
        sheet.column_dimensions["A"].width = 20
        sheet.column_dimensions["B"].width = 90
    book.save(path)


def saved_by_libreoffice(source: Path, target: Path, work: Path) -> None:
    out = work / "out"
    out.mkdir(exist_ok=True)
    subprocess.run(["soffice", f"-env:UserInstallation=file://{work}/profile", "--headless",
                    "--convert-to", target.suffix[1:], "--outdir", str(out), str(source)],
                   check=True, capture_output=True, timeout=300)
    shutil.copy(out / source.name, target)


def encrypted(source: Path, target: Path) -> None:
    import msoffcrypto
    from msoffcrypto.format.ooxml import OOXMLFile

    with source.open("rb") as plain_file, target.open("wb") as out:
        OOXMLFile(plain_file).encrypt(PASSWORD, out)
    with target.open("rb") as check:
        assert msoffcrypto.OfficeFile(check).is_encrypted()


def main() -> int:
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        deck(work / "work-schedules.pptx")
        workbook(work / "performance-dates.xlsx")
        saved_by_libreoffice(work / "work-schedules.pptx", HERE / "work-schedules.pptx", work)
        saved_by_libreoffice(work / "performance-dates.xlsx", HERE / "performance-dates.xlsx", work)
    encrypted(HERE / "performance-dates.xlsx", HERE / "encrypted.xlsx")
    for name in ("work-schedules.pptx", "performance-dates.xlsx", "encrypted.xlsx"):
        print(f"{name}: {(HERE / name).stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
