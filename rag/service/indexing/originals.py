"""Original files: the file a document version was made from, kept byte for byte beside the
Markdown text extracted from it, and documents made from an uploaded file.

A version made from a file (an upload, or an ingested PDF, HTML or Word file) keeps the file in
`document_originals` (rag/store/models.py): its bytes, its name, its media type, its size and its
SHA-256. Its body is still the extracted Markdown, which is what is chunked, searched and cited;
the original is what a reader downloads to see the real thing. A version written as text (the
create_document and update_document tools, Markdown ingest) has none.

The media type is the file name's, from a fixed table (never what a client claims, never the
system's mime.types), so what the API serves back is known in advance.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import quote

from sqlalchemy.orm import Session

from rag.errors import InvalidArgument, NotFound, RagError
from rag.ingest.formats import BINARY_PARSERS, INTERNAL_SUFFIXES, UnreadableFile
from rag.ingest.formats import FileTooComplex as FileTooComplexToParse
from rag.ingest.layout import layout_json
from rag.ingest.parse import ParsedDocument
from rag.ingest.read import parse_bytes
from rag.service.content import tree
from rag.service.activity import recorded
from rag.service.checks import (
    MAX_CONTENT_CHARS,
    MAX_NAME_CHARS,
    content_arg,
    content_hash,
    int_arg,
    metadata_arg,
    name_arg,
    summary_arg,
)
from rag.service.identity.principal import Principal
from rag.service.content.views import CreatedDocument
from rag.store.models import DOCUMENT, DRAFT, DocumentOriginal, DocumentVersion, KnowledgeBase

if TYPE_CHECKING:
    from rag.service.identity.access import Access
    from rag.service.activity import ActivityLog
    from rag.service.content.edits import NodeEdits
    from rag.settings import Settings
    from rag.store.db import Database

log = logging.getLogger(__name__)

OCTET_STREAM = "application/octet-stream"
MEDIA_TYPES = {
    ".pdf": "application/pdf",
    ".html": "text/html",
    ".htm": "text/html",
    ".webpage": "text/html",  # a crawled page (rag/sources/website.py), served as the HTML it was
    ".xhtml": "application/xhtml+xml",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".mdx": "text/markdown",
    ".txt": "text/plain",
    ".text": "text/plain",
    ".rst": "text/x-rst",
}
# Every media type an original can be served with (the API's schema declares them all).
SERVED_MEDIA_TYPES = sorted({*MEDIA_TYPES.values(), OCTET_STREAM})


def media_type_of(filename: str) -> str:
    return MEDIA_TYPES.get(PurePosixPath(filename).suffix.lower(), OCTET_STREAM)


class FileTooLarge(InvalidArgument):
    """An upload over `upload_max_bytes` (HTTP 413)."""

    code = "file_too_large"


def too_large_message(limit: int) -> str:
    return f"the file must be at most {limit} bytes ({limit / (1024 * 1024):.1f} MiB)"


def filename_arg(value: object) -> str:
    """The uploaded file's name, without any directory a client put in it; its suffix picks the
    parser. The rules of a node's name otherwise (no control characters, at most 255 characters)."""
    base = value.replace("\\", "/").rsplit("/", 1)[-1] if isinstance(value, str) else ""
    if not base.strip():
        raise InvalidArgument("the file needs a name with its extension (for example report.pdf)")
    return name_arg(base, "file")


def content_disposition(filename: str) -> str:
    """`attachment` (a browser saves the file, never renders it in the API's origin), with an ASCII
    fallback name and the real one in RFC 5987 form: no quote, backslash or line break gets through."""
    fallback = "".join(ch if 0x20 <= ord(ch) < 0x7F and ch not in '"\\;%' else "_" for ch in filename) or "original"
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename, safe='')}"


def keep_original(session: Session, version_id: int, filename: str, data: bytes) -> DocumentOriginal:
    """Keep `data` as the original file of a version (replacing one it had), in the caller's transaction."""
    row = DocumentOriginal(version_id=version_id, filename=filename, media_type=media_type_of(filename),
                           size=len(data), sha256=content_hash(data), data=data)
    return session.merge(row)


class FileTooComplex(InvalidArgument):
    """A file whose parse passed a bound of memory, time or size (rag/ingest/sandbox.py); HTTP 400
    as any file that cannot be read."""

    code = "file_too_complex"


def upload_caller(principal: Principal) -> str:
    """Whose upload a parse is, for the parse workers' fair share (rag/ingest/sandbox.py): the
    workspace and the token (or the actor, for a caller without one)."""
    who = f"token:{principal.token_id}" if principal.token_id is not None else f"actor:{principal.actor}"
    return f"upload:{principal.workspace_id}:{who}"


def parse_file(data: bytes, filename: str, caller: str = "") -> ParsedDocument:
    """The uploaded file's Markdown text, or InvalidArgument with the parser's reason, naming the
    file. Parsed as `caller`'s, under an upload's OCR budget."""
    return parsed_file(lambda: parse_bytes(data, filename, caller=caller, upload=True), filename)


async def parse_file_async(data: bytes, filename: str, caller: str = "") -> ParsedDocument | InvalidArgument:
    """parse_file awaited, without holding the caller's thread: the document, or the refusal
    (returned, for upload_document to raise in its recorded call). ParsingStopped (the service is
    stopping) is raised."""
    from rag.ingest.sandbox import shared_pool

    if PurePosixPath(filename).suffix.lower() not in BINARY_PARSERS:  # text: parsed here, it is cheap
        return _refusal(lambda: parse_file(data, filename, caller))
    try:
        parsed = await shared_pool().parse_async(data, filename, caller=caller, upload=True)
    except Exception as exc:  # noqa: BLE001 - mapped as parse_file maps it
        return _refusal(functools.partial(parsed_file, functools.partial(_reraise, exc), filename))
    return _refusal(lambda: parsed_file(lambda: parsed, filename))


