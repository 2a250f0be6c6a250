"""Write export/: a small Notion "Markdown & CSV" export built from handbook pages (README.md says
which documentation the layout follows). Run from the repository root:

    python tests/data/notion_export/make.py [/path/to/handbook_18f/pages]

The ids are fixed (the md5 of a page's key), so the tests can name them.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path
from urllib.parse import quote

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))  # run as a script: tests.support from the repository
from tests.support.handbook_pages import HANDBOOK as _DEFAULT, handbook_text as _text  # noqa: E402

HANDBOOK = Path(sys.argv[1]) if len(sys.argv) > 1 else _DEFAULT
KEEP = 1800  # characters of each handbook page: the tests need text, not whole pages


def handbook_text(page: str) -> str:
    return _text(page, KEEP, HANDBOOK)


def page_id(key: str) -> str:
    return hashlib.md5(key.encode()).hexdigest()


# key: (title, handbook page, parent key or None)
PAGES = {
    "start": ("Getting Started", "getting-started/index.md", None),
    "login": ("Logging in", "getting-started/how-to-log-in.md", "start"),
    "piv": ("PIV card", "getting-started/piv.md", "start"),
    "away": ("Going out of office", "travel-and-leave/going-out-of-office.md", None),
    "leave": ("Leave types", "travel-and-leave/leave.md", "away"),
}
TABLE = ("Tools", "tools")  # a database: title, key
ROWS = {  # its row pages: key: (title, handbook page, category)
    "slack": ("Slack", "tools/slack.md", "Chat"),
    "zoom": ("Zoom", "tools/zoom.md", "Video calls"),
}
MISSING = page_id("archived")  # a page a link names that the export does not hold


def name(title: str, key: str) -> str:
    return f"{title} {page_id(key)}"


def folder(key: str) -> Path:
    """The folder a page's file lies in, relative to the export's root."""
    parents = []
    parent = PAGES[key][2] if key in PAGES else TABLE[1]
    while parent is not None:
        if parent == TABLE[1]:
            parents.append(name(TABLE[0], parent))
            break
        parents.append(name(PAGES[parent][0], parent))
        parent = PAGES[parent][2]
    return Path(*reversed(parents)) if parents else Path()


def link(from_key: str, to_key: str, words: str) -> str:
    """A relative, URL-encoded link as Notion writes them, from one page's file to another's."""
    title = PAGES[to_key][0] if to_key in PAGES else ROWS[to_key][0]
    target = folder(to_key) / f"{name(title, to_key)}.md"
    here = folder(from_key)
    up = len(here.parts)
    common = 0
    while common < min(up, len(target.parts) - 1) and here.parts[common] == target.parts[common]:
        common += 1
    relative = [".."] * (up - common) + list(target.parts[common:])
    return f"[{words}]({'/'.join(quote(part) for part in relative)})"


EXTRA = {
    "start": lambda: (f"New here? Read {link('start', 'login', 'Logging in')} first, then "
                      f"{link('start', 'piv', 'PIV card')}. Before a trip, see "
                      f"{link('start', 'away', 'Going out of office')}. Our apps are in "
                      f"[Tools]({quote(name(*TABLE))}.csv). The old onboarding page "
                      f"[Archived onboarding](Archived%20onboarding%20{MISSING}.md) is gone."),
    "piv": lambda: ("The checklist: [piv-checklist.txt](" + quote(f"{name('PIV card', 'piv')}/piv-checklist.txt")
                    + ").\n\n![A PIV badge](" + quote(f"{name('PIV card', 'piv')}/badge.png") + ")"),
    "leave": lambda: f"Tell your team first: {link('leave', 'away', 'Going out of office')}.",
    "slack": lambda: f"Meetings happen on {link('slack', 'zoom', 'Zoom')}.",
}


def write_page(root: Path, key: str, title: str, text: str) -> None:
    body = f"# {title}\n\n{text}\n" + (f"\n{EXTRA[key]()}\n" if key in EXTRA else "")
    target = root / folder(key) / f"{name(title, key)}.md"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(body, encoding="utf-8")


def write(root: Path) -> None:
    for key, (title, page, _) in PAGES.items():
        write_page(root, key, title, handbook_text(page))
    table = root / f"{name(*TABLE)}.csv"
    rows = [f"{title},{category}" for title, _, category in ROWS.values()]
    table.write_text("Name,Category\n" + "\n".join(rows) + "\n", encoding="utf-8")
    (root / f"{name(*TABLE)}_all.csv").write_text(table.read_text(encoding="utf-8"), encoding="utf-8")
    for key, (title, page, category) in ROWS.items():  # a row page lists its properties first
        write_page(root, key, title, f"Category: {category}\n\n{handbook_text(page)}")
    piv = root / folder("piv") / name("PIV card", "piv")
    piv.mkdir(parents=True, exist_ok=True)
    (piv / "piv-checklist.txt").write_text(
        "PIV card checklist\n\nBring two forms of identification to the badge appointment.\n"
        "Pick the card up within 30 days.\n", encoding="utf-8")
    # The smallest valid PNG (1x1, transparent): an image attachment, listed and skipped.
    (piv / "badge.png").write_bytes(bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"))


if __name__ == "__main__":
    out = HERE / "export"
    shutil.rmtree(out, ignore_errors=True)
    write(out)
    print(f"wrote {sum(1 for p in out.rglob('*') if p.is_file())} files under {out}")
