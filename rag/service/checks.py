"""Argument checks the service makes itself, whatever a surface's schema already checked.

Each raises InvalidArgument with a message that names the argument (and the bound it broke), with
one exception on purpose: an identifier that cannot be one of ours (too long, or with characters no
id has) answers NotFound, word for word as an unknown id does, so a probe learns nothing from the
difference, and the value is never looked up or recorded.

The bounds (docs/api.md and docs/mcp.md state them; rag/service/arguments.py declares each
operation's, and the surfaces' schemas are built from it):
- identifiers (node, parent, root, token, principal, knowledge-base and workspace ids): at most
  MAX_ID_CHARS characters, none of them a control, format (bidi, zero-width), surrogate or
  private-use character;
- integers: at most MAX_INT (2^31 - 1) whatever the argument's own upper bound, so that no number
  reaches the store's 64-bit columns (or SQLite's) out of range (a lenient one, clamped_int, is
  forced into its bounds instead);
- names: no control or bidi-control character, no `/` or `\\`, never `.` or `..`;
- texts (content, summaries): no NUL (PostgreSQL cannot store it) and no lone surrogate (UTF-8
  cannot encode it).
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from typing import Any

from rag.errors import InvalidArgument, NotFound

MAX_NAME_CHARS = 255
MAX_ID_CHARS = 200  # far above our ids (`n_` and 16 hex digits; a workspace id is at most 64)
MAX_INT = 2**31 - 1  # the largest integer any argument takes (a version number, a limit, a count of days)
MAX_METADATA_DEPTH = 32  # nesting of the metadata object: deeper is refused, never recursed into
MAX_SUMMARY_CHARS = 4000
MAX_METADATA_CHARS = 65_536  # serialised as JSON
MAX_CONTENT_CHARS = 2_000_000


def name_key(name: str) -> str:
    """What makes two sibling names the same: case and surrounding space do not count."""
    return name.strip().casefold()


def content_hash(data: bytes | str) -> str:
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


# Characters that reorder the text shown around them (Trojan Source): never in a name or an id.
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_NO_ID_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co"})  # control, format, surrogate, private use


def encodable(value: str) -> bool:
    """False for a string with a lone surrogate (JSON allows `\\ud800`; UTF-8, and so the store, cannot)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def is_id(value: object) -> bool:
    """Could this be an identifier of ours? A bounded string of printable characters."""
    return (
        isinstance(value, str) and 0 < len(value) <= MAX_ID_CHARS
        and not any(unicodedata.category(ch) in _NO_ID_CATEGORIES for ch in value)
    )


def id_arg(value: object, name: str, not_found: str = "not found") -> str:
    """An identifier argument. Not a string, or blank: InvalidArgument naming it. A string that no
    id of ours can be (see is_id): NotFound(not_found), the very answer to an unknown id, raised
    before any look-up."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(f"`{name}` must be a non-empty string")
    if not is_id(value):
        raise NotFound(not_found)
    return value


def text_arg(value: object, name: str) -> str:
    """A required, non-blank string."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(f"`{name}` must be a non-empty string")
    return value


def int_arg(value: object, name: str, low: int, high: int | None = None, default: int | None = None) -> int:
    """An integer within [low, high], enforced (not clamped); `high` is never above MAX_INT. None
    takes the default when there is one."""
    high = MAX_INT if high is None else min(high, MAX_INT)
    if value is None and default is not None:
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # JSON clients send 5.0 for 5
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"`{name}` must be an integer")
    if value < low:
        raise InvalidArgument(f"`{name}` must be at least {low}")
    if value > high:
        raise InvalidArgument(f"`{name}` must be at most {high}")
    return value


def clamped_int(value: object, low: int, high: int, default: int) -> int:
    """A lenient integer: out of [low, high] is clamped into it, and a value that is no number
    (a boolean, a text that is not one, null) falls back to the default. search_knowledge's rule
    for its `limit`, which its document states; every other integer is enforced (int_arg)."""
    if isinstance(value, bool):
        return default
    try:
        number = int(float(value))  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return default
    return max(low, min(high, number))


