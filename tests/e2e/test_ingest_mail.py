"""Mail (.eml, .mbox): what the parser reads out of messages built from the 18F handbook's text with
real office files attached (tests/support/mails.py), each read in a parse worker as ingestion reads
it; quoted replies collapsed, HTML-only bodies, attachments as sections, a mailbox as one document in
date order; damaged, foreign and oversized mail refused with the file named."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sqlalchemy import select

from rag.ingest.formats import FileTooComplex, UnreadableFile, parse_here
from rag.ingest.formats import mail as mail_format
from rag.ingest.read import parse_bytes
from rag.ingest.sandbox import Limits, ParsePool
from rag.service import KnowledgeService, Principal
from rag.settings import Settings
from rag.store.models import Node

from ..support.mails import DOCX, PDF, mbox, message, paragraphs, quoted, section

LEAVE = paragraphs(section("travel-and-leave/leave.md", "Annual leave"))
CARRY_OVER = next(p for p in LEAVE if p.startswith("You can carry over a maximum of 240"))
TEAMS = paragraphs(section("tools/teams.md"))[1:]  # the picture's link left out
SLACK = paragraphs(section("tools/slack/getting-started.md", "What is Slack?"))
LEFT_OUT = mail_format.QUOTE_LEFT_OUT


def reply() -> bytes:
    """Ada answers Bob, quoting his question and the Teams page he pasted."""
    question = "How much annual leave can I carry over?\n\n" + TEAMS[0]
    text = f"Hi Bob,\n\n{CARRY_OVER}\n\n{LEAVE[0]}\n\nAda\n\n{quoted(question)}"
    return bytes(message("Re: Carrying over annual leave", text, cc="Grace Hopper <grace@example.org>",
                         message_id="<reply-1@example.org>", in_reply_to="<question-1@example.org>"))


def refusal(data: bytes, name: str, parse=parse_bytes) -> str:
    with pytest.raises(UnreadableFile) as caught:
        parse(data, name)
    return str(caught.value)


def test_a_plain_reply_keeps_its_words_and_collapses_the_quote() -> None:
    parsed = parse_bytes(reply(), "reply.eml")
    assert parsed.title == "Re: Carrying over annual leave"
    assert parsed.metadata == {
        "from": "Ada Lovelace <ada@example.org>", "to": "Handbook Team <team@example.org>",
        "cc": "Grace Hopper <grace@example.org>", "message_id": "<reply-1@example.org>",
        "date": "2024-06-03T10:00:00+00:00"}
    body = parsed.body
    assert body.startswith("# Re: Carrying over annual leave\n\nFrom: Ada Lovelace &lt;ada@example.org>  \n"
                           "To: Handbook Team &lt;team@example.org>  \nCc: Grace Hopper &lt;grace@example.org>  \n"
                           "Date: Mon, 03 Jun 2024 10:00:00 +0000\n")
    assert CARRY_OVER in body and LEAVE[0] in body
    assert "How much annual leave" not in body and TEAMS[0][:40] not in body  # the quote and its attribution
    assert "wrote:" not in body and body.count(LEFT_OUT) == 1


def test_an_outlook_reply_drops_the_original_message_below_it() -> None:
    original = "\n".join(["", "-----Original Message-----", "From: Bob Example <bob@example.org>",
                          "Sent: Sunday, June 2, 2024 9:12 AM", "Subject: Teams", "", *TEAMS])
    parsed = parse_here(bytes(message("RE: Teams", SLACK[0] + "\n" + original)), "outlook.eml")
    assert SLACK[0] in parsed.body and "Original Message" not in parsed.body
    assert TEAMS[1][:40] not in parsed.body and parsed.body.rstrip().endswith(LEFT_OUT)


def test_an_html_only_mail_is_read_by_the_html_parser_its_quote_collapsed() -> None:
    html = ("<html><head><meta charset='iso-8859-1'><title>Newsletter template</title></head><body>"
            f"<h2>Microsoft Teams</h2><p>{TEAMS[0]}</p><p>{TEAMS[1]}</p>"
            "<div class='gmail_quote'><div class='gmail_attr'>On Sun, Bob wrote:</div>"
            f"<blockquote class='gmail_quote'><p>{SLACK[0]}</p></blockquote></div></body></html>")
    parsed = parse_bytes(bytes(message("Teams at partner agencies", None, html=html)), "teams.eml")
    assert parsed.title == "Teams at partner agencies"
    body = parsed.body
    assert "\n## Microsoft Teams\n" in body  # the HTML's h2 below the subject's heading
    assert TEAMS[0] in body and "partner’s Teams" in body.replace("'", "’")  # UTF-8 text, whatever the meta says
    assert SLACK[0][:40] not in body and "Bob wrote" not in body and LEFT_OUT in body
    assert "Newsletter template" not in body


def test_attachments_are_read_as_sections_and_the_others_named() -> None:
    forwarded = message("Slack basics", "\n\n".join(SLACK[:2]), sender="Bob Example <bob@example.org>")
    mail = message("Reading for the 8(a) pilot", "Both documents are attached.\n\nAda",
                   attachments=(("usds-8a-guide.docx", DOCX.read_bytes(),
                                 "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
                                ("example.pdf", PDF.read_bytes(), "application/pdf"),
                                ("photos.zip", b"PK\x05\x06" + b"\0" * 18, "application/zip")))
    mail.add_attachment(forwarded)  # message/rfc822: a forwarded mail
    parsed = parse_bytes(bytes(mail), "pilot.eml")
    body = parsed.body
    docx_at, pdf_at = body.index("\n## Attachment: usds-8a-guide.docx\n"), body.index("\n## Attachment: example.pdf\n")
    forwarded_at = body.index("\n## Attachment: Slack basics.eml\n")
    assert body.index("Both documents are attached.") < docx_at < pdf_at < forwarded_at
    assert "sole source procurement of up to $4 million" in body[docx_at:pdf_at]
    assert "\n### GUIDE ON HOW TO USE AN 8(a) COMPANY" in body[docx_at:pdf_at]  # its title, below the section
    assert SLACK[1] in body[forwarded_at:] and "From: Bob Example &lt;bob@example.org>" in body[forwarded_at:]
    assert body.rstrip().endswith("Attachments not read: photos.zip (application/zip, 22 bytes: a format this "
                                  "service does not read).")
    assert parsed.metadata["attachments"] == ["usds-8a-guide.docx", "example.pdf", "photos.zip", "Slack basics.eml"]
    assert not parsed.warnings


def test_an_attachment_that_cannot_be_read_is_said_and_the_mail_kept() -> None:
    docx = DOCX.read_bytes()
    mail = message("Draft", "The draft is attached.", attachments=(
        ("draft.docx", docx[: len(docx) // 2], "application/octet-stream"),))
    parsed = parse_bytes(bytes(mail), "draft.eml")
    assert "The draft is attached." in parsed.body
    assert "draft.docx (could not be read: a damaged or truncated Word document)" in parsed.body
    assert parsed.warnings == ["attachment draft.docx could not be read: a damaged or truncated Word document"]


def test_a_mailbox_is_one_document_its_messages_in_date_order() -> None:
    question = message("Carrying over annual leave", "How much annual leave can I carry over?",
                       sender="Bob Example <bob@example.org>", date="Sun, 02 Jun 2024 09:12:00 +0000",
                       message_id="<question-1@example.org>")
    answer = message("Re: Carrying over annual leave", f"{CARRY_OVER}\n\n{quoted('How much annual leave?')}",
                     date="Mon, 03 Jun 2024 10:00:00 +0200", in_reply_to="<question-1@example.org>")
    thanks = message("RE: Carrying over annual leave", "From now on I will plan my leave earlier. Thanks!",
                     sender="Bob Example <bob@example.org>", date="Tue, 04 Jun 2024 08:00:00 +0000")
    parsed = parse_bytes(mbox([thanks, question, answer]), "leave-thread.mbox")  # not saved in date order
    assert parsed.title == "Carrying over annual leave"
    body = parsed.body
    headings = [line for line in body.split("\n") if line.startswith("## ")]
    assert headings == ["## Carrying over annual leave (Bob Example, 2024-06-02 09:12)",
                        "## Re: Carrying over annual leave (Ada Lovelace, 2024-06-03 10:00)",
                        "## RE: Carrying over annual leave (Bob Example, 2024-06-04 08:00)"]
    assert CARRY_OVER in body and body.count(LEFT_OUT) == 1
    assert "\nFrom now on I will plan" in body  # a "From " line of a body survives the mbox's quoting
    assert parsed.metadata == {"messages": 3, "from": ["Bob Example <bob@example.org>", "Ada Lovelace <ada@example.org>"],
                               "first_date": "2024-06-02T09:12:00+00:00", "last_date": "2024-06-04T08:00:00+00:00"}


def test_a_message_of_a_mailbox_that_cannot_be_read_is_left_out_and_said() -> None:
    good = message("Teams", TEAMS[0])
    cut = bytes(message("Slides", "See attached.", attachments=(("a.pdf", PDF.read_bytes(), "application/pdf"),)))
    data = mbox([good]) + b"From bob@example.org Mon Jun  3 10:00:00 2024\n" + cut[: len(cut) // 2] + b"\n\n"
    parsed = parse_bytes(data, "box.mbox")
    assert TEAMS[0] in parsed.body and parsed.metadata["messages"] == 1
    assert parsed.warnings == ["message 2 of the mailbox was left out: a damaged e-mail message: it ends before "
                               "its MIME parts do (cut short?)"]


def test_damaged_foreign_and_oversized_mail_is_refused_with_its_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    whole = bytes(message("Slides", "See attached.", attachments=(("a.pdf", PDF.read_bytes(), "application/pdf"),)))
    assert refusal(whole[: len(whole) // 2], "cut.eml") == (
        "a damaged e-mail message: it ends before its MIME parts do (cut short?)")
    assert refusal(PDF.read_bytes(), "lies.eml") == "not an e-mail message (it does not start with header fields)"
    assert refusal(b"Dear team,\n\nno headers here.\n", "note.eml") == (
        "not an e-mail message (it does not start with header fields)")
    assert refusal(b"X-Note: hi\n\nno real headers\n", "odd.eml") == (
        "not an e-mail message (none of From, To, Subject, Date or Message-ID)")
    assert refusal(reply(), "box.mbox") == 'not an mbox mailbox (it does not start with a "From " line)'

    # The bounds, lowered in this process (a parse worker has its own modules): each refusal names its bound.
    monkeypatch.setattr(mail_format, "MAX_MESSAGE_BYTES", 10_000)
    with pytest.raises(FileTooComplex) as caught:
        parse_here(whole, "big.eml")
    assert caught.value.bound == "size" and str(caught.value) == (
        "the file is too complex to read within this service's limits (size: a message of "
        f"{len(whole) / 1024:.0f} KB, more than 10 KB)")
    monkeypatch.setattr(mail_format, "MAX_MESSAGE_BYTES", 50_000_000)
    monkeypatch.setattr(mail_format, "MAX_PARTS", 3)
    with pytest.raises(FileTooComplex, match=r"\(parts: more than 3 MIME parts\)"):
        parse_here(bytes(message("Parts", "one", html="<p>two</p>", attachments=(("a.txt", b"three", "text/plain"),))),
                   "parts.eml")
    monkeypatch.setattr(mail_format, "MAX_PARTS", 1000)
    monkeypatch.setattr(mail_format, "MAX_MESSAGE_DEPTH", 2)
    nested = message("Level 1", "one")
    for level in (2, 3):
        outer = message(f"Level {level}", "again")
        outer.add_attachment(nested)
        nested = outer
    with pytest.raises(FileTooComplex, match=r"\(nesting: messages attached inside messages more than 2 deep\)"):
        parse_here(bytes(nested), "nested.eml")
    monkeypatch.setattr(mail_format, "MAX_MESSAGES", 2)
    with pytest.raises(FileTooComplex, match=r"\(messages: more than 2 messages in the mailbox\)"):
        parse_here(mbox([message(f"M{i}", TEAMS[0]) for i in range(3)]), "many.mbox")
    monkeypatch.setattr(mail_format, "MAX_CHARS", 1000)
    with pytest.raises(FileTooComplex, match=r"\(characters: more than 1,000 characters of text\)"):
        parse_here(bytes(message("Long", "\n\n".join(LEAVE))), "long.eml")


def test_hostile_mail_is_stopped_by_its_bounds_in_a_worker() -> None:
    """100,000 MIME parts in 3.6 MB (the email package alone takes ~40 s of CPU to build them: with
    10 s of CPU the worker would stop on `time`, so `parts` says they were counted on the bytes
    first), and multiparts nested 999 deep."""
    parts = b"".join(b"--b\r\nContent-Type: text/plain\r\n\r\nline %d\r\n" % i for i in range(100_000))
    many = (b"From: a@example.org\r\nSubject: parts\r\nMIME-Version: 1.0\r\n"
            b"Content-Type: multipart/mixed; boundary=b\r\n\r\n" + parts + b"--b--\r\n")
    deep = b"From: a@example.org\r\nSubject: deep\r\nMIME-Version: 1.0\r\n" + b"".join(
        b"Content-Type: multipart/mixed; boundary=b%d\r\n\r\n--b%d\r\n" % (i, i) for i in range(999)) + (
        b"Content-Type: text/plain\r\n\r\nx\r\n" + b"".join(b"--b%d--\r\n" % i for i in reversed(range(999))))
    with ParsePool(1, Limits(memory_mib=768, cpu_seconds=10, timeout_seconds=60, max_chars=1_000_000)) as pool:
        for data, name, bound in ((many, "parts.eml", "parts"), (deep, "deep.eml", "depth")):
            with pytest.raises(FileTooComplex) as caught:
                pool.parse(data, name)
            assert caught.value.bound == bound, str(caught.value)


def test_ingest_reads_mail_and_refuses_bad_files_by_name(tmp_path: Path) -> None:
    """A folder of mail through the service: read, searched, the answer citing the message; the
    bad files named in the report and nothing of them written."""
    files = tmp_path / "files"
    files.mkdir()
    (files / "reply.eml").write_bytes(reply())
    (files / "pilot.eml").write_bytes(bytes(message("Reading for the 8(a) pilot", "The guide is attached.",
                                                    attachments=(("usds-8a-guide.docx", DOCX.read_bytes(),
                                                                  "application/octet-stream"),))))
    (files / "thread.mbox").write_bytes(mbox([message("Teams", TEAMS[0]), message("Re: Teams", TEAMS[1])]))
    whole = bytes(message("Slides", "See attached.", attachments=(("a.pdf", PDF.read_bytes(), "application/pdf"),)))
    (files / "cut.eml").write_bytes(whole[: len(whole) // 2])
    shutil.copy(PDF, files / "lies.eml")
    with KnowledgeService(Settings(home=tmp_path / "home")) as svc:
        svc.ensure_workspace("default")
        admin = Principal.local_admin("default")
        report = svc.ingest_directory(admin, files)
        assert sorted(report.added) == ["pilot.eml", "reply.eml", "thread.mbox"]
        assert dict(report.failed) == {
            "cut.eml": "a damaged e-mail message: it ends before its MIME parts do (cut short?)",
            "lies.eml": "not an e-mail message (it does not start with header fields)"}
        with svc.db.session() as session:
            labels = set(session.scalars(select(Node.source_label).where(Node.kind == "document")))
            meta = session.scalar(select(Node.meta).where(Node.source_label == "fs:reply.eml"))
        assert labels == {"fs:pilot.eml", "fs:reply.eml", "fs:thread.mbox"}
        assert meta["from"] == "Ada Lovelace <ada@example.org>" and meta["message_id"] == "<reply-1@example.org>"

        hit = svc.search(admin, "sole source procurement 8(a) program value", 3).hits[0]
        assert hit.source == "fs:pilot.eml" and "$4 million" in hit.text
        answer = svc.ask(admin, "How many annual leave hours can I carry over to the next leave year?")
        assert not answer.abstained and "240" in answer.text
        assert answer.sources[0].source == "fs:reply.eml"
