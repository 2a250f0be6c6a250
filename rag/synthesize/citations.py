"""The citation contract: validate and renumber [n] citations, streamed or not, with one code path.

The model cites numbered excerpts. Accepted forms: ``[1]``, ``[1][2]``, ``[1, 2]``, ``[1-3]``.
Numbers that match no excerpt are dropped (with the space before a citation left empty). A source
is a document: excerpts of one document share one number, and documents are numbered in order of
first citation, so the first citation in the text is [1]. Adjacent citations are written as
``[1][2]``, each source once.

Streaming feeds text deltas in; the non-streamed answer is the same feeder given the whole text at
once. Only a tail that may still change (white space and an open or just-closed citation) is held
back, so both ways give the same text and the same sources.
"""

from __future__ import annotations

import re
from typing import Sequence

from rag.retrieve.types import Hit
from rag.synthesize.types import Source

_NUMBERS = r"\d+(?:\s*[-–,]\s*\d+)*"
_GROUP = rf"\[\s*{_NUMBERS}\s*\]"
# Leading white space, then one or more citation groups separated by white space only.
CLUSTER = re.compile(rf"(\s*)({_GROUP}(?:\s*{_GROUP})*)")
GROUP = re.compile(rf"\[\s*({_NUMBERS})\s*\]")
# A tail that later text could still turn into (part of) a citation cluster.
_HOLD = re.compile(r"(?:\s|\[[\d\s,\-–]*\]?)*\Z")
_HOLD_WINDOW = 256  # citations are short; never scan further back than this
MAX_RANGE = 50  # [1-100000] is not a citation anyone meant


def cited_numbers(group_body: str) -> list[int]:
    """The numbers of one group body (``1, 3-4``), in order, ranges expanded."""
    numbers: list[int] = []
    for part in re.split(r"\s*,\s*", group_body.strip()):
        bounds = re.split(r"\s*[-–]\s*", part)
        if len(bounds) == 1:
            numbers.append(int(bounds[0]))
        elif len(bounds) == 2:
            low, high = int(bounds[0]), int(bounds[1])
            if low <= high and high - low <= MAX_RANGE:
                numbers.extend(range(low, high + 1))
        # anything else (1-2-3) cites nothing
    return numbers


class CitationStream:
    """Feed text deltas; get back text with valid, renumbered citations, and the cited sources."""

    def __init__(self, excerpts: Sequence[Hit]) -> None:
        self.excerpts = list(excerpts)  # excerpt n is excerpts[n - 1]
        self._buffer = ""
        self._order: dict[str, Source] = {}  # node id -> source, in order of first citation
        self._cited: set[int] = set()
        self._started = False  # leading white space of the answer is dropped

    @property
    def sources(self) -> list[Source]:
        return list(self._order.values())

    def feed(self, delta: str) -> str:
        self._buffer += delta
        window_start = max(0, len(self._buffer) - _HOLD_WINDOW)
        hold = _HOLD.search(self._buffer, window_start)
        cut = hold.start() if hold else len(self._buffer)
        ready, self._buffer = self._buffer[:cut], self._buffer[cut:]
        return self._emit(self._rewrite(ready))

    def finish(self) -> str:
        """The held-back tail, trailing white space dropped."""
        ready, self._buffer = self._buffer, ""
        return self._emit(self._rewrite(ready)).rstrip()

    def _emit(self, text: str) -> str:
        if not self._started:
            text = text.lstrip()
            self._started = bool(text)
        return text

    def process(self, text: str) -> str:
        """The whole answer at once (the non-streamed path)."""
        return self.feed(text) + self.finish()

    def _rewrite(self, text: str) -> str:
        return CLUSTER.sub(self._cluster, text)

    def _cluster(self, match: re.Match[str]) -> str:
        numbers: list[int] = []
        for group in GROUP.finditer(match.group(2)):
            numbers.extend(cited_numbers(group.group(1)))
        kept: list[int] = []
        for n in numbers:
            if not 1 <= n <= len(self.excerpts):
                continue
            source = self._source_for(self.excerpts[n - 1])
            if source.number not in kept:
                kept.append(source.number)
        if not kept:
            return ""
        return match.group(1) + "".join(f"[{n}]" for n in kept)

    def _source_for(self, hit: Hit) -> Source:
        source = self._order.get(hit.node_id)
        if source is None:
            source = Source(number=len(self._order) + 1, hits=[])
            self._order[hit.node_id] = source
        if hit.chunk_id not in self._cited:
            self._cited.add(hit.chunk_id)
            source.hits.append(hit)
        return source


def apply_citations(text: str, excerpts: Sequence[Hit]) -> tuple[str, list[Source]]:
    stream = CitationStream(excerpts)
    return stream.process(text), stream.sources
