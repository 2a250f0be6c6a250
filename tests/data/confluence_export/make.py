"""Write export/: a small Confluence HTML space export built from handbook pages (README.md says
which documentation and public samples the layout follows). Run from the repository root:

    python tests/data/confluence_export/make.py [/path/to/handbook_18f/pages]
"""

from __future__ import annotations

import re
import shutil
import sys
from html import escape
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))  # run as a script: tests.support from the repository
from tests.support.handbook_pages import HANDBOOK as _DEFAULT, handbook_text as _text  # noqa: E402

HANDBOOK = Path(sys.argv[1]) if len(sys.argv) > 1 else _DEFAULT
SPACE, KEY = "18F Handbook", "HB"
KEEP = 1800


def handbook_text(page: str) -> str:
    return _text(page, KEEP, HANDBOOK)
_BULLET = re.compile(r"^\s*(?:[*-]|\d+\.) ")

# pageId: (title, handbook page, parent pageId or None, file name: "slug" or "id")
PAGES = {
    "10001": ("Handbook", "about.md", None, "slug"),
    "10002": ("Getting Started", "getting-started/index.md", "10001", "slug"),
    "10003": ("How to log in", "getting-started/how-to-log-in.md", "10002", "slug"),
    "10004": ("PIV card", "getting-started/piv.md", "10002", "id"),  # the "<pageId>.html" form
    "10005": ("Travel", "travel-and-leave/going-out-of-office.md", "10001", "slug"),
    "10006": ("Leave types", "travel-and-leave/leave.md", "10005", "slug"),
}
# pageId: [(attachment id, original file name, content type, bytes)]
ATTACHMENTS = {
    "10004": [
        ("20001", "piv-checklist.txt", "text/plain",
         b"PIV card checklist\n\nBring two forms of identification to the badge appointment.\n"),
        ("20002", "badge.png", "image/png", bytes.fromhex(
            "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
            "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")),
    ],
}
LINKS = {  # pageId: (target pageId or file, words) links inside the content; "99999" is no page of the export
    "10002": [("10004", "your PIV card"), ("99999", "the old onboarding page")],
    "10004": [("attachments/10004/20001.txt", "the checklist")],  # a link to an attachment, in the text
    "10006": [("10005", "Travel")],
}


def file_name(page_id: str) -> str:
    title, _, _, form = PAGES.get(page_id, ("Gone", "", None, "slug"))
    if form == "id":
        return f"{page_id}.html"
    return f"{re.sub(r'[^A-Za-z0-9]+', '-', title).strip('-')}_{page_id}.html"


def ancestors(page_id: str) -> list[str]:
    found, parent = [], PAGES[page_id][2]
    while parent is not None:
        found.append(parent)
        parent = PAGES[parent][2]
    return list(reversed(found))


def inline(text: str) -> str:
    text = escape(text, quote=False)
    text = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", text)
    return re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)", r'<a href="\2">\1</a>', text)


def to_html(markdown: str) -> str:
    """The handbook's Markdown as the storage-format HTML Confluence exports (headings,
    paragraphs, lists)."""
    blocks = []
    for block in re.split(r"\n{2,}", markdown):
        lines = block.strip().splitlines()
        if not lines:
            continue
        heading = re.match(r"^(#{1,6}) (.*)", lines[0])
        if heading and len(lines) == 1:
            level = min(len(heading.group(1)) + 1, 6)
            blocks.append(f"<h{level}>{inline(heading.group(2))}</h{level}>")
        elif all(_BULLET.match(line) for line in lines):
            items = "".join(f"<li>{inline(_BULLET.sub('', line))}</li>" for line in lines)
            blocks.append(f"<ul>{items}</ul>")
        else:
            blocks.append(f"<p>{inline(' '.join(lines))}</p>")
    return "\n".join(blocks)


def content(page_id: str) -> str:
    body = to_html(handbook_text(PAGES[page_id][1]))
    links = [f'<a href="{target if "/" in target else file_name(target)}">{escape(words)}</a>'
             for target, words in LINKS.get(page_id, [])]
    if links:
        body += f"\n<p>See also: {', '.join(links)}.</p>"
    for attachment_id, original, _, _ in ATTACHMENTS.get(page_id, []):
        if original.endswith(".png"):
            body += (f'\n<p><span class="confluence-embedded-file-wrapper"><img class="confluence-embedded-image" '
                     f'src="attachments/{page_id}/{attachment_id}.png" data-linked-resource-id="{attachment_id}">'
                     "</span></p>")
    return body


