"""The Notion and Confluence export connectors (rag/sources/notion.py, confluence.py, exports.py)
against real exports: the small ones under tests/data, zipped, split, made newer, and hostile zips."""

from __future__ import annotations

import json
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from pydantic import ValidationError

from rag.ingest.formats import parse_here
from rag.sources.base import FetchLimits, Item, ItemFailed, SourceUnavailable, SyncContext
from rag.sources.confluence import ConfluenceExport
from rag.sources.notion import NotionExport
from rag.sources.registry import connector_class
from tests.support.exports import (
    AWAY, CONFLUENCE, LEAVE, LOGIN, NOTION, PIV, SLACK, START, TOOLS, ZOOM, copy_export, hostile_zip,
    newer_confluence, newer_notion, zip_in_parts, zip_tree,
)
from tests.support.processes import rag_run as rag

WIKI = "https://wiki.example.org/wiki"


def open_source(cls, path: Path, limits: FetchLimits | None = None, **settings):
    return cls(cls.Config(path=str(path), **settings), SyncContext("handbook", "default", limits=limits or FetchLimits()))


def listing(cls, path: Path, **settings) -> dict[str, Item]:
    with open_source(cls, path, **settings) as source:
        return {item.id: item for item in source.items()}


def fetch_all(cls, path: Path, **settings) -> dict[str, bytes]:
    with open_source(cls, path, **settings) as source:
        return {item.id: source.fetch(item, None).data for item in source.items() if not item.skip}


# --- Notion -----------------------------------------------------------------------------------

def test_notion_listing_names_pages_by_id_with_their_hierarchy(tmp_path):
    items = listing(NotionExport, zip_tree(NOTION, tmp_path / "notion.zip"))
    pages = {item_id for item_id, item in items.items() if item.filename.endswith(".md")}
    assert pages == {START, LOGIN, PIV, AWAY, LEAVE, SLACK, ZOOM}
    assert (items[START].title, items[START].path, items[START].label) == ("Getting Started", (), "Getting Started")
    assert (items[PIV].title, items[PIV].path) == ("PIV card", ("Getting Started",))
    assert items[PIV].label == "Getting Started/PIV card"
    assert items[LEAVE].label == "Going out of office/Leave types"
    assert items[SLACK].label == "Tools/Slack"  # a database's row page, under the database
    assert items[PIV].url == f"https://www.notion.so/{PIV}"
    assert all(len(page) == 32 and page not in items[page].title for page in pages)  # no id suffix

    checklist = items[f"{PIV}/piv-checklist.txt"]
    assert checklist.skip is None and checklist.path == ("Getting Started", "PIV card")
    assert checklist.label == "Getting Started/PIV card/piv-checklist.txt" and checklist.url == items[PIV].url
    assert items[f"{PIV}/badge.png"].skip == "images are not read (no text to index)"
    table = items[f"{TOOLS}.csv"]  # the database: once, though the export holds it as .csv and _all.csv
    assert (table.title, table.skip) == ("Tools", None)  # read as a sheet of records
    assert sum(1 for item in items.values() if item.title == "Tools") == 1


def test_notion_links_point_at_the_pages_on_notion(tmp_path):
    data = fetch_all(NotionExport, zip_tree(NOTION, tmp_path / "notion.zip"), base_url="https://acme.notion.site/")
    start = data[START].decode()
    assert f"[Logging in](https://acme.notion.site/{LOGIN})" in start
    assert f"[Going out of office](https://acme.notion.site/{AWAY})" in start
    assert f"[Tools](https://acme.notion.site/{TOOLS})" in start  # a database: its page on Notion
    assert "The old onboarding page Archived onboarding is gone." in start  # not in the export: its text
    assert ".md)" not in start and "%20" not in start
    piv = data[PIV].decode()
    assert "The checklist: piv-checklist.txt." in piv and "A PIV badge" in piv and "badge.png" not in piv
    leave = data[LEAVE].decode()
    assert f"[Going out of office](https://acme.notion.site/{AWAY})" in leave  # a "../" link resolved too
    assert data[f"{PIV}/piv-checklist.txt"] == (NOTION / f"Getting Started {START}" / f"PIV card {PIV}"
                                                / "piv-checklist.txt").read_bytes()
    parsed = parse_here(data[START], "page.md")
    assert parsed.title == "Getting Started" and "onboarding" in parsed.body
    table = parse_here(data[f"{TOOLS}.csv"], f"{TOOLS}.csv", "Tools")  # the database, as the engine names it
    assert (table.title, table.names) == ("Tools", {1: "Tools"})
    assert "Name: Slack; Category: Chat" in table.body.splitlines()


