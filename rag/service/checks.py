"""Argument checks the service makes itself, whatever a surface's schema already checked.

Each raises InvalidArgument with a message that names the argument (and the bound it broke).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from rag.errors import InvalidArgument

MAX_NAME_CHARS = 255
MAX_SUMMARY_CHARS = 4000
MAX_METADATA_CHARS = 65_536  # serialised as JSON
MAX_CONTENT_CHARS = 2_000_000


def name_key(name: str) -> str:
    """What makes two sibling names the same: case and surrounding space do not count."""
    return name.strip().casefold()


def content_hash(data: bytes | str) -> str:
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def text_arg(value: object, name: str) -> str:
    """A required, non-blank string."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(f"`{name}` must be a non-empty string")
    return value


def int_arg(value: object, name: str, low: int, high: int | None = None, default: int | None = None) -> int:
    """An integer within [low, high], enforced (not clamped). None takes the default when there is one."""
    if value is None and default is not None:
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # JSON clients send 5.0 for 5
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"`{name}` must be an integer")
    if value < low:
        raise InvalidArgument(f"`{name}` must be at least {low}")
    if high is not None and value > high:
        raise InvalidArgument(f"`{name}` must be at most {high}")
    return value


def name_arg(value: object, what: str) -> str:
    """A node or knowledge-base name, with runs of white space folded into one space."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(f"a {what} name must be a non-empty string")
    name = " ".join(value.split())
    if len(name) > MAX_NAME_CHARS:
        raise InvalidArgument(f"a {what} name must be at most {MAX_NAME_CHARS} characters")
    return name


def content_arg(value: object) -> str:
    if not isinstance(value, str):
        raise InvalidArgument("`content` must be a string")
    if len(value) > MAX_CONTENT_CHARS:
        raise InvalidArgument(f"`content` must be at most {MAX_CONTENT_CHARS} characters")
    return value


def summary_arg(value: object) -> str | None:
    """A summary, or None to clear it (a blank string clears it too)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidArgument("`summary` must be a string or null")
    if len(value) > MAX_SUMMARY_CHARS:
        raise InvalidArgument(f"`summary` must be at most {MAX_SUMMARY_CHARS} characters")
    return value.strip() or None


def metadata_arg(value: object) -> dict[str, Any] | None:
    """A JSON object (stored as given, replacing the old one whole), or None to remove it."""
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise InvalidArgument("`metadata` must be a JSON object or null")
    try:
        encoded = json.dumps(value, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError):
        raise InvalidArgument("`metadata` must be a JSON object or null") from None
    if len(encoded) > MAX_METADATA_CHARS:
        raise InvalidArgument(f"`metadata` must be at most {MAX_METADATA_CHARS} characters as JSON")
    return json.loads(encoded)  # a copy: the caller's object stays theirs
