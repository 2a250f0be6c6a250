"""Chunk locators from a parsed document's layout (rag/ingest/layout.py): pages, slides, a sheet's
rows and OCR pages, as a version stores them and as its chunks name them."""

from __future__ import annotations

from rag.ingest.chunk import Chunker
from rag.ingest.layout import Layout, layout_json
from rag.ingest.parse import ParsedDocument
from rag.render import locator_line, sources_text


def body_of(parts: list[str]) -> tuple[str, list[tuple[int, int, int]]]:
    """A body of parts, one span each (numbered from 1)."""
    body, spans = "", []
    for n, part in enumerate(parts, 1):
        start = len(body)
        body += part + "\n\n"
        spans.append((start, len(body), n))
    return body, spans


def test_slides_get_their_number_and_no_chunk_crosses_one() -> None:
    body, spans = body_of([f"## Slide {n}\n\nPoint {n}: the quarterly plan covers hiring." for n in range(1, 4)])
    doc = ParsedDocument("Deck", body, pages=spans, unit="slide")
    stored = layout_json(doc)
    assert stored == {"unit": "slide", "spans": [list(s) for s in spans]}
    chunks = Chunker(chunk_size=400).chunk(body, stored)
    assert [c.locator for c in chunks] == [{"slide": 1}, {"slide": 2}, {"slide": 3}]
    assert all(c.page_start is None for c in chunks)  # a slide is not a page
    assert all(body[c.char_start:c.char_end] == c.text for c in chunks)


def test_a_sheet_chunk_names_its_sheet_and_the_rows_it_covers() -> None:
    records = [f"Region: R{row}; Revenue: {row * 10}" for row in range(2, 202)]
    body = "# Book\n\n## Sales\n\n"
    rows = []
    for row, record in zip(range(2, 202), records):
        rows.append((len(body), len(body) + len(record), row))
        body += record + "\n\n"
    spans = [(0, len(body), 1)]
    doc = ParsedDocument("Book", body, pages=spans, unit="sheet", names={1: "Sales"}, rows=rows)
    layout = Layout.load(layout_json(doc))
    chunks = Chunker(chunk_size=120).chunk(body, layout)
    assert len(chunks) > 3
    covered = []
    for chunk in chunks:
        assert chunk.locator["sheet"] == "Sales"
        inside = [r for s, e, r in rows if s < chunk.char_end and e > chunk.char_start]
        if "rows" not in chunk.locator:  # the headings above the first record
            assert not inside and "Region" not in chunk.text
            continue
        first, last = chunk.locator["rows"]
        assert (first, last) == (min(inside), max(inside))
        assert chunk.text.removeprefix("## Sales\n\n").startswith(f"Region: R{first};")  # whole records, none cut
        assert chunk.text.rstrip().endswith(f"Revenue: {last * 10}")
        covered.extend(range(first, last + 1))
    assert set(covered) == set(range(2, 202))
    assert chunks[-1].locator["rows"][1] == 201
    first, last = chunks[1].locator["rows"]
    assert first < last and locator_line(chunks[1].locator) == f"sheet: Sales, rows {first}-{last}\n"
    assert locator_line({"sheet": "Sales", "rows": [7, 7]}) == "sheet: Sales, row 7\n"


def test_pages_keep_their_stored_form_and_ocr_pages_are_marked() -> None:
    body, spans = body_of(["Text layer page.", "Scanned page read by OCR."])
    plain = ParsedDocument("Doc", body, pages=spans)
    assert layout_json(plain) == [list(s) for s in spans]  # what versions stored before layouts
    scanned = ParsedDocument("Doc", body, pages=spans, ocr=[2])
    chunks = Chunker(chunk_size=400).chunk(body, layout_json(scanned))
    assert [(c.page_start, c.locator) for c in chunks] == [(1, None), (2, {"ocr": True})]
    assert Chunker(chunk_size=400).chunk(body, [list(s) for s in spans])[1].locator is None


def test_the_sources_lines_name_slides_and_sheets() -> None:
    from rag.retrieve.types import Hit
    from rag.synthesize.types import Source

    def hit(locator):
        return Hit(1, 1.0, ["text"], "n", "kb", "kb:w:k:n", "Quarterly", None, 1, [], "x", 0, 1, locator=locator)

    deck = Source(1, [hit({"slide": 4}), hit({"slide": 2}), hit({"slide": 4})])
    book = Source(2, [hit({"sheet": "Sales", "rows": [2, 9]})])
    lines = sources_text([deck, book]).split("\n")
    assert lines[2] == "    slides: 4, 2" and lines[4] == "    sheet: Sales, rows 2-9"


def test_a_record_too_long_for_a_chunk_is_cut_and_the_rest_stay_whole() -> None:
    short = [f"Region: R{row}; Revenue: {row * 10}" for row in range(2, 12)]
    long = "Notes: " + " ".join(f"word{n} of the long note." for n in range(400))  # ~2,400 tokens
    records = short[:5] + [long] + short[5:]
    body, rows = "# Book\n\n## Sales\n\n", []
    for row, record in enumerate(records, 2):
        rows.append((len(body), len(body) + len(record), row))
        body += record + "\n\n"
    doc = ParsedDocument("Book", body, pages=[(0, len(body), 1)], unit="sheet", names={1: "Sales"}, rows=rows)
    chunker = Chunker(chunk_size=120, chunk_overlap=10)
    chunks = chunker.chunk(body, layout_json(doc))
    assert all(chunker.tokens(c.text) <= 120 for c in chunks)
    assert all(body[c.char_start:c.char_end] == c.text for c in chunks)
    cut = [c for c in chunks if "long note" in c.text]
    assert len(cut) > 10 and all(c.locator == {"sheet": "Sales", "rows": [7, 7]} for c in cut)
    whole = [c for c in chunks if "long note" not in c.text and "Region" in c.text]
    for chunk in whole:  # the short records around it stay whole
        first, last = chunk.locator["rows"]
        assert chunk.text.removeprefix("## Sales\n\n").startswith(f"Region: R{first if first < 7 else first - 1};")