def test_notion_zip_split_zip_and_folder_list_the_same(tmp_path):
    plain = listing(NotionExport, zip_tree(NOTION, tmp_path / "notion.zip"))
    wrapped = listing(NotionExport, zip_tree(NOTION, tmp_path / "wrapped.zip", prefix="Export-4f1c-9e2b/"))
    split = listing(NotionExport, zip_in_parts(NOTION, tmp_path / "split.zip", parts=3))
    folder = listing(NotionExport, NOTION)
    for other in (wrapped, split, folder):
        assert {i: (it.title, it.path, it.label, it.skip) for i, it in other.items()} == \
            {i: (it.title, it.path, it.label, it.skip) for i, it in plain.items()}
    assert {i: it.version for i, it in split.items()} == {i: it.version for i, it in plain.items()}
    pages = [START, LOGIN, PIV, AWAY, LEAVE, SLACK, ZOOM]
    assert [folder[p].version for p in pages] == [plain[p].version for p in pages]  # what fetch returns


def test_notion_wrapper_and_id_only_folders_are_no_level_of_the_tree(tmp_path):
    team, hidden, sub = "a" * 32, "b" * 32, "c" * 32
    archive = hostile_zip(tmp_path / "wrapped.zip", {
        "Export-1f2e-77aa/index.html": b"<ul><li>Team</li></ul>",  # Notion's table of contents
        f"Export-1f2e-77aa/Private & Shared/Team {team}.md": b"# Team\n",
        f"Export-1f2e-77aa/Private & Shared/Team {team}/{hidden}/Sub {sub}.md": b"# Sub\n",
    })
    items = listing(NotionExport, archive)
    assert set(items) == {team, sub}
    assert (items[sub].path, items[sub].label) == (("Team",), "Team/Sub")


def test_notion_newer_export_updates_the_same_items(tmp_path):
    first = listing(NotionExport, zip_tree(NOTION, tmp_path / "first.zip"))
    newer = copy_export(NOTION, tmp_path / "newer")
    newer_notion(newer)
    second = listing(NotionExport, zip_tree(newer, tmp_path / "second.zip"))

    assert set(second) == set(first) - {ZOOM}
    changed = {item_id for item_id in second if second[item_id].version != first[item_id].version}
    # PIV renamed (its heading), Leave types edited, Slack's link to the deleted Zoom is now text.
    assert changed == {PIV, LEAVE, SLACK}
    assert (second[PIV].title, second[PIV].path) == ("PIV badge", ("Going out of office",))
    assert (second[LOGIN].path, second[LOGIN].label) == ((), "Logging in")  # moved, unedited
    checklist = second[f"{PIV}/piv-checklist.txt"]
    assert checklist.path == ("Going out of office", "PIV badge")
    assert checklist.version == first[f"{PIV}/piv-checklist.txt"].version


# --- Confluence -------------------------------------------------------------------------------

