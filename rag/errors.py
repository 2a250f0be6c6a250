"""One error hierarchy, mapped once per surface (CLI exit codes, HTTP statuses, MCP tool errors).

The message of a RagError is written for the caller: it never carries a stack trace, a database
message or the query text. Anything else that escapes is logged in full and shown generically.
"""

from __future__ import annotations


class RagError(Exception):
    """Base class: `str(err)` is safe to show to the caller."""

    code = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFound(RagError):
    code = "not_found"


class InvalidArgument(RagError):
    code = "invalid_argument"


class AlreadyExists(InvalidArgument):
    code = "already_exists"


class PermissionDenied(RagError):
    code = "permission_denied"


class Unauthenticated(PermissionDenied):
    """No valid credentials: a token that is unknown, revoked or expired (HTTP 401, not 403)."""

    code = "unauthenticated"


class Conflict(RagError):
    code = "conflict"


class StoreLocked(RagError):
    """The embedded store belongs to another process."""

    code = "store_locked"


class Unavailable(RagError):
    """A backend (database, vector store, model) could not be reached."""

    code = "unavailable"
