"""E-mail: a message (.eml, RFC 5322/MIME) and a mailbox (.mbox) as Markdown.

A message becomes one document: its subject is the title, its From, To, Cc and Date are lines
under it (so a question about who wrote what finds them: metadata is not indexed) and are kept,
with the Message-ID, as the document's metadata. The text comes from the text/plain part, or from
the text/html part through the HTML parser (rag/ingest/formats/html.py) when there is no plain
one. Quoted replies are collapsed to one line saying a quote was left out: in plain text the
`>` lines and the "On … wrote:" line above them, an Outlook "-----Original Message-----" block; in
HTML a `<blockquote type="cite">`, Gmail's `gmail_quote`, Thunderbird's `moz-cite-prefix`,
Outlook's `divRplyFwdMsg` and what follows it. A reply's new text is what a search should find;
the quoted message is found as itself. Each attachment in a format the service reads is parsed by
that format's parser (`parse_here`: this already runs in a parse worker, under its bounds) and
follows as its own section, `## Attachment: name`, its headings moved below that one; an attached
message (message/rfc822, or an .eml file) is read the same way, as a message. The attachments in
other formats are named in one line and not read; pictures of an HTML body (inline parts with a
Content-ID) are left out.

A mailbox (.mbox) is one document, each message a section (`## subject (sender, date)`) in date
order. One file ingests as one document in this architecture (a document is what a file, an upload
or a source item becomes; its versions, its name and its citations are the file's), and an .mbox
is most often one thread or one list's archive saved together, read best as one: its messages'
quotes are collapsed because the quoted message is a section of its own above. The title is the
thread's subject when every message shares it (Re:/Fwd: left aside), else the file's name. A
message that cannot be read is left out of a mailbox with a warning and a line saying so; a
message file that cannot be read is refused. Where each message should be a document of its own,
the IMAP source (rag/sources/imap.py) makes one per message.

Bounds (module constants, read at each call so a test may lower them): a message's size, a
mailbox's size, MIME parts per message, messages inside messages (an attached mail holding an
attached mail ...) and multipart nesting, messages per mailbox, characters of text. Past one, the
file is refused with `too_complex`, naming it. A message cut short (a multipart whose closing
boundary never comes) or whose parts cannot be found is refused as damaged; a file that is no
message at all (no header fields) as not an e-mail message.
"""

from __future__ import annotations

import codecs
import contextvars
import datetime as dt
import email.header
import email.utils
import re
from email import errors as email_errors
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from pathlib import PurePath
from typing import Any

from rag.ingest.formats import (
    INTERNAL_SUFFIXES,
    FileTooComplex,
    UnreadableFile,
    parse_here,
    supported_suffixes,
    too_complex,
)
from rag.ingest.formats.markdown import escape_text
from rag.ingest.parse import ParsedDocument, with_title

MAX_MESSAGE_BYTES = 50_000_000  # one message (an .eml, or one message of a mailbox)
MAX_MBOX_BYTES = 200_000_000  # one mailbox file
MAX_PARTS = 1_000  # MIME parts of one message, attached messages' parts included
MAX_MESSAGE_DEPTH = 5  # messages inside messages: a mail attached to a mail attached to a mail ...
MAX_MULTIPART_DEPTH = 20  # multiparts inside multiparts within one message
MAX_MESSAGES = 10_000  # messages in one mailbox
MAX_CHARS = 20_000_000  # characters of text one file yields
MAX_HEADER_CHARS = 2_000  # a header shown or kept (a To line of hundreds of addresses is cut there)

QUOTE_LEFT_OUT = "(A quoted earlier message was left out here.)"
_HEADER_NAME = re.compile(rb"[!-9;-~]+:")
_KNOWN_HEADERS = re.compile(rb"(?im)^(from|to|subject|date|message-id|received|mime-version|return-path|"
                            rb"delivered-to|reply-to|cc|in-reply-to|references):")
_QUOTED = re.compile(r"\s{0,3}>")
_WROTE = re.compile(r"(?i)\b(wrote|writes|schrieb|a écrit|escribió|scrisse|schreef|skrev|napisał|kirjoitti)\s*:\s*$")
_ATTRIBUTION_START = re.compile(r"(?i)^\s*(on|le|am|el|il|op|den|w dniu|em)\b")
_ORIGINAL = re.compile(r"(?i)^\s*-{2,}\s*(original message|ursprüngliche nachricht|message d'origine|"
                       r"mensaje original|messaggio originale)\s*-{2,}\s*$")