def test_confluence_listing_names_pages_by_id_with_their_breadcrumbs(tmp_path):
    items = listing(ConfluenceExport, zip_tree(CONFLUENCE, tmp_path / "space.zip"), base_url=WIKI + "/")
    assert set(items) == {"10001", "10002", "10003", "10004", "10005", "10006", "10004/20001.txt", "10004/20002.png"}
    assert (items["10001"].title, items["10001"].path, items["10001"].label) == ("Handbook", (), "Handbook")
    assert items["10003"].title == "How to log in"  # without the space's "18F Handbook : "
    assert items["10003"].path == ("Handbook", "Getting Started")
    assert items["10004"].label == "Handbook/Getting Started/PIV card"  # the "<pageId>.html" form
    assert items["10006"].label == "Handbook/Travel/Leave types"
    assert items["10004"].url == f"{WIKI}/pages/viewpage.action?pageId=10004"
    checklist = items["10004/20001.txt"]
    assert (checklist.title, checklist.filename, checklist.skip) == ("piv-checklist.txt", "piv-checklist.txt", None)
    assert checklist.path == ("Handbook", "Getting Started", "PIV card")
    assert checklist.url == f"{WIKI}/download/attachments/10004/piv-checklist.txt"
    assert items["10004/20002.png"].skip == "images are not read (no text to index)"
    no_base = listing(ConfluenceExport, CONFLUENCE)
    assert no_base["10004"].url is None and no_base["10004"].label == items["10004"].label


def test_confluence_page_is_its_main_content_with_links_back(tmp_path):
    data = fetch_all(ConfluenceExport, zip_tree(CONFLUENCE, tmp_path / "space.zip"), base_url=WIKI)
    piv = data["10004"].decode()
    for boilerplate in ("Document generated by Confluence", "breadcrumb", "Created by", "Attachments:",
                        "bullet_blue", "Atlassian", "18F Handbook :"):
        assert boilerplate not in piv
    parsed = parse_here(data["10004"], "10004.html")
    assert parsed.title == "PIV card" and parsed.body.startswith("# PIV card")
    assert "Getting issued a card" in parsed.body and "Document generated" not in parsed.body
    start = data["10002"].decode()
    assert f'<a href="{WIKI}/pages/viewpage.action?pageId=10004">your PIV card</a>' in start
    assert "<a>the old onboarding page</a>" in start  # no page of the export: its text only
    assert f'<a href="{WIKI}/download/attachments/10004/piv-checklist.txt">the checklist</a>' in piv
    assert data["10004/20001.txt"].startswith(b"PIV card checklist")
    plain = fetch_all(ConfluenceExport, CONFLUENCE)["10002"].decode()
    assert "<a>your PIV card</a>" in plain  # no base_url: no address to link to


def test_confluence_titles_with_slashes_make_safe_folders(tmp_path):
    def page(title: str, crumbs: str) -> bytes:
        return (f'<html><head><title>Ops : {title}</title></head><body><div id="breadcrumb-section"><ol>'
                f'<li><a href="index.html">Ops</a></li>{crumbs}</ol></div><h1 id="title-heading">'
                f'<span id="title-text">Ops : {title}</span></h1><div id="main-content"><p>Text.</p></div>'
                '</body></html>').encode()
    archive = hostile_zip(tmp_path / "ops.zip", {
        "OPS/index.html": b"<p>Ops</p>",
        "OPS/CI-CD_1.html": page("CI/CD", ""),
        "OPS/Deploy_2.html": page("Deploy\x07 &#x202e;now", '<li><a href="CI-CD_1.html">CI/CD</a></li>'),
    })
    items = listing(ConfluenceExport, archive)
    assert (items["1"].title, items["1"].label) == ("CI/CD", "CI-CD")  # the title is the page's own
    assert (items["2"].title, items["2"].path, items["2"].label) == ("Deploy now", ("CI-CD",), "CI-CD/Deploy now")


