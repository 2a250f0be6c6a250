"""A hostile Notion export (issue 49): folder names of blanks. The listing reads every member's
name in the serving process (rag/sources/notion.py `_named`, for the page ids and the folders
above); that read is one pass, so the listing's CPU time grows with the names' length, not its
square (at 6dc22a4 an expression took 2 s for one name of 16,000 spaces, each time it was read)."""

from __future__ import annotations

import random
import re
import time
import zipfile
from pathlib import Path

from rag.sources.base import FetchLimits, SyncContext
from rag.sources.exports import clean_title
from rag.sources.notion import NotionExport, _named

MEMBERS = 20
PAGE = "0123456789abcdef0123456789abcdef"


def blank_export(path: Path, blanks: int) -> Path:
    """A zip whose pages lie under a folder named "P", `blanks` spaces, "x" (no page id)."""
    folder = "P" + " " * blanks + "x"
    with zipfile.ZipFile(path, "w") as archive:
        for n in range(MEMBERS):
            archive.writestr(f"{folder}/Page {n} {PAGE[:-4]}{n:04d}.md", f"# Page {n}\n\nText.\n")
    return path


def listing_seconds(path: Path) -> float:
    """The CPU time of listing the export, the least of three runs."""
    times = []
    for _ in range(3):
        source = NotionExport(NotionExport.Config(path=str(path)), SyncContext("notes", "default", limits=FetchLimits()))
        with source:
            began = time.process_time()
            items = list(source.items())
            times.append(time.process_time() - began)
        assert len(items) == MEMBERS and all(item.path == () for item in items)  # no page above them
    return min(times)


def test_a_listing_of_blank_folder_names_grows_linearly(tmp_path: Path) -> None:
    small = listing_seconds(blank_export(tmp_path / "small.zip", 2_000))
    large = listing_seconds(blank_export(tmp_path / "large.zip", 8_000))
    # 4 times the names: linear ~4, quadratic ~16 (18x at 6dc22a4: 0.5 s and 9 s).
    assert large < 8 * max(small, 0.002), f"{small:.3f} s, then {large:.3f} s for names 4 times longer"


# The expression `_named` replaced: what it read a name as must not change.
_OLD_NAMED = re.compile(r"^(?P<title>.*?)\s*(?P<id>[0-9a-fA-F]{32})(?P<all>_all)?(?P<suffix>\.[A-Za-z0-9]{1,8})?$")


def test_names_read_as_the_old_expression_read_them() -> None:
    rng = random.Random(49)
    atoms = ["a", " ", "\n", "\t", "\u00a0", "0", "f", "F", "_", "_all", ".", "md", "csv", ".x9", "é", PAGE,
             PAGE[:31], "0123456789abcdef"]
    matched = 0
    for _ in range(50_000):
        name = "".join(rng.choice(atoms) for _ in range(rng.randint(0, 12)))
        old = _OLD_NAMED.match(name)
        expected = old and (clean_title(old.group("title")), old.group("id").lower(),
                            (old.group("suffix") or "").lower(), bool(old.group("all")))
        assert _named(name) == (expected or None), repr(name)
        matched += old is not None
    assert matched > 1000  # the corpus holds names Notion gave an id, not only others
