"""Documents from files: a multipart upload makes a document of a PDF, HTML, Word, Markdown or text
file, and a version's original file can be downloaded again.

The service (rag/service/originals.py) checks the role, the scopes and the folder access, bounds
the file's size, parses it and keeps it; these routes only translate. The whole request is bounded
before it is read (BodyLimit, rag/api/limits.py, with the upload limit for this path).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, File, Form, UploadFile
from fastapi.responses import JSONResponse, Response

from rag.api.auth import Caller, Service
from rag.api.errors import ERROR_RESPONSES, error_response
from rag.api.routes.nodes import DocumentId
from rag.api.routes.versions import ReadNumber
from rag.service.originals import SERVED_MEDIA_TYPES, FileTooLarge, content_disposition, too_large_message
from rag.service.views import CreatedDocument
from rag.settings import Settings

UPLOAD_PATH = "/v1/uploads"
# Room for the multipart framing and the form's small fields around the file itself.
FORM_OVERHEAD_BYTES = 64 * 1024

router = APIRouter(prefix="/v1", tags=["folders and documents"], responses=ERROR_RESPONSES)


def body_limits(settings: Settings) -> dict[str, tuple[int, str, str]]:
    """BodyLimit's limit for the upload path: the file's limit and the form around it."""
    limit = settings.upload_max_bytes
    return {UPLOAD_PATH: (limit + FORM_OVERHEAD_BYTES, too_large_message(limit), FileTooLarge.code)}


@router.post(UPLOAD_PATH.removeprefix("/v1"), response_model=CreatedDocument, status_code=201,
             operation_id="upload_document", summary="Create a document from a file (multipart upload)")
def upload_document(
    svc: Service,
    principal: Caller,
    file: Annotated[UploadFile, File(description="The file: .pdf, .html, .docx, .md or .txt (its name's "
                                                 "extension says which).")],
    parent_id: Annotated[str | None, Form(description="The folder it goes into; default as for create_document.")] = None,
    name: Annotated[str | None, Form(description="The document's name; default: the file's title.")] = None,
    summary: Annotated[str | None, Form(description="An optional summary (at most 4,000 characters).")] = None,
    publish: Annotated[bool, Form(description="Publish version 1 at once (as publish_document_version).")] = False,
) -> JSONResponse:
    """Version 1 is the file's text as Markdown, a draft unless `publish` is true; the file itself
    is kept as that version's original. A file the parser cannot read is refused (400, naming the
    file), and nothing is written."""
    limit = svc.settings.upload_max_bytes
    data = file.file.read(limit + 1)  # one byte past the limit is enough to refuse it
    try:
        made = svc.upload_document(principal, file.filename, data, parent_id, name, summary, None, publish)
    except FileTooLarge as exc:
        return error_response(413, exc.message, exc.code)
    return JSONResponse(made.payload(), status_code=201)


_ORIGINAL_RESPONSE = {
    200: {
        "description": "The file, byte for byte, as a download (`Content-Disposition: attachment`).",
        "content": {media_type: {"schema": {"type": "string", "format": "binary"}} for media_type in SERVED_MEDIA_TYPES},
        "headers": {"Content-Disposition": {"schema": {"type": "string"}, "description": "attachment; the file's name"}},
    }
}


@router.get("/documents/{node_id}/versions/{version_number}/original", response_class=Response,
            responses=_ORIGINAL_RESPONSE, operation_id="get_document_original",
            summary="The file a version was made from")
def get_document_original(node_id: DocumentId, version_number: ReadNumber, svc: Service, principal: Caller) -> Response:
    """Whatever the version's status, as get_document_version reads it; 404 for a version written
    as text (no original) as for one outside the token's folders."""
    original = svc.get_document_original(principal, node_id, version_number)
    headers = {
        "Content-Disposition": content_disposition(original.filename),
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "sandbox",  # an HTML original opened anyway runs no script here
        "ETag": f'"{original.sha256}"',
    }
    return Response(original.data, media_type=original.media_type, headers=headers)