def test_confluence_newer_export_updates_the_same_items(tmp_path):
    first = listing(ConfluenceExport, zip_tree(CONFLUENCE, tmp_path / "first.zip"), base_url=WIKI)
    newer = copy_export(CONFLUENCE, tmp_path / "newer")
    newer_confluence(newer)
    second = listing(ConfluenceExport, zip_tree(newer, tmp_path / "second.zip"), base_url=WIKI)

    assert set(second) == set(first) - {"10003"}
    changed = {item_id for item_id in second if second[item_id].version != first[item_id].version}
    assert changed == {"10001", "10004", "10005"}  # edited; renamed and moved; renamed
    assert (second["10004"].title, second["10004"].path) == ("PIV badge", ("Handbook", "Travel and leave"))
    assert second["10006"].path == ("Handbook", "Getting Started")  # moved, unedited: same version
    assert second["10004/20001.txt"].path == ("Handbook", "Travel and leave", "PIV badge")


# --- Untrusted zips -----------------------------------------------------------------------------

def test_a_zip_bomb_member_fails_alone(tmp_path):
    bomb = f"Bomb {'b' * 32}.md"
    archive = hostile_zip(tmp_path / "bomb.zip", {bomb: b"# Bomb\n" + b"\0" * 30_000_000,
                                                  f"Fine {'f' * 32}.md": b"# Fine\n\nA page.\n"})
    assert archive.stat().st_size < 200_000
    with open_source(NotionExport, archive) as source:
        items = {item.id: item for item in source.items()}
        assert "zip bomb" in items["b" * 32].failed  # the listing reads pages: reported from there
        with pytest.raises(ItemFailed, match="zip bomb"):
            source.fetch(items["b" * 32], None)
        assert source.fetch(items["f" * 32], None).data.startswith(b"# Fine")


def test_a_page_of_unclosed_links_reads_in_linear_time(tmp_path):
    hostile = b"# Links\n\n" + b"[a](" * 200_000 + b"\n" + b"[" * 200_000 + b"\n![" + b"](" * 200_000
    archive = hostile_zip(tmp_path / "links.zip", {f"Links {'d' * 32}.md": hostile}, zipfile.ZIP_STORED)
    started = time.monotonic()
    with open_source(NotionExport, archive) as source:
        (item,) = source.items()
        assert source.fetch(item, None).data.count(b"[a](") == 200_000  # no link: left as it was
    assert time.monotonic() - started < 30  # quadratic matching took 45 s for 16,000 of them


def test_a_member_past_the_size_bound_fails_alone(tmp_path):
    archive = hostile_zip(tmp_path / "big.zip", {f"Big {'b' * 32}.md": b"# Big\n" + b"words " * 2000,
                                                 f"Small {'c' * 32}.md": b"# Small\n"})
    with open_source(NotionExport, archive, FetchLimits(max_bytes=5000)) as source:
        items = {item.id: item for item in source.items()}
        with pytest.raises(ItemFailed, match="larger than 5000 bytes"):
            source.fetch(items["b" * 32], None)
        assert source.fetch(items["c" * 32], None).data == b"# Small\n"


@pytest.mark.parametrize("name", ["../escape.md", "/etc/passwd", "pages/../../escape.html", "..\\escape.md",
                                  "C:/escape.md"])
def test_names_outside_the_export_refuse_it(tmp_path, name):
    archive = hostile_zip(tmp_path / "traversal.zip", {"index.html": b"<p>space</p>", name: b"x"})
    for cls in (NotionExport, ConfluenceExport):
        with open_source(cls, archive) as source, pytest.raises(SourceUnavailable, match="outside itself"):
            source.items()