_OUTLOOK_RULE = re.compile(r"^\s*_{10,}\s*$")
_OUTLOOK_FROM = re.compile(r"(?i)^\s*(from|von|de|da|van)\s*:")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)\s*$")
_HEADING = re.compile(r"^(#{1,6})(?=\s|$)")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_REPLY_PREFIX = re.compile(r"(?i)^\s*((re|fwd?|aw|wg|sv|vs|tr|rif|antw)\s*(\[\d+\])?\s*:\s*)+")
_BLANK_RUNS = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")
_MBOX_SEPARATOR = re.compile(rb"^From [^\r\n]*\r?\n", re.M)
_BOUNDARY = re.compile(rb'(?i)\bboundary\s*=\s*(?:"([^"\r\n]{1,200})"|([^\s;"]{1,200}))')
_DELIMITER = re.compile(rb"(?m)^--([^\r\n]{1,210})")
_MBOXRD_QUOTED = re.compile(rb"(?m)^>(>*From )")

_message_depth: contextvars.ContextVar[int] = contextvars.ContextVar("rag_mail_depth", default=0)


# ----- small pieces -----

def _clean(text: str) -> str:
    """Text fit for a body and a store: 8-bit bytes the header parser kept as surrogates read as
    UTF-8, no NUL."""
    if any("\udc80" <= ch <= "\udcff" for ch in text):
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return text.replace("\x00", "")


def _one_line(text: str, limit: int = MAX_HEADER_CHARS) -> str:
    text = " ".join(_clean(text).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _header(message: EmailMessage, name: str) -> str:
    """A header's decoded value on one line, "" when absent; a header the parser chokes on (it has
    bugs on odd input) is read from its raw text instead."""
    try:
        value = message.get(name)
        return _one_line(str(value)) if value is not None else ""
    except Exception:  # noqa: BLE001 - email's header parser raises IndexError, ValueError, ... on odd input
        for key, raw in message.raw_items():
            if key.lower() == name.lower():
                try:
                    return _one_line(str(email.header.make_header(email.header.decode_header(raw))))
                except Exception:  # noqa: BLE001
                    return _one_line(raw)
        return ""


def _date(message: EmailMessage) -> dt.datetime | None:
    raw = _header(message, "date")
    if not raw:
        return None
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.timezone.utc)


def _size(count: int) -> str:
    if count >= 1024 * 1024:
        return f"{count / 1024 / 1024:.1f} MB"
    return f"{count / 1024:.0f} KB" if count >= 1024 else f"{count} bytes"


def _decoded_text(part: EmailMessage) -> str:
    """A text part's characters: its transfer encoding undone, its charset (UTF-8 when it names
    none, or one Python does not know) read, cp1252 for bytes that are not what it says."""
    payload = part.get_payload(decode=True) or b""
    charset = part.get_content_charset() or "utf-8"
    try:
        codecs.lookup(charset)
    except LookupError:
        charset = "utf-8"
    try:
        text = payload.decode(charset)
    except (UnicodeDecodeError, LookupError):
        try:
            text = payload.decode("utf-8")
        except UnicodeDecodeError:
            text = payload.decode("cp1252", errors="replace")
    return _clean(text)


def _escape_line(line: str, previous: str) -> str:
    """A line of plain text as Markdown that shows it as it is: no heading, no link, no tag it did not
    mean (and `===` under a line makes no heading of it)."""
    line = escape_text(line)
    if _HEADING.match(line.lstrip()) or (_SETEXT.match(line) and previous.strip()):
        return "\\" + line.lstrip()
    return line


def demote(markdown: str, levels: int) -> str:
    """Markdown with each ATX heading `levels` deeper (six at most), fenced code left as it is."""
    out, fence = [], None
    for line in markdown.split("\n"):
        opened = _FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = None
        elif opened:
            fence = opened.group(1)
        else:
            heading = _HEADING.match(line)
            if heading:
                line = "#" * min(6, len(heading.group(1)) + levels) + line[len(heading.group(1)):]
        out.append(line)
    return "\n".join(out)