def _reraise(exc: BaseException) -> ParsedDocument:
    raise exc


def _refusal(parse: Callable[[], ParsedDocument]) -> ParsedDocument | InvalidArgument:
    try:
        return parse()
    except InvalidArgument as exc:
        return exc


def parsed_file(parse: Callable[[], ParsedDocument], filename: str) -> ParsedDocument:
    """What `parse` made of the file, or InvalidArgument (FileTooComplex past a bound) naming it."""
    try:
        parsed = parse()
    except RagError:
        raise
    except FileTooComplexToParse as exc:
        raise FileTooComplex(f"{filename}: {exc}") from None
    except UnreadableFile as exc:
        raise InvalidArgument(f"{filename}: {exc}") from None
    except Exception:  # noqa: BLE001 - a parser's own bug must not pass for a server error on bad input
        log.exception("parsing an uploaded file failed")
        raise InvalidArgument(f"{filename}: the file could not be read (damaged, or not what its extension says)") from None
    if len(parsed.body) > MAX_CONTENT_CHARS:
        raise InvalidArgument(f"{filename}: its text is longer than {MAX_CONTENT_CHARS} characters, a document's limit")
    return parsed


@dataclass
class OriginalFile:
    """A version's original file, for download."""

    node_id: str
    version_number: int
    filename: str
    media_type: str
    size: int
    sha256: str
    data: bytes


class Originals:
    """Documents made from uploaded files, and the original files of versions."""

    def __init__(self, db: Database, settings: Settings, access: Access, activity: ActivityLog,
                 edits: NodeEdits) -> None:
        self.db = db
        self.settings = settings
        self.access = access
        self.activity = activity
        self.edits = edits

    @recorded("upload_document", detail=("parent_id", "publish"), after=lambda made: {"version_number": 1})
    def upload_document(self, principal: Principal, filename: str, data: bytes, parent_id: str | None = None,
                        name: str | None = None, summary: str | None = None,
                        metadata: dict[str, Any] | None = None, publish: bool = False,
                        parsed: ParsedDocument | InvalidArgument | None = None) -> CreatedDocument:
        """A new document made from a file: its text (Markdown) is version 1, a draft as with
        create_document (published at once with `publish`), and the file is kept as that version's
        original. A file that cannot be read is refused with nothing written. `parsed`: the
        outcome of parse_file_async, when the caller parsed the file already (the HTTP endpoint,
        which waits for the parse without holding a thread; check_upload before it)."""
        filename = self.check_upload(principal, filename, data)
        summary, metadata = summary_arg(summary), metadata_arg(metadata)
        if isinstance(parsed, InvalidArgument):
            raise parsed
        parsed = parsed if parsed is not None else parse_file(data, filename, upload_caller(principal))
        name = name_arg(name if name is not None else parsed.title[:MAX_NAME_CHARS], "document")
        body = content_arg(parsed.body)
        with self.db.session() as session:
            parent = self.edits._parent_for_new(session, principal, parent_id, name)
            node = self.edits._add_node(session, principal, parent, DOCUMENT, name, summary,
                                        metadata if metadata is not None else (parsed.metadata or None))
            kb = session.get(KnowledgeBase, parent.kb_id)
            node.source_id = f"kb:{principal.workspace_id}:{kb.name}:{node.id}"
            version = DocumentVersion(node_id=node.id, number=1, body=body, content_hash=content_hash(body),
                                      pages=layout_json(parsed))
            session.add(version)
            session.flush()
            keep_original(session, version.id, filename, data)
        made = CreatedDocument(node.id, node.name, node.parent_id, node.kb_id, 1, DRAFT)
        if publish is True:
            made.status = self.edits.publish_document_version(principal, node.id, 1).status
        return made

    def check_upload(self, principal: Principal, filename: str, data: bytes) -> str:
        """What upload_document refuses before it reads the file (the role, the name, an internal
        suffix of rag/ingest/formats, the size): the file's name as kept."""
        self.access.writer(principal)
        filename = filename_arg(filename)
        suffix = PurePosixPath(filename).suffix.lower()
        if suffix in INTERNAL_SUFFIXES:  # a connector's name for its bytes (a sitemap, a page's links): no document
            raise InvalidArgument(f"{filename}: an unsupported file type ({suffix})")
        limit = self.settings.upload_max_bytes
        if len(data) > limit:
            raise FileTooLarge(too_large_message(limit))
        return filename

    @recorded("get_document_original", target="node_id", detail=("version_number",))
    def get_document_original(self, principal: Principal, node_id: str, version_number: int) -> OriginalFile:
        """The file a version was made from, under the same rules as reading that version."""
        self.access.reader(principal)
        number = int_arg(version_number, "version_number", 1)
        with self.db.session() as session:
            node = self.access.typed(session, principal, node_id, DOCUMENT)
            version = tree.version(session, node, number)
            row = session.get(DocumentOriginal, version.id)
            if row is None:
                raise NotFound(f"version {number} has no original file (it was written as text)")
            return OriginalFile(node.id, number, row.filename, row.media_type, row.size, row.sha256, row.data)
