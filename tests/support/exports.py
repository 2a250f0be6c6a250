"""The Notion and Confluence test exports (tests/data/*_export) as the tests use them: zipped,
split into parts, made newer (a page renamed and moved, one edited, one deleted), or hostile."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path
from urllib.parse import quote

DATA = Path(__file__).resolve().parents[1] / "data"
NOTION = DATA / "notion_export" / "export"
CONFLUENCE = DATA / "confluence_export" / "export"

# Notion's page ids in tests/data/notion_export (the md5 of make.py's keys).
START = "ea2b2676c28c0db26d39331a336c6b92"  # Getting Started
LOGIN = "d56b699830e77ba53855679cb1d252da"  # Getting Started/Logging in
PIV = "155815fa8fdb4e3326e55f81ab4a3f5a"  # Getting Started/PIV card (two attachments)
AWAY = "efb5803993a803fe4414fa2ca001a84f"  # Going out of office
LEAVE = "6c374e70334072aeeb62ed46ea987838"  # Going out of office/Leave types
TOOLS = "4a931512ce65bdc9ca6808adf92d8783"  # the Tools database
SLACK = "c25033a972715dbbdb7e73ac79261230"  # Tools/Slack
ZOOM = "15913c103a5238e5a80ac2f498ee090d"  # Tools/Zoom


def copy_export(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


def zip_tree(root: Path, archive: Path, prefix: str = "") -> Path:
    """`root`'s files in a zip, as the export's download holds them (deflated, folders implied)."""
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as out:
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            out.write(path, prefix + path.relative_to(root).as_posix())
    return archive


def zip_in_parts(root: Path, archive: Path, parts: int = 2) -> Path:
    """A split Notion export: the tree's files dealt into Part-N zips, zipped again."""
    files = sorted(p for p in root.rglob("*") if p.is_file())
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as out:
        for number in range(parts):
            part = archive.with_name(f"Export-0d5c-Part-{number + 1}.zip")
            with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as inner:
                for path in files[number::parts]:
                    inner.write(path, path.relative_to(root).as_posix())
            out.write(part, part.name)
            part.unlink()
    return archive


def _page(root: Path, page_id: str) -> Path:
    return next(p for p in root.rglob(f"* {page_id}.md"))


def _relink(root: Path, old: str, new: str) -> None:
    """Every page's links from `old` (a path from the export's root) to `new`, as a newer export
    writes them (URL-encoded; the tests' links to these pages are all from the root's pages)."""
    for page in root.rglob("*.md"):
        text = page.read_text(encoding="utf-8")
        page.write_text(text.replace(quote(old), quote(new)), encoding="utf-8")


def newer_notion(root: Path) -> None:
    """The export again, a week later: "PIV card" renamed "PIV badge" and moved under "Going out of
    office" (its attachments with it); "Logging in" moved to the top, unedited; "Leave types"
    edited; "Zoom" deleted. Links to the moved pages follow them, as Notion writes them."""
    start = f"Getting Started {START}"
    away = f"Going out of office {AWAY}"
    (root / start / f"PIV card {PIV}").rename(root / away / f"PIV badge {PIV}")
    old_piv = root / start / f"PIV card {PIV}.md"
    text = old_piv.read_text(encoding="utf-8").replace("# PIV card", "# PIV badge", 1)
    text = text.replace(quote(f"PIV card {PIV}/"), quote(f"PIV badge {PIV}/"))
    (root / away / f"PIV badge {PIV}.md").write_text(text, encoding="utf-8")
    old_piv.unlink()
    _relink(root, f"{start}/PIV card {PIV}.md", f"{away}/PIV badge {PIV}.md")
    (root / start / f"Logging in {LOGIN}.md").rename(root / f"Logging in {LOGIN}.md")
    _relink(root, f"{start}/Logging in {LOGIN}.md", f"Logging in {LOGIN}.md")
    leave = _page(root, LEAVE)
    leave.write_text(leave.read_text(encoding="utf-8") + "\nNew this year: two more days of leave.\n",
                     encoding="utf-8")
    _page(root, ZOOM).unlink()


def _edit(page: Path, *changes: tuple[str, str]) -> None:
    text = page.read_text(encoding="utf-8")
    for old, new in changes:
        text = text.replace(old, new)
    page.write_text(text, encoding="utf-8")


def newer_confluence(root: Path) -> None:
    """The space again: "Travel" (10005) renamed "Travel and leave" (so its file, the links and
    breadcrumbs naming it change); "PIV card" (10004) renamed "PIV badge" and moved under it;
    "Leave types" (10006) moved under "Getting Started", unedited; "Handbook" (10001) edited;
    "How to log in" (10003) deleted. A link's text in a page's content stays as its author wrote it."""
    space = root / "HB"
    (space / "Travel_10005.html").rename(space / "Travel-and-leave_10005.html")
    for page in space.glob("*.html"):
        _edit(page, ("Travel_10005.html", "Travel-and-leave_10005.html"),
              ("18F Handbook : Travel<", "18F Handbook : Travel and leave<"),
              ('_10005.html">Travel</a></span>', '_10005.html">Travel and leave</a></span>'))  # the breadcrumbs
    getting_started = '<li><span><a href="Getting-Started_10002.html">Getting Started</a></span></li>'
    travel = '<li><span><a href="Travel-and-leave_10005.html">Travel and leave</a></span></li>'
    _edit(space / "10004.html", ("18F Handbook : PIV card", "18F Handbook : PIV badge"), (getting_started, travel))
    _edit(space / "Leave-types_10006.html", (travel, getting_started))
    main = '<div id="main-content" class="wiki-content group">'
    _edit(space / "Handbook_10001.html", (main, f"{main}\n<p>New this year: a handbook chapter on leave.</p>"))
    (space / "How-to-log-in_10003.html").unlink()


def hostile_zip(archive: Path, members: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(archive, "w", compression) as out:
        for name, data in members.items():
            out.writestr(zipfile.ZipInfo(name), data, compress_type=compression)
    return archive
