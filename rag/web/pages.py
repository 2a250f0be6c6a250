"""The knowledge base editor's pages: server-rendered (Jinja2), one small script for what must not
reload the page (an answer streaming in, a publish turning `published`).

Every page calls the same service methods as the HTTP API, with the principal of the person's token;
the service decides what may be seen and done (and that the editor is for people: an agent's token
opens no session), and a refusal shows the service's own message. No rule about access is written
here: the only check of the editor's own is the CSRF token every write carries.
"""

from __future__ import annotations

import json
import logging
import secrets
from typing import Any, Callable

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from rag.api.auth import get_service
from rag.api.errors import status_of
from rag.errors import InvalidArgument, RagError
from rag.service import KnowledgeService, Principal
from rag.service.identity.sessions import SIGNED_OUT
from rag.web import asking, sources
from rag.web.caller import COOKIE, CSRF_REFUSED, HERE, SIGNIN_COOKIE, Caller, SignInNeeded, page, secure_cookie
from rag.web.markdown import render, render_excerpt

log = logging.getLogger("rag.web")

router = APIRouter(include_in_schema=False)


def install(app: Any) -> None:
    """The editor at `/`, its assets at `/static`."""
    from fastapi.staticfiles import StaticFiles

    app.include_router(router)
    app.include_router(asking.router)
    app.include_router(sources.router)
    app.mount("/static", StaticFiles(directory=str(HERE / "static")), name="web-static")

    @app.exception_handler(SignInNeeded)
    async def _sign_in(request: Request, exc: SignInNeeded) -> Response:
        if request.method == "GET" and not request.url.path.endswith(".json"):
            return RedirectResponse("/signin", 303)
        return JSONResponse({"error": {"message": SIGNED_OUT, "type": "authentication_error",
                                       "code": "unauthenticated", "param": None}}, 401)


# ----- signing in and out -----

@router.get("/signin")
def signin_form(request: Request) -> HTMLResponse:
    return _signin_again(request, None)


@router.post("/signin")
def signin(request: Request, token: str = Form(""), csrf: str = Form("")) -> Response:
    expected = request.cookies.get(SIGNIN_COOKIE) or ""
    if not expected or not secrets.compare_digest(expected.encode(), csrf.encode()):
        return _signin_again(request, CSRF_REFUSED, 403)
    svc = get_service(request)
    try:
        opened = svc.open_session(token.strip())  # the service refuses an agent's token
    except RagError as exc:
        return _signin_again(request, exc.message, 401)
    svc.close_session(request.cookies.get(COOKIE))  # a new id at each sign-in
    response = RedirectResponse("/", 303)
    response.set_cookie(COOKIE, opened.id, httponly=True, samesite="strict", secure=secure_cookie(request), path="/")
    response.delete_cookie(SIGNIN_COOKIE, path="/signin")
    return response


def _signin_again(request: Request, error: str | None, status: int = 200) -> HTMLResponse:
    """The sign-in form, with its own CSRF value in a short-lived cookie (there is no session yet)."""
    value = secrets.token_urlsafe(24)
    response = page(request, "signin.html", {"signin_csrf": value, "error": error, "me": None, "flashes": []}, status)
    response.set_cookie(SIGNIN_COOKIE, value, max_age=600, httponly=True, samesite="strict",
                        secure=secure_cookie(request), path="/signin")
    return response


@router.post("/signout")
def signout(request: Request, csrf: str = Form("")) -> Response:
    caller = Caller(request)
    if not caller.session.csrf_ok(csrf):
        return caller.show("error.html", 403, message=CSRF_REFUSED)
    caller.svc.close_session(caller.session.id)
    response = RedirectResponse("/signin", 303)
    response.delete_cookie(COOKIE, path="/")
    return response


# ----- reading -----

@router.get("/")
def home(request: Request) -> HTMLResponse:
    caller = Caller(request)
    try:
        tree = caller.svc.get_folder_tree(caller.principal)
    except RagError as exc:
        return caller.refused(exc)
    return caller.show("home.html", tree=tree)


@router.get("/folders/{node_id}")
def folder(request: Request, node_id: str) -> HTMLResponse:
    caller = Caller(request)
    svc, me = caller.svc, caller.principal
    try:
        children = svc.list_children(me, node_id)
        here = svc.get_folder_tree(me, node_id).roots[0]
    except RagError as exc:
        return caller.refused(exc)
    info = svc.node_info(me, node_id)
    return caller.show("folder.html", folder=here, info=info, children=children, folders=_folders(svc, me),
                       activity=_activity(svc, me, node_id))


