"""Documents from files: a multipart upload makes a document of a PDF, HTML, Word, Markdown or text
file, and a version's original file can be downloaded again.

The service (rag/service/indexing/originals.py) checks the role, the scopes and the folder access, bounds
the file's size, parses it and keeps it; these routes only translate. The whole request is bounded
before it is read (BodyLimit, rag/api/limits.py, with the upload limit for this path).

The upload endpoint is async: the file is parsed in a worker process (rag/ingest/sandbox.py), and
the request waits for it in the event loop, holding none of the threads that serve the other
requests (44 uploads parsing at once once held every thread: a listing then took 11 s, issue 27).
One token has at most `RAG_UPLOADS__PER_TOKEN` uploads in progress (another is 429,
`too_many_uploads`); all of them share the parse workers, as many at once as there are workers,
each token's files in a queue of its own served in turn, one token holding at most its share of
the workers, and an upload's OCR under its own budget (`RAG_PARSING__UPLOAD_OCR_SECONDS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException

from rag.api.auth import Caller, Service
from rag.api.concurrency import KeyedLimiter, acquire_async, caller_key
from rag.api.errors import ERROR_RESPONSES, ErrorBody, error_response
from rag.api.routes.nodes import DocumentId
from rag.api.routes.versions import ReadNumber
from rag.errors import RagError, TooManyRequests
from rag.service.indexing.originals import (
    SERVED_MEDIA_TYPES,
    FileTooLarge,
    content_disposition,
    parse_file_async,
    too_large_message,
    upload_caller,
)
from rag.service.content.views import CreatedDocument
from rag.settings import Settings

UPLOAD_PATH = "/v1/uploads"
# Room for the multipart framing and the form's small fields around the file itself.
FORM_OVERHEAD_BYTES = 64 * 1024

router = APIRouter(prefix="/v1", tags=["folders and documents"], responses=ERROR_RESPONSES)


def body_limits(settings: Settings) -> dict[str, tuple[int, str, str]]:
    """BodyLimit's limit for the upload path: the file's limit and the form around it."""
    limit = settings.upload_max_bytes
    return {UPLOAD_PATH: (limit + FORM_OVERHEAD_BYTES, too_large_message(limit), FileTooLarge.code)}


class UploadFields(BaseModel):
    """The form's fields beside the file."""

    model_config = ConfigDict(extra="forbid")
    parent_id: str | None = Field(None, description="The folder it goes into; default as for create_document.")
    name: str | None = Field(None, description="The document's name; default: the file's title.")
    summary: str | None = Field(None, description="An optional summary (at most 4,000 characters).")
    publish: bool = Field(False, description="Publish version 1 at once (as publish_document_version).")


_FORM_SCHEMA = {
    "type": "object",
    "required": ["file"],
    "properties": {
        "file": {"type": "string", "format": "binary",
                 "description": "The file: .pdf, .html, .docx, .md or .txt (its name's extension says which)."},
        **UploadFields.model_json_schema()["properties"],
    },
    "additionalProperties": False,
}


class TooManyUploads(TooManyRequests):
    code = "too_many_uploads"


def upload_limiter(svc: Service) -> KeyedLimiter:
    """Uploads in progress per token (`RAG_UPLOADS__PER_TOKEN`)."""
    return KeyedLimiter(svc.access.slots, "upload", svc.settings.uploads.per_token, TooManyUploads, "uploads")


def upload_quota(svc: Service, principal: Caller) -> None:
    """One upload counted against the caller's rate (429 `rate_limited` over it), before its body is read."""
    svc.access.take(principal, "upload")


@dataclass
class UploadForm:
    file: UploadFile
    fields: UploadFields


async def read_upload_form(request: Request) -> UploadForm:
    """The multipart form, read only once the caller is known: FastAPI reads a File() or Form()
    body before it resolves any dependency, so an anonymous client could make the server take in
    a whole upload before its 401. The endpoint declares the caller first, then this."""
    try:
        form = await request.form(max_files=1, max_fields=len(UploadFields.model_fields) + 1)
    except (MultiPartException, HTTPException) as exc:  # Starlette turns the first into the second
        reason = exc.message if isinstance(exc, MultiPartException) else exc.detail
        raise RequestValidationError(
            [{"type": "value_error", "loc": ("body",), "msg": f"the multipart form cannot be read: {reason}"}]
        ) from None
    file = form.get("file")
    values = {key: value for key, value in form.multi_items() if key != "file"}
    errors = []
    if not isinstance(file, UploadFile):
        errors.append({"type": "missing", "loc": ("body", "file"), "msg": "Field required"})
    try:
        fields = UploadFields.model_validate(values)
    except ValidationError as exc:
        errors += [{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False)]
    if errors:
        raise RequestValidationError(errors)
    return UploadForm(file, fields)


@router.post(UPLOAD_PATH.removeprefix("/v1"), response_model=CreatedDocument, status_code=201,
             operation_id="upload_document", summary="Create a document from a file (multipart upload)",
             openapi_extra={"requestBody": {"required": True,
                                            "content": {"multipart/form-data": {"schema": _FORM_SCHEMA}}}},
             responses={429: {"model": ErrorBody, "description": "This token already has as many uploads in "
                                                                 "progress as it may (`too_many_uploads`), or made "
                                                                 "more than its rate allows (`rate_limited`)."}})
async def upload_document(
    svc: Service,
    principal: Caller,  # before the form: an unknown caller is refused before the body is read
    _quota: Annotated[None, Depends(upload_quota)],  # and a caller over its rate too (rag/service/quotas.py)
    form: Annotated[UploadForm, Depends(read_upload_form)],
) -> JSONResponse:
    """Version 1 is the file's text as Markdown, a draft unless `publish` is true; the file itself
    is kept as that version's original. A file the parser cannot read is refused (400, naming the
    file; `file_too_complex` when reading it would pass a bound of memory, time or size), and
    nothing is written. 429 (`too_many_uploads`) while this token has as many uploads in progress
    as it may."""
    limit = svc.settings.upload_max_bytes
    try:
        data = await form.file.read(limit + 1)  # one byte past the limit is enough to refuse it
    finally:
        await form.file.close()  # a spooled temporary file: gone now, not when it is collected
    f = form.fields
    try:
        filename = svc.originals.check_upload(principal, form.file.filename or "", data)
    except RagError:
        parsed = None  # upload_document refuses it again, in its recorded call
    else:
        release = await acquire_async(upload_limiter(svc), caller_key(principal))
        try:
            parsed = await parse_file_async(data, filename, upload_caller(principal))
        finally:
            release()
    try:
        made = await run_in_threadpool(svc.upload_document, principal, form.file.filename, data, f.parent_id, f.name,
                                       f.summary, None, f.publish, parsed)
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