def test_too_many_members_or_bytes_or_items_refuse_the_export(tmp_path):
    many = hostile_zip(tmp_path / "many.zip", {f"p{n}.txt": b"x" for n in range(101)})
    with open_source(NotionExport, many, FetchLimits(max_items=2)) as source:
        with pytest.raises(SourceUnavailable, match="more than 100 files"):
            source.items()
    claims = bytearray(hostile_zip(tmp_path / "claims.zip", {"a.txt": b"x"}).read_bytes())
    end = claims.rindex(b"PK\x05\x06")
    claims[end + 8: end + 12] = (60_000).to_bytes(2, "little") * 2  # the end record claims 60,000 members
    (tmp_path / "claims.zip").write_bytes(bytes(claims))
    with open_source(NotionExport, tmp_path / "claims.zip", FetchLimits(max_items=2)) as source:
        with pytest.raises(SourceUnavailable, match="more than 100 files"):  # before zipfile reads them
            source.items()
    heavy = hostile_zip(tmp_path / "heavy.zip", {f"Page {'a' * 32}.md": b"# Page\n" + b"x" * 120_000})
    with open_source(NotionExport, heavy, FetchLimits(max_items=2, max_bytes=1000)) as source:
        with pytest.raises(SourceUnavailable, match="add up to more than 100000 bytes"):
            source.items()
    with open_source(NotionExport, zip_tree(NOTION, tmp_path / "notion.zip"), FetchLimits(max_items=3)) as source:
        with pytest.raises(SourceUnavailable, match="more than 3 items"):
            source.items()


