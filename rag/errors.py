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


class Busy(RagError):
    """The thing is in use by a job that runs once at a time (a source's sync)."""

    code = "busy"


class PermissionDenied(RagError):
    code = "permission_denied"


class Unauthenticated(PermissionDenied):
    """No valid credentials: a token that is unknown, revoked or expired (HTTP 401, not 403)."""

    code = "unauthenticated"


class TooManyRequests(RagError):
    """A caller over one of its limits (calls in progress at once); HTTP 429. Try again later."""

    code = "too_many_requests"


class StoreLocked(RagError):
    """The embedded store belongs to another process."""

    code = "store_locked"


class Unavailable(RagError):
    """A backend (database, vector store, model) could not be reached."""

    code = "unavailable"


class StorageFull(Unavailable):
    """A write failed because the disk is full or refuses to grow a file (HTTP 507); reads still work."""

    code = "storage_full"


STORAGE_FULL = "the store cannot write: the disk is full"

# errno values of a disk that cannot take more: no space, a file past the process's size limit
# (RLIMIT_FSIZE), a quota.
_FULL_ERRNOS = frozenset({28, 27, 122})  # ENOSPC, EFBIG, EDQUOT
_SQLITE_FULL, _SQLITE_IOERR = 13, 10
# SQLite reports a write the OS refused (EFBIG among them) as one of these I/O errors.
_SQLITE_WRITE_ERRORS = frozenset({10 | 3 << 8, 10 | 4 << 8, 10 | 6 << 8})  # IOERR_WRITE, _FSYNC, _TRUNCATE
# How engines that are not Python (tantivy, Chroma) word the same failures.
_FULL_WORDS = ("no space left on device", "file too large", "disk quota exceeded", "database or disk is full",
               "os error 28", "os error 27", "os error 122")


def is_storage_full(exc: BaseException | None) -> bool:
    """True when `exc`, or an error it wraps, is a write refused for lack of space."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
            return True
        code = getattr(exc, "sqlite_errorcode", None)
        if code == _SQLITE_FULL or code in _SQLITE_WRITE_ERRORS:
            return True
        if getattr(exc, "sqlstate", None) == "53100":  # PostgreSQL's disk_full
            return True
        if any(words in str(exc).lower() for words in _FULL_WORDS):
            return True
        exc = getattr(exc, "orig", None) or exc.__cause__ or exc.__context__  # SQLAlchemy keeps the driver's as orig
    return False
