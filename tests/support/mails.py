"""E-mail messages built in the tests from real text: sections of the 18F handbook's pages (public
domain, CC0: ../shared/datasets/handbook_18f/LICENSE.md) as bodies, real office files as
attachments (read from ../shared/datasets/office_docs at test time, never copied)."""

from __future__ import annotations

import re
from email.message import EmailMessage
from email.utils import make_msgid

from .paths import HANDBOOK, SHARED

OFFICE = SHARED / "datasets" / "office_docs" / "files"
DOCX = OFFICE / "docx" / "usds-8a-guide.docx"  # says "a sole source procurement of up to $4 million"
PDF = OFFICE / "pdf" / "google-doc-example.pdf"
_FRONT_MATTER = re.compile(r"\A---\n.*?\n---\n", re.S)
_TEMPLATE = re.compile(r"\{%.*?%\}|\{\{.*?\}\}", re.S)
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")


def section(page: str, heading: str | None = None) -> str:
    """The text under `heading` (to the next heading of its level or above) of a handbook page, or
    the page's text before its first heading; front matter, template tags and link targets taken out
    (a mail says the link's words)."""
    text = _FRONT_MATTER.sub("", (HANDBOOK / page).read_text())
    text = _LINK.sub(r"\1", _TEMPLATE.sub("", text))
    if heading is None:
        return text.split("\n#", 1)[0].strip()
    found = re.search(rf"^(#+) {re.escape(heading)}\s*$", text, re.M)
    assert found, f"{page} has no heading {heading!r}"
    rest = text[found.end():]
    end = re.search(rf"^#{{1,{len(found.group(1))}}} ", rest, re.M)
    return (rest[: end.start()] if end else rest).strip()


def paragraphs(text: str) -> list[str]:
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if p.strip()]


def message(subject: str, text: str | None, *, sender: str = "Ada Lovelace <ada@example.org>",
            to: str = "Handbook Team <team@example.org>", cc: str | None = None,
            date: str = "Mon, 03 Jun 2024 10:00:00 +0000", html: str | None = None,
            attachments: tuple[tuple[str, bytes, str], ...] = (), message_id: str | None = None,
            in_reply_to: str | None = None) -> EmailMessage:
    """A message as a mail client writes one: text/plain (and an HTML alternative, or HTML alone
    when `text` is None), then the attachments (name, bytes, MIME type)."""
    mail = EmailMessage()
    mail["Subject"], mail["From"], mail["To"], mail["Date"] = subject, sender, to, date
    if cc:
        mail["Cc"] = cc
    mail["Message-ID"] = message_id or make_msgid(domain="example.org")
    if in_reply_to:
        mail["In-Reply-To"] = mail["References"] = in_reply_to
    if text is not None:
        mail.set_content(text)
        if html is not None:
            mail.add_alternative(html, subtype="html")
    else:
        mail.set_content(html or "", subtype="html")
    for name, data, kind in attachments:
        maintype, subtype = kind.split("/")
        mail.add_attachment(data, maintype=maintype, subtype=subtype, filename=name)
    return mail


def quoted(text: str, who: str = "Bob Example <bob@example.org>", when: str = "Sun, 2 Jun 2024 at 09:12") -> str:
    """`text` as a reply quotes it: an attribution line, then each line behind `> `."""
    lines = "\n".join(f"> {line}" if line else ">" for line in text.split("\n"))
    return f"On {when}, {who} wrote:\n{lines}\n"


def mbox(messages: list[EmailMessage]) -> bytes:
    """An mbox file (mboxrd) of the messages, in the order given."""
    out = []
    for mail in messages:
        body = bytes(mail).replace(b"\r\n", b"\n")
        body = re.sub(rb"(?m)^(>*From )", rb">\1", body)
        out.append(b"From ada@example.org Mon Jun  3 10:00:00 2024\n" + body.rstrip(b"\n") + b"\n\n")
    return b"".join(out)