def test_a_damaged_or_missing_export_is_unavailable(tmp_path):
    whole = zip_tree(CONFLUENCE, tmp_path / "space.zip").read_bytes()
    (tmp_path / "truncated.zip").write_bytes(whole[: len(whole) // 2])
    (tmp_path / "text.zip").write_bytes(b"this is not a zip file at all")
    for name in ("truncated.zip", "text.zip"):
        with open_source(ConfluenceExport, tmp_path / name) as source:
            with pytest.raises(SourceUnavailable, match="not a readable zip"):
                source.items()
    with open_source(NotionExport, tmp_path / "absent.zip") as source:
        with pytest.raises(SourceUnavailable, match="no export at"):
            source.items()


def test_a_damaged_page_fails_alone(tmp_path):
    good = b"<html><body><div id='main-content'><p>Fine.</p></div></body></html>"
    archive = tmp_path / "damaged.zip"
    hostile_zip(archive, {"index.html": b"<p>space</p>", "Good_1.html": good, "Bad_2.html": good * 40})
    raw = bytearray(archive.read_bytes())
    with zipfile.ZipFile(archive) as package:
        bad = package.getinfo("Bad_2.html")
        start = bad.header_offset + 30 + len(bad.filename) + len(bad.extra)
    raw[start + 10: start + 40] = b"\xff" * 30  # its deflated bytes garbled: a bad CRC or a bad stream
    archive.write_bytes(bytes(raw))
    with open_source(ConfluenceExport, archive) as source:
        items = {item.id: item for item in source.items()}
        with pytest.raises(ItemFailed, match="damaged"):
            source.fetch(items["2"], None)
        assert b"Fine." in source.fetch(items["1"], None).data


def test_fetch_from_several_threads_reads_each_item_whole(tmp_path):
    archive = zip_tree(NOTION, tmp_path / "notion.zip")
    expected = fetch_all(NotionExport, archive)
    with open_source(NotionExport, archive) as source:
        items = [item for item in source.items() if not item.skip] * 8
        with ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(lambda item: (item.id, source.fetch(item, None).data), items))
    assert all(data == expected[item_id] for item_id, data in results)


def test_settings_are_checked_and_the_kinds_registered(tmp_path):
    assert connector_class("notion") is NotionExport and connector_class("confluence") is ConfluenceExport
    with pytest.raises(ValidationError):
        ConfluenceExport.Config(path=str(tmp_path), base_url="ftp://wiki.example.org")
    with pytest.raises(ValidationError):
        NotionExport.Config(path=str(tmp_path), token="secret")  # unknown keys are refused
    assert NotionExport.Config(path="x").base_url == "https://www.notion.so"
    assert ConfluenceExport.Config(path="x").base_url is None


# --- End to end: `rag source add`, `rag source sync`, `rag search` ------------------------------

def _json(result) -> dict:
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def _hits(home: Path, query: str) -> list[dict]:
    return _json(rag(home, "search", query, "--kb", "team", "--limit", "8", "--json"))["results"]


@pytest.fixture(scope="module")
def synced(tmp_path_factory) -> dict:
    """A home with a Notion source and a Confluence source synced into one knowledge base, then the
    Notion export replaced by a newer one and synced again: each step's output."""
    root = tmp_path_factory.mktemp("exports-e2e")
    home, notion = root / "home", zip_tree(NOTION, root / "notion.zip")
    space = zip_tree(CONFLUENCE, root / "space.zip")
    _json(rag(home, "source", "add", "notes", "--kind", "notion", "-o", f"path={notion}", "--kb", "team", "--json"))
    _json(rag(home, "source", "add", "wiki", "--kind", "confluence", "-o", f"path={space}",
              "-o", f"base_url={WIKI}", "--kb", "team", "--folder", "wiki", "--json"))
    steps = {"notes": _json(rag(home, "source", "sync", "notes", "--json")),
             "wiki": _json(rag(home, "source", "sync", "wiki", "--json"))}
    steps["piv"] = _hits(home, "PIV card badge appointment identification")
    steps["leave"] = _hits(home, "Leave types annual leave")
    steps["asked"] = _json(rag(home, "ask", "On which day does GSA process new badges?", "--kb", "team", "--json"))
    newer = copy_export(NOTION, root / "newer")
    newer_notion(newer)
    zip_tree(newer, notion.with_name("next.zip")).replace(notion)
    steps["again"] = _json(rag(home, "source", "sync", "notes", "--json"))
    steps["edited"] = _hits(home, "two more days of leave")
    steps["moved"] = _hits(home, "ENT enterprise login password")
    return steps


def test_rag_source_sync_brings_both_exports_with_labels_and_urls(synced):
    notes, wiki = synced["notes"], synced["wiki"]
    # the "Tools" database is read as a sheet of records (rag/ingest/formats/spreadsheet.py)
    assert (notes["outcome"], notes["added"], notes["skipped"], notes["failed"]) == ("ok", 9, 1, 0)
    assert {s["item"] for s in notes["skips"]} == {"Getting Started/PIV card/badge.png"}
    assert (wiki["outcome"], wiki["added"], wiki["skipped"], wiki["failed"]) == ("ok", 7, 1, 0)
    piv = next(hit for hit in synced["piv"] if hit["document_id"] == f"notion:default:notes:{PIV}")
    assert piv["source"] == "notion:Getting Started/PIV card"
    assert piv["url"] == f"https://www.notion.so/{PIV}" and piv["title"] == "PIV card"
    leave = next(hit for hit in synced["leave"] if hit["document_id"].startswith("confluence:"))
    assert leave["document_id"] == "confluence:default:wiki:10006"
    assert leave["source"] == "confluence:Handbook/Travel/Leave types"
    assert leave["url"] == f"{WIKI}/pages/viewpage.action?pageId=10006"
    asked = synced["asked"]  # an answer from the export cites the page, with the link back to Notion
    assert not asked["abstained"] and "Wednesday" in asked["answer"]
    links = {f"notion:default:notes:{PIV}": f"https://www.notion.so/{PIV}",  # both exports hold the page
             "confluence:default:wiki:10004": f"{WIKI}/pages/viewpage.action?pageId=10004"}
    first = asked["sources"][0]
    assert links.get(first["source_id"]) == first["url"], first


def test_a_newer_export_synced_again_updates_in_place(synced):
    again = synced["again"]
    # PIV renamed, Leave types edited, Slack (its link to Zoom now text); Zoom gone; the rest as they were.
    assert (again["updated"], again["removed"], again["unchanged"], again["added"], again["failed"]) == (3, 1, 5, 0, 0)
    edited = synced["edited"][0]
    assert edited["document_id"] == f"notion:default:notes:{LEAVE}" and "two more days" in edited["excerpt"]


def test_a_page_moved_in_a_newer_export_moves_its_document(synced):
    moved = next(hit for hit in synced["moved"] if hit["document_id"] == f"notion:default:notes:{LOGIN}")
    assert moved["source"] == "notion:Logging in"