@router.get("/documents/{node_id}")
def document(request: Request, node_id: str, version: int | None = None, hl: str | None = None) -> HTMLResponse:
    caller = Caller(request)
    svc, me = caller.svc, caller.principal
    try:
        versions = svc.get_document_versions(me, node_id)
        authors = svc.version_authors(me, node_id)
        shown_number = version or _default_version(versions)
        shown = svc.get_document_version(me, node_id, shown_number)
    except RagError as exc:
        return caller.refused(exc)
    span = _span(hl)
    excerpt = render_excerpt(shown.content, span) if span else None
    info = svc.node_info(me, node_id)
    newest = max(versions, key=lambda v: v.version_number)
    edit_body = svc.get_document_version(me, node_id, newest.version_number).content
    return caller.show(
        "document.html", doc=shown, info=info, versions=versions, authors=authors, rendered=render(shown.content, span),
        span=span, excerpt=excerpt, edit_body=edit_body, folders=_folders(svc, me),
        activity=_activity(svc, me, node_id), published=next((v for v in versions if v.status == "published"), None),
    )


@router.get("/documents/{node_id}/diff")
def diff(request: Request, node_id: str, from_version: int | None = None, to_version: int | None = None) -> HTMLResponse:
    caller = Caller(request)
    try:
        versions = caller.svc.get_document_versions(caller.principal, node_id)
        numbers = sorted(v.version_number for v in versions)
        published = next((v.version_number for v in versions if v.status == "published"), None)
        to_version = to_version or numbers[-1]
        from_version = from_version or (published if published and published != to_version else
                                        max([n for n in numbers if n < to_version] or [to_version]))
        found = caller.svc.diff_versions(caller.principal, node_id, from_version, to_version)
        name = caller.svc.get_document_version(caller.principal, node_id, to_version).name
    except RagError as exc:
        return caller.refused(exc)
    return caller.show("diff.html", diff=found, versions=versions, name=name)


@router.get("/documents/{node_id}/status.json")
def status(request: Request, node_id: str) -> JSONResponse:
    """What the document page polls while a version is publishing."""
    caller = Caller(request)
    try:
        versions = caller.svc.get_document_versions(caller.principal, node_id)
    except RagError as exc:
        return JSONResponse({"error": {"message": exc.message}}, status_of(exc), headers={"Cache-Control": "no-store"})
    return JSONResponse({"versions": [{"version_number": v.version_number, "status": v.status} for v in versions]},
                        headers={"Cache-Control": "no-store"})


@router.get("/drafts")
def drafts(request: Request, kb: str | None = None) -> HTMLResponse:
    caller = Caller(request)
    try:
        found = caller.svc.list_drafts(caller.principal, kb)
    except RagError as exc:
        return caller.refused(exc)
    return caller.show("drafts.html", drafts=found, kb=kb or "default")


# ----- writing: each form posts here, and the page it came from shows what happened -----

@router.post("/folders/{node_id}/folders")
def create_folder(request: Request, node_id: str, name: str = Form(""), csrf: str = Form("")) -> Response:
    caller = Caller(request)
    return caller.act(csrf, f"/folders/{node_id}", lambda: caller.svc.create_folder(caller.principal, node_id, name),
                      lambda made: f"/folders/{made.node_id}")


@router.post("/folders/{node_id}/documents")
def create_document(request: Request, node_id: str, name: str = Form(""), content: str = Form(""),
                    csrf: str = Form("")) -> Response:
    caller = Caller(request)
    return caller.act(csrf, f"/folders/{node_id}",
                      lambda: caller.svc.create_document(caller.principal, node_id, name, content),
                      lambda made: f"/documents/{made.node_id}")