class _Text:
    """The body as it is written, its characters counted against MAX_CHARS."""

    def __init__(self) -> None:
        self.blocks: list[str] = []
        self.chars = 0

    def add(self, block: str) -> None:
        block = block.strip("\n")
        if not block.strip():
            return
        self.chars += len(block) + 2
        if self.chars > MAX_CHARS:
            raise too_complex("characters", f"more than {MAX_CHARS:,} characters of text")
        self.blocks.append(block)

    def markdown(self) -> str:
        return _BLANK_RUNS.sub("\n\n", "\n\n".join(self.blocks))


# ----- quoted replies -----

def collapse_quotes(text: str) -> str:
    """Plain text with each quoted block (`>` lines, with the "On … wrote:" line above them) and an
    Outlook-style original message (from its separator to the end) as one line saying so."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if _QUOTED.match(line):
            while i < len(lines) and (_QUOTED.match(lines[i]) or (
                    not lines[i].strip() and i + 1 < len(lines) and _QUOTED.match(lines[i + 1]))):
                i += 1
            _drop_attribution(out)
            out.extend(["", QUOTE_LEFT_OUT, ""])
            continue
        if _ORIGINAL.match(line) or (_OUTLOOK_RULE.match(line) and _next_text(lines, i + 1, _OUTLOOK_FROM)):
            out.extend(["", QUOTE_LEFT_OUT])
            break
        out.append(line)
        i += 1
    return "\n".join(out)


def _next_text(lines: list[str], start: int, pattern: re.Pattern) -> bool:
    for line in lines[start:start + 3]:
        if line.strip():
            return bool(pattern.match(line))
    return False


def _drop_attribution(out: list[str]) -> None:
    """Takes "On Mon, 3 Jun 2024, Ada <ada@example.org> wrote:" (one line, or two as a mail client
    wraps it) off the end of `out`."""
    while out and not out[-1].strip():
        out.pop()
    if not out or not _WROTE.search(out[-1]) or len(out[-1]) > 300:
        return
    last = out.pop()
    if not _ATTRIBUTION_START.match(last) and out and _ATTRIBUTION_START.match(out[-1]) and len(out[-1]) < 300:
        out.pop()


def _strip_html_quotes(html: str) -> str:
    """The HTML with its quoted replies taken out (see the module's docstring), each replaced by a
    paragraph saying so; the HTML as it was when lxml cannot read it (the HTML parser then says why)."""
    import lxml.html
    from lxml import etree

    try:
        root = lxml.html.document_fromstring(html)
    except (etree.LxmlError, ValueError):
        return html
    for node in root.xpath("//title"):  # a mail's page title is no part of its text (the subject is the title)
        node.drop_tree()
    for node in root.xpath("//div[@id='divRplyFwdMsg' or @id='appendonsend']"):
        parent = node.getparent()
        if parent is None:
            continue
        previous = node.getprevious()
        if previous is not None and previous.tag == "hr":
            parent.remove(previous)
        for sibling in list(node.itersiblings()):
            parent.remove(sibling)
        _replace_with_note(node)
    quotes = root.xpath("//blockquote[@type='cite'] | //div[contains(concat(' ', normalize-space(@class), ' '), "
                        "' gmail_quote ')] | //div[contains(@class, 'moz-cite-prefix')] | "
                        "//div[contains(@class, 'yahoo_quoted')]")
    for node in quotes:
        if node.getparent() is not None and not any(a in quotes for a in node.iterancestors()):
            _replace_with_note(node)
    return lxml.html.tostring(root, encoding="unicode")


def _replace_with_note(node: Any) -> None:
    from lxml import etree

    note = etree.Element("p")
    note.text = QUOTE_LEFT_OUT
    note.tail = node.tail
    node.getparent().replace(node, note)


# ----- one message -----

def _check_message(data: bytes) -> None:
    if len(data) > MAX_MESSAGE_BYTES:
        raise too_complex("size", f"a message of {_size(len(data))}, more than {_size(MAX_MESSAGE_BYTES)}")
    head = data.lstrip(b"\r\n\t ")[:8192]
    if b"\x00" in head or not (head.startswith(b"From ") or _HEADER_NAME.match(head)):
        raise UnreadableFile("not an e-mail message (it does not start with header fields)")
    block = re.split(rb"\r?\n\r?\n", data[:1_000_000], maxsplit=1)[0]
    if not _KNOWN_HEADERS.search(block):
        raise UnreadableFile("not an e-mail message (none of From, To, Subject, Date or Message-ID)")
    _count_parts(data)


def _count_parts(data: bytes) -> None:
    """MAX_PARTS checked on the bytes, before the email package builds the parts: it takes ~40 s for
    the 100,000 parts a 3.6 MB message can hold. A part opens with a line `--boundary` of a boundary
    some Content-Type declares; one linear pass counts them (the parsed message is counted again)."""
    boundaries = {m.group(1) or m.group(2) for m in _BOUNDARY.finditer(data)}
    if len(boundaries) > MAX_PARTS:
        raise too_complex("parts", f"more than {MAX_PARTS:,} MIME parts")
    if not boundaries:
        return
    count = 0
    for match in _DELIMITER.finditer(data):
        if match.group(1).rstrip(b" \t") in boundaries:  # an opening delimiter (a closing one ends "--")
            count += 1
            if count > MAX_PARTS:
                raise too_complex("parts", f"more than {MAX_PARTS:,} MIME parts")


def _read_message(data: bytes) -> EmailMessage:
    _check_message(data)
    if data.startswith(b"From "):  # an mbox "From " line some programs keep at the top of an .eml
        data = data.split(b"\n", 1)[1] if b"\n" in data else b""
    message = BytesParser(policy=policy.default).parsebytes(data)
    _check_structure(message)
    return message  # type: ignore[return-value]


def _check_structure(message: EmailMessage) -> None:
    """The parts counted (MAX_PARTS) and the message refused when it is cut short or its parts
    cannot be found."""
    count = 0
    for part in message.walk():
        count += 1
        if count > MAX_PARTS:
            raise too_complex("parts", f"more than {MAX_PARTS:,} MIME parts")
        for defect in part.defects:
            if isinstance(defect, email_errors.CloseBoundaryNotFoundDefect):
                raise UnreadableFile("a damaged e-mail message: it ends before its MIME parts do (cut short?)")
            if isinstance(defect, (email_errors.StartBoundaryNotFoundDefect,
                                   email_errors.MultipartInvariantViolationDefect)):
                raise UnreadableFile("a damaged e-mail message: its MIME parts cannot be found")


def _split(part: EmailMessage, depth: int = 0) -> tuple[list[EmailMessage], list[EmailMessage]]:
    """(the parts that are the message's text, in order; its attachments) of a message or multipart."""
    if depth > MAX_MULTIPART_DEPTH:
        raise too_complex("nesting", f"multiparts nested more than {MAX_MULTIPART_DEPTH} deep")
    body = part.get_body(preferencelist=("plain", "html"))
    texts = [body] if body is not None else []
    attachments: list[EmailMessage] = []
    if part.get_content_maintype() != "multipart":
        if body is None:  # a message that is only a file (a scanner's mail, say)
            attachments.append(part)
        return texts, attachments
    for sub in part.iter_attachments():
        if sub.get_content_maintype() == "multipart":
            more_texts, more = _split(sub, depth + 1)
            texts += more_texts
            attachments += more
        elif sub.get_content_type() in ("text/plain", "text/html") and not sub.is_attachment() \
                and not sub.get_filename():
            texts.append(sub)  # text between attachments (a client that puts the signature after them)
        elif sub["content-id"] and not sub.is_attachment() and sub.get_content_maintype() == "image":
            continue  # a picture of the HTML body
        else:
            attachments.append(sub)
    return texts, attachments


def _text_part(part: EmailMessage, subject: str, warnings: list[str]) -> str:
    text = _decoded_text(part)
    if part.get_content_subtype() == "html":
        return _html_text(text, subject, warnings)
    lines, previous = [], ""
    for line in collapse_quotes(text).split("\n"):
        lines.append(_escape_line(line.rstrip(), previous))
        previous = line
    return "\n".join(lines)


def _html_text(html: str, subject: str, warnings: list[str]) -> str:
    from rag.ingest.formats.html import parse_html

    html = _strip_html_quotes(html)
    try:  # a BOM: the characters are UTF-8 now, whatever a <meta charset> in the HTML says
        parsed = parse_html(codecs.BOM_UTF8 + html.encode("utf-8", "replace"), subject or "Message")
    except FileTooComplex:
        raise
    except UnreadableFile as exc:
        if "no text" not in str(exc):  # an HTML body with only pictures has no text: nothing to say
            warnings.append(f"the HTML body could not be read: {exc}")
        return ""
    lines = parsed.body.split("\n")
    if parsed.title == (subject or "Message"):
        lines = lines[1:]  # the heading parse_html made of the subject (the body's title already)
    return demote("\n".join(lines), 1)


def _filename(part: EmailMessage, index: int) -> str:
    try:
        name = part.get_filename() or ""
    except Exception:  # noqa: BLE001 - a broken RFC 2231 parameter
        name = ""
    name = _one_line(PurePath(name.replace("\\", "/")).name, 200) if name else ""
    if name in ("", ".", ".."):
        if part.get_content_type() == "message/rfc822":
            inner = part.get_payload(0) if part.is_multipart() else None
            subject = _header(inner, "subject") if isinstance(inner, EmailMessage) else ""
            return f"{subject or 'message'}.eml"
        import mimetypes

        return f"attachment-{index}{mimetypes.guess_extension(part.get_content_type()) or ''}"
    return name


def _render(message: EmailMessage, level: int, text: _Text, warnings: list[str], heading: str | None) -> None:
    """The message into `text`: `heading` (at `level`) unless None, its header lines, its text, its
    attachments as sections one level down."""
    token = _message_depth.set(_message_depth.get() + 1)
    try:
        if _message_depth.get() > MAX_MESSAGE_DEPTH:
            raise too_complex("nesting", f"messages attached inside messages more than {MAX_MESSAGE_DEPTH} deep")
        if heading is not None:
            text.add(f"{'#' * level} {escape_text(heading)}")
        lines = [f"{name}: {escape_text(value)}" for name, value in
                 (("From", _header(message, "from")), ("To", _header(message, "to")), ("Cc", _header(message, "cc")),
                  ("Date", _header(message, "date"))) if value]
        text.add("  \n".join(lines))
        subject = _header(message, "subject")
        texts, attachments = _split(message)
        for part in texts:
            text.add(demote(_text_part(part, subject, warnings), level - 1) if level > 1
                     else _text_part(part, subject, warnings))
        not_read: list[str] = []
        for index, part in enumerate(attachments, start=1):
            name = _filename(part, index)
            reason = _attachment(part, name, level + 1, text, warnings)
            if reason:
                not_read.append(f"{escape_text(name)} ({reason})")
        if not_read:
            text.add("Attachments not read: " + "; ".join(not_read) + ".")
    finally:
        _message_depth.reset(token)


def _attachment(part: EmailMessage, name: str, level: int, text: _Text, warnings: list[str]) -> str | None:
    """An attachment read into `text` as its own section; else why it was not (a few words)."""
    section = f"{'#' * level} Attachment: {escape_text(name)}"
    if part.get_content_type() == "message/rfc822" and part.is_multipart():
        inner = part.get_payload(0)
        if isinstance(inner, EmailMessage):
            _check_structure(inner)
            text.add(section)
            _render(inner, level, text, warnings, None)
            return None
    suffix = PurePath(name).suffix.lower()
    if suffix not in supported_suffixes() or suffix in INTERNAL_SUFFIXES:
        return f"{part.get_content_type()}, {_size(len(part.get_payload(decode=True) or b''))}: " \
               "a format this service does not read"
    data = part.get_payload(decode=True) or b""
    if not data:
        return "empty"
    try:
        parsed = parse_here(data, name)
    except FileTooComplex as exc:
        if exc.bound == "nesting":  # messages inside messages too deep: the whole file's bound
            raise
        warnings.append(f"attachment {name} could not be read: {exc}")
        return f"could not be read: {exc}"
    except UnreadableFile as exc:
        warnings.append(f"attachment {name} could not be read: {exc}")
        return f"could not be read: {exc}"
    text.add(section)
    text.add(demote(parsed.body, level))
    warnings.extend(f"attachment {name}: {w}" for w in parsed.warnings)
    return None


def _metadata(message: EmailMessage) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for key, name in (("from", "from"), ("to", "to"), ("cc", "cc"), ("message_id", "message-id")):
        value = _header(message, name)
        if value:
            meta[key] = value
    when = _date(message)
    if when is not None:
        meta["date"] = when.isoformat()
    elif _header(message, "date"):
        meta["date"] = _header(message, "date")
    return meta


def parse_eml(data: bytes, fallback_title: str) -> ParsedDocument:
    message = _read_message(data)
    subject = _header(message, "subject")
    title = subject or fallback_title
    text, warnings = _Text(), []
    _render(message, 1, text, warnings, None)
    meta = _metadata(message)
    names = [_filename(p, i) for i, p in enumerate(_split(message)[1], start=1)]
    if names:
        meta["attachments"] = names
    return ParsedDocument(title=title, body=with_title(escape_text(title), text.markdown()), metadata=meta,
                          warnings=warnings)


# ----- a mailbox -----

def mbox_messages(data: bytes) -> list[bytes]:
    """The messages of an mbox file: each starts with a "From " line at the top of the file or after
    an empty line (RFC 4155); mboxrd's `>From ` quoting undone."""
    if len(data) > MAX_MBOX_BYTES:
        raise too_complex("size", f"a mailbox of {_size(len(data))}, more than {_size(MAX_MBOX_BYTES)}")
    if not data.startswith(b"From "):
        raise UnreadableFile('not an mbox mailbox (it does not start with a "From " line)')
    starts: list[tuple[int, int]] = []
    for match in _MBOX_SEPARATOR.finditer(data):
        at = match.start()
        if at == 0 or data[max(0, at - 2):at] == b"\n\n" or data[max(0, at - 4):at] == b"\r\n\r\n":
            starts.append((at, match.end()))
            if len(starts) > MAX_MESSAGES:
                raise too_complex("messages", f"more than {MAX_MESSAGES:,} messages in the mailbox")
    messages = []
    for index, (_, begin) in enumerate(starts):
        end = starts[index + 1][0] if index + 1 < len(starts) else len(data)
        messages.append(_MBOXRD_QUOTED.sub(rb"\1", data[begin:end]))
    return messages


def _thread_subject(subjects: list[str]) -> str:
    bare = {_REPLY_PREFIX.sub("", s).strip().lower() for s in subjects}
    if len(bare) == 1 and "" not in bare:
        first = next(s for s in subjects)
        return _REPLY_PREFIX.sub("", first).strip()
    return ""


def parse_mbox(data: bytes, fallback_title: str) -> ParsedDocument:
    raw = mbox_messages(data)
    if not raw:
        raise UnreadableFile("an mbox mailbox with no messages")
    read: list[tuple[dt.datetime | None, int, EmailMessage | None, str]] = []
    warnings: list[str] = []
    for index, chunk in enumerate(raw, start=1):
        try:
            message = _read_message(chunk)
        except FileTooComplex as exc:
            if exc.bound in ("characters", "messages"):
                raise
            read.append((None, index, None, str(exc)))
            continue
        except UnreadableFile as exc:
            read.append((None, index, None, str(exc)))
            continue
        read.append((_date(message), index, message, ""))
    far = dt.datetime.max.replace(tzinfo=dt.timezone.utc)
    read.sort(key=lambda entry: (entry[0] or far, entry[1]))  # date order; undated ones last, as they came
    messages = [m for _, _, m, _ in read if m is not None]
    title = _thread_subject([_header(m, "subject") for m in messages]) or fallback_title
    text = _Text()
    senders: list[str] = []
    for when, index, message, problem in read:
        if message is None:
            warnings.append(f"message {index} of the mailbox was left out: {problem}")
            text.add(f"## Message {index}\n\n(This message could not be read and was left out: {escape_text(problem)}.)")
            continue
        sender = _header(message, "from")
        if sender and sender not in senders:
            senders.append(sender)
        name = email.utils.parseaddr(sender)[0] or email.utils.parseaddr(sender)[1] or "unknown sender"
        about = ", ".join(p for p in (name, when.strftime("%Y-%m-%d %H:%M") if when else "") if p)
        heading = f"{_header(message, 'subject') or '(no subject)'} ({about})"
        _render(message, 2, text, warnings, heading)
    dates = [when for when, _, m, _ in read if when is not None and m is not None]
    meta: dict[str, Any] = {"messages": len(messages), "from": senders[:50]}
    if dates:
        meta["first_date"], meta["last_date"] = min(dates).isoformat(), max(dates).isoformat()
    return ParsedDocument(title=title, body=with_title(escape_text(title), text.markdown()), metadata=meta,
                          warnings=warnings)