def name_problem(name: str, *, separators: bool = True) -> str | None:
    """What is wrong with a name (its white space already folded), in words; None when nothing.
    `separators=False` lets `/` and `\\` pass (a title read from a file, where they are text)."""
    if not encodable(name):
        return "must be valid Unicode text (it holds a lone surrogate)"
    if any(unicodedata.category(ch) == "Cc" for ch in name):
        return "must not contain control characters"
    if any(ch in BIDI_CONTROLS for ch in name):
        return "must not contain bidirectional control characters (U+202A-U+202E, U+2066-U+2069, ...)"
    if separators and ("/" in name or "\\" in name):
        return "must not contain `/` or `\\` (paths join names with `/`)"
    if name in (".", ".."):
        return "cannot be `.` or `..`"
    return None


def name_arg(value: object, what: str) -> str:
    """A node or knowledge-base name, with runs of white space folded into one space (tabs and
    line breaks included, so they are never refused as control characters)."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(f"a {what} name must be a non-empty string")
    name = " ".join(value.split())
    if len(name) > MAX_NAME_CHARS:
        raise InvalidArgument(f"a {what} name must be at most {MAX_NAME_CHARS} characters")
    problem = name_problem(name)
    if problem:
        raise InvalidArgument(f"a {what} name {problem}")
    return name


def lookup_name_arg(value: object, not_found: str, max_chars: int = MAX_NAME_CHARS) -> str:
    """A name to look up rather than to create (a knowledge base's): one that no stored name can be
    (not a string, too long, a control character, a lone surrogate) answers NotFound(not_found),
    as a name that is not there, before any look-up (PostgreSQL fails on a NUL in a parameter)."""
    if not isinstance(value, str) or len(value) > max_chars or not encodable(value) or any(
        unicodedata.category(ch) == "Cc" for ch in value.strip()
    ):
        raise NotFound(not_found)
    return value


def _plain_text(value: str, name: str) -> str:
    """A text the store can hold on both deployments: no NUL (PostgreSQL refuses it), no lone surrogate."""
    if "\x00" in value:
        raise InvalidArgument(f"`{name}` must not contain NUL characters")
    if not encodable(value):
        raise InvalidArgument(f"`{name}` must be valid Unicode text (it holds a lone surrogate)")
    return value


def content_arg(value: object) -> str:
    if not isinstance(value, str):
        raise InvalidArgument("`content` must be a string")
    if len(value) > MAX_CONTENT_CHARS:
        raise InvalidArgument(f"`content` must be at most {MAX_CONTENT_CHARS} characters")
    return _plain_text(value, "content")


def summary_arg(value: object) -> str | None:
    """A summary, or None to clear it (a blank string clears it too)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidArgument("`summary` must be a string or null")
    if len(value) > MAX_SUMMARY_CHARS:
        raise InvalidArgument(f"`summary` must be at most {MAX_SUMMARY_CHARS} characters")
    return _plain_text(value, "summary").strip() or None


def metadata_arg(value: object) -> dict[str, Any] | None:
    """A JSON object (stored as given, replacing the old one whole), or None to remove it."""
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise InvalidArgument("`metadata` must be a JSON object or null")
    if _depth(value) > MAX_METADATA_DEPTH:
        raise InvalidArgument(f"`metadata` must be nested at most {MAX_METADATA_DEPTH} levels deep")
    try:
        encoded = json.dumps(value, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError):
        raise InvalidArgument("`metadata` must be a JSON object or null") from None
    if len(encoded) > MAX_METADATA_CHARS:
        raise InvalidArgument(f"`metadata` must be at most {MAX_METADATA_CHARS} characters as JSON")
    return json.loads(_plain_text(encoded, "metadata"))  # a copy: the caller's object stays theirs


def _depth(value: object) -> int:
    """How deeply lists and objects nest, counted without recursion (a hostile value may nest
    deeper than Python's recursion limit); stops counting past MAX_METADATA_DEPTH."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            if depth > MAX_METADATA_DEPTH:
                break
            todo.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest
