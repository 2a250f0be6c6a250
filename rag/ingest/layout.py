"""Where a version's text lies in its original, and so what a chunk's citation names: a PDF's (or a
scan's) page, a deck's slide, a workbook's sheet and rows.

A parser fills ParsedDocument's `pages` spans, `unit`, `names`, `rows` and `ocr`
(rag/ingest/parse.py). The version keeps them as one JSON value (`document_versions.pages`): a list of
[start, end, page] spans, as the PDF versions stored before slides and sheets existed, or an object
``{"unit", "spans", "names", "rows", "ocr"}`` for anything else. The chunker cuts the body at the
spans' ends (rag/ingest/chunk.py), and each chunk's `locator` is what its excerpt adds to the
outputs (rag/render.py):

- page: nothing beyond the chunk's `page_start` (the outputs' ``"page"``), or ``{"ocr": true}`` when
  that page was read by OCR;
- slide: ``{"slide": n}``;
- sheet: ``{"sheet": name, "rows": [first, last]}``, the sheet's own row numbers of the records the
  chunk's text covers.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from rag.ingest.parse import ParsedDocument

UNITS = ("page", "slide", "sheet")


@dataclass(frozen=True)
class Layout:
    spans: tuple[tuple[int, int, int], ...]
    unit: str = "page"
    names: dict[int, str] = field(default_factory=dict)
    rows: tuple[tuple[int, int, int], ...] = ()
    ocr: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ValueError(f"unknown layout unit {self.unit!r}")

    @classmethod
    def of(cls, parsed: ParsedDocument) -> "Layout | None":
        """A parsed document's layout, None when it has no spans."""
        if not parsed.pages:
            return None
        return cls(tuple(_spans(parsed.pages)), parsed.unit, dict(parsed.names), tuple(_spans(parsed.rows)),
                   frozenset(parsed.ocr))

    @classmethod
    def load(cls, value: Any) -> "Layout | None":
        """The layout a version stored (`to_json`), None for none."""
        if not value:
            return None
        if isinstance(value, list):  # page spans, as versions stored them first
            return cls(tuple(_spans(value)))
        return cls(tuple(_spans(value.get("spans") or [])), value.get("unit", "page"),
                   {int(k): str(v) for k, v in (value.get("names") or {}).items()},
                   tuple(_spans(value.get("rows") or [])), frozenset(int(n) for n in value.get("ocr") or []))

    def to_json(self) -> list[list[int]] | dict[str, Any]:
        spans = [list(s) for s in self.spans]
        if self.unit == "page" and not self.ocr:
            return spans  # the form every version with pages has had
        value: dict[str, Any] = {"unit": self.unit, "spans": spans}
        if self.names:
            value["names"] = {str(k): v for k, v in self.names.items()}
        if self.rows:
            value["rows"] = [list(r) for r in self.rows]
        if self.ocr:
            value["ocr"] = sorted(self.ocr)
        return value

    @property
    def paged(self) -> bool:
        """Whether the span numbers are pages (a chunk's `page_start`)."""
        return self.unit == "page"

    def locator(self, start: int, end: int, n: int | None) -> dict[str, Any] | None:
        """What a chunk of body[start:end] on span `n` adds to its excerpt beyond its page."""
        if n is None:
            return None
        if self.unit == "slide":
            return {"slide": n}
        if self.unit == "sheet":
            locator: dict[str, Any] = {"sheet": self.names.get(n, f"Sheet {n}")}
            rows = self._rows_within(start, end)
            if rows:
                locator["rows"] = [min(rows), max(rows)]
            return locator
        return {"ocr": True} if n in self.ocr else None

    def rows_within(self, start: int, end: int) -> list[tuple[int, int, int]]:
        """The (start, end, row) spans of the records that overlap body[start:end], in order."""
        first = max(0, bisect_right(self._starts, start) - 1)
        last = bisect_left(self._starts, end)
        return [(s, e, row) for s, e, row in self.rows[first:last] if s < end and e > start]

    def _rows_within(self, start: int, end: int) -> list[int]:
        return [row for _, _, row in self.rows_within(start, end)]

    @cached_property
    def _starts(self) -> list[int]:
        return [s for s, _, _ in self.rows]


def _spans(values: Any) -> list[tuple[int, int, int]]:
    return sorted((int(s), int(e), int(n)) for s, e, n in values)


def layout_json(parsed: ParsedDocument) -> list[list[int]] | dict[str, Any] | None:
    """What a version stores for `parsed`'s layout (None: no spans)."""
    layout = Layout.of(parsed)
    return layout.to_json() if layout else None
