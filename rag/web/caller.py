"""What every page of the editor stands on: the templates, the security headers and cookies, and
`Caller`, the signed-in person on a request (their session, the service, their token's principal),
through which each page reads, writes and shows the service's own refusals (rag/web/pages.py,
rag/web/asking.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from rag.api.auth import get_service
from rag.api.errors import status_of
from rag.errors import PermissionDenied, RagError, Unauthenticated
from rag.service import KnowledgeService, Principal
from rag.service.identity.sessions import OpenSession
from rag.service.identity.tokens import is_agent_actor

HERE = Path(__file__).parent
templates = Jinja2Templates(directory=str(HERE / "templates"))
templates.env.globals["is_agent_actor"] = is_agent_actor

# Nothing but the editor's own script and style; no inline script, no frames, forms post here only.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY", "Cache-Control": "no-store",
}
SIGNIN_COOKIE = "rag_signin"  # the sign-in form's own CSRF value (there is no session yet)
COOKIE = "rag_session"  # the session's random id: HttpOnly, SameSite=Strict
CSRF_REFUSED = "the form's CSRF token is missing or wrong; reload the page and try again"


def original_link(url: object) -> str | None:
    """The URL of a document's original when a page may make it a link: http or https with a host,
    and nothing a browser would read differently from what is checked here (no space, no control
    character). Anything else (`javascript:`, `file:`, `data:`, a bare path) is shown as text only:
    the URL came from a source, so it is untrusted."""
    if not isinstance(url, str) or not url or len(url) > 2000:
        return None
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in url):
        return None
    try:
        parts = urlsplit(url)
    except ValueError:  # an invalid IPv6 host, for example
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return None
    return url


templates.env.filters["original_link"] = original_link


class SignInNeeded(Exception):
    """No session (or its token no longer works): the page sends the browser to sign in."""


def secure_cookie(request: Request) -> bool:
    return request.url.scheme == "https"


def page(request: Request, name: str, context: dict[str, Any], status: int = 200) -> HTMLResponse:
    response = templates.TemplateResponse(request, name, context, status_code=status)
    response.headers.update(SECURITY_HEADERS)
    return response


class Caller:
    """The signed-in person on this request: the session, the service, and the token's principal."""

    def __init__(self, request: Request) -> None:
        self.request = request
        self.svc: KnowledgeService = get_service(request)
        try:
            self.session: OpenSession = self.svc.editor_session(request.cookies.get(COOKIE))
        except Unauthenticated:  # none, over, or its token revoked or expired since
            raise SignInNeeded() from None
        self.principal: Principal = self.session.principal

    def context(self, **more: Any) -> dict[str, Any]:
        return {"me": self.principal, "csrf": self.session.csrf, "flashes": self.svc.take_flashes(self.session),
                "kbs": self._kbs(), **more}

    def _kbs(self) -> list[Any]:
        try:
            return self.svc.knowledge_bases(self.principal)
        except RagError:
            return []

    def show(self, template: str, status: int = 200, **more: Any) -> HTMLResponse:
        return page(self.request, template, self.context(**more), status)

    def refused(self, exc: RagError) -> HTMLResponse:
        return self.show("error.html", status_of(exc), message=exc.message)

    def check_csrf(self, sent: str | None) -> None:
        if not self.session.csrf_ok(sent):
            raise PermissionDenied(CSRF_REFUSED)

    def act(self, csrf: str | None, back: str, action: Callable[[], Any], done: Callable[[Any], str]) -> Response:
        """A form's write: checked for CSRF, done through the service (`action`), then `done(result)`:
        a path to go to, or a message to show on `back`. A refusal shows the service's own message."""
        try:
            self.check_csrf(csrf)
            result = action()
        except RagError as exc:
            if exc.message == CSRF_REFUSED:
                return self.show("error.html", 403, message=exc.message)
            self.flash("error", exc.message)
            return RedirectResponse(back, 303)
        after = done(result)
        if after.startswith("/"):
            return RedirectResponse(after, 303)
        self.flash("ok", after)
        return RedirectResponse(back, 303)

    def flash(self, kind: str, message: str) -> None:
        self.svc.flash(self.session.id, kind, message)

    def flash_then(self, kind: str, message: str, path: str) -> str:
        self.flash(kind, message)
        return path