def page_html(page_id: str) -> str:
    title = PAGES[page_id][0]
    crumbs = [f'<li class="first"><span><a href="index.html">{escape(SPACE)}</a></span></li>']
    crumbs += [f'<li><span><a href="{file_name(a)}">{escape(PAGES[a][0])}</a></span></li>' for a in ancestors(page_id)]
    attachments = ""
    if page_id in ATTACHMENTS:
        rows = "".join(
            f'<img src="images/icons/bullet_blue.gif" height="8" width="8" alt=""/>\n'
            f'<a href="attachments/{page_id}/{aid}{Path(name).suffix}">{escape(name)}</a> ({kind})<br/>\n'
            for aid, name, kind, _ in ATTACHMENTS[page_id])
        attachments = ('<div class="pageSection group"><div class="pageSectionHeader">'
                       '<h2 id="attachments" class="pageSectionTitle">Attachments:</h2></div>'
                       f'<div class="greybox" align="left">\n{rows}</div></div>')
    return f"""<!DOCTYPE html>
<html>
    <head>
        <title>{escape(SPACE)} : {escape(title)}</title>
        <link rel="stylesheet" href="styles/site.css" type="text/css" />
        <META http-equiv="Content-Type" content="text/html; charset=UTF-8">
    </head>
    <body class="theme-default aui-theme-default">
        <div id="page">
            <div id="main" class="aui-page-panel">
                <div id="main-header">
                    <div id="breadcrumb-section">
                        <ol id="breadcrumbs">
                            {''.join(crumbs)}
                        </ol>
                    </div>
                    <h1 id="title-heading" class="pagetitle">
                        <span id="title-text">{escape(SPACE)} : {escape(title)}</span>
                    </h1>
                </div>
                <div id="content" class="view">
                    <div class="page-metadata">
                        Created by <span class='author'> Ada Exporter</span>, last modified on Nov 26, 2024
                    </div>
                    <div id="main-content" class="wiki-content group">
{content(page_id)}
                    </div>
                    {attachments}
                </div>
            </div>
            <div id="footer" role="contentinfo">
                <section class="footer-body">
                    <p>Document generated by Confluence on Nov 26, 2024 11:26</p>
                    <div id="footer-logo"><a href="http://www.atlassian.com/">Atlassian</a></div>
                </section>
            </div>
        </div>
    </body>
</html>
"""


def tree(parent: str | None) -> str:
    children = [pid for pid, page in PAGES.items() if page[2] == parent]
    if not children:
        return ""
    items = "".join(f'<li><a href="{file_name(pid)}">{escape(PAGES[pid][0])}</a>{tree(pid)}</li>' for pid in children)
    return f"<ul>{items}</ul>"


def index_html() -> str:
    return f"""<!DOCTYPE html>
<html>
    <head>
        <title>{escape(SPACE)}</title>
        <link rel="stylesheet" href="styles/site.css" type="text/css" />
        <META http-equiv="Content-Type" content="text/html; charset=UTF-8">
    </head>
    <body class="theme-default aui-theme-default">
        <div id="page">
            <div id="main" class="aui-page-panel">
                <div id="main-header"><h1 id="title-heading" class="pagetitle">
                    <span id="title-text">{escape(SPACE)}</span></h1></div>
                <div id="content" class="view">
                    <div id="main-content" class="pageSection">
                        <h2 class="pageSectionTitle">Space Details:</h2>
                        <table class="confluenceTable">
                            <tr><th class="confluenceTh">Key</th><td class="confluenceTd">{KEY}</td></tr>
                            <tr><th class="confluenceTh">Name</th><td class="confluenceTd">{escape(SPACE)}</td></tr>
                        </table>
                    </div>
                    <div class="pageSection">
                        <h2 class="pageSectionTitle">Available Pages:</h2>
                        {tree(None)}
                    </div>
                </div>
            </div>
        </div>
    </body>
</html>
"""


def write(root: Path) -> None:
    space = root / KEY
    (space / "styles").mkdir(parents=True, exist_ok=True)
    (space / "images" / "icons").mkdir(parents=True, exist_ok=True)
    (space / "styles" / "site.css").write_text("body { font-family: sans-serif; }\n", encoding="utf-8")
    (space / "images" / "icons" / "bullet_blue.gif").write_bytes(
        bytes.fromhex("47494638396101000100800000000000ffffff21f90401000000002c00000000010001000002024401003b"))
    (space / "index.html").write_text(index_html(), encoding="utf-8")
    for page_id in PAGES:
        (space / file_name(page_id)).write_text(page_html(page_id), encoding="utf-8")
    for page_id, files in ATTACHMENTS.items():
        folder = space / "attachments" / page_id
        folder.mkdir(parents=True, exist_ok=True)
        for attachment_id, original, _, data in files:
            (folder / f"{attachment_id}{Path(original).suffix}").write_bytes(data)


if __name__ == "__main__":
    out = HERE / "export"
    shutil.rmtree(out, ignore_errors=True)
    write(out)
    print(f"wrote {sum(1 for p in out.rglob('*') if p.is_file())} files under {out}")