@router.post("/nodes/{node_id}/{verb}")
def node_action(request: Request, node_id: str, verb: str, kind: str = Form(""), name: str = Form(""),
                parent_id: str = Form(""), summary: str = Form(""), metadata: str = Form(""),
                csrf: str = Form("")) -> Response:
    """Rename, move, delete, set the summary or the metadata of a folder (`kind=folder`) or a document."""
    caller = Caller(request)
    svc, me = caller.svc, caller.principal
    folder = kind == "folder"
    actions: dict[str, tuple[Callable[[], Any], Callable[[Any], str]]] = {
        "rename": (lambda: (svc.rename_folder if folder else svc.rename_document)(me, node_id, name),
                   lambda info: f"renamed to {info.name!r}"),
        "move": (lambda: svc.move_node(me, node_id, parent_id), lambda _: "moved"),
        "delete": (lambda: (svc.delete_folder if folder else svc.delete_document)(me, node_id),
                   lambda gone: caller.flash_then("ok", f"deleted ({gone.documents} documents, {gone.folders} "
                                                  "folders)", "/")),
        "summary": (lambda: svc.set_summary(me, node_id, summary), lambda _: "summary saved"),
        "metadata": (lambda: svc.set_metadata(me, node_id, _json_object(metadata)), lambda _: "metadata saved"),
    }
    if verb not in actions:
        return caller.show("error.html", 404, message="not found")
    return caller.act(csrf, _page_of(kind, node_id), *actions[verb])


@router.post("/documents/{node_id}/draft")
def write_draft(request: Request, node_id: str, content: str = Form(""), csrf: str = Form("")) -> Response:
    caller = Caller(request)
    return caller.act(csrf, f"/documents/{node_id}", lambda: caller.svc.update_document(caller.principal, node_id, content),
                      lambda made: caller.flash_then("ok", f"saved as draft version {made.version_number}",
                                                     f"/documents/{node_id}?version={made.version_number}"))


@router.post("/documents/{node_id}/versions/{number}/{verb}")
def publish(request: Request, node_id: str, number: int, verb: str, csrf: str = Form("")) -> Response:
    """Publish a draft, or roll back to an archived version. The page's script posts with
    `Accept: application/json` and polls status.json; without it the form reloads the page."""
    caller = Caller(request)
    if verb not in ("publish", "rollback"):
        return caller.show("error.html", 404, message="not found")
    op = caller.svc.publish_document_version if verb == "publish" else caller.svc.rollback_document_version
    if "application/json" not in (request.headers.get("accept") or ""):
        return caller.act(csrf, f"/documents/{node_id}", lambda: op(caller.principal, node_id, number),
                          lambda info: f"version {number}: {info.status}")
    try:
        caller.check_csrf(request.headers.get("x-csrf-token") or csrf)
        info = op(caller.principal, node_id, number)
    except RagError as exc:
        return JSONResponse({"error": {"message": exc.message}}, status_of(exc))
    return JSONResponse({"version_number": info.version_number, "status": info.status})


# ----- helpers -----

def _page_of(kind: str, node_id: str) -> str:
    return f"/folders/{node_id}" if kind == "folder" else f"/documents/{node_id}"


def _json_object(text: str) -> dict[str, Any] | None:
    """The metadata form's JSON: an object, or empty (null) to remove it all."""
    if not text.strip() or text.strip() == "null":
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise InvalidArgument(f"the metadata is not valid JSON: {exc.args[0].split(':')[0]}") from None
    if not isinstance(value, dict):
        raise InvalidArgument("the metadata must be a JSON object ({…}), or empty to remove it")
    return value


def _span(hl: str | None) -> tuple[int, int] | None:
    if not hl:
        return None
    start, _, end = hl.partition("-")
    if not (start.isdigit() and end.isdigit()) or len(hl) > 24:
        return None
    return int(start), int(end)


def _default_version(versions: list[Any]) -> int:
    """The published version, else the newest."""
    published = [v.version_number for v in versions if v.status == "published"]
    return published[0] if published else max(v.version_number for v in versions)


def _folders(svc: KnowledgeService, me: Principal) -> list[tuple[str, str]]:
    """(id, path) of every folder the caller sees: where a node can be moved."""
    try:
        tree = svc.get_folder_tree(me)
    except RagError:
        return []
    found: list[tuple[str, str]] = []

    def walk(node: Any, path: str) -> None:
        here = f"{path}/{node.name}" if path else node.name
        found.append((node.node_id, here))
        for child in node.children or []:
            if child.kind == "folder":
                walk(child, here)

    for root in tree.roots:
        walk(root, "")
    return found


def _activity(svc: KnowledgeService, me: Principal, node_id: str) -> Any:
    """The node's history and citation count, for editors and admins; None for anyone else."""
    try:
        return svc.document_activity(me, node_id, 50)
    except RagError:
        return None

