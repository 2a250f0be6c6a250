"""Every service call lands in the activity history: who, what, when, and how it ended.

`@recorded(...)` wraps a service method whose first argument after self is the Principal. It
records the outcome (`ok`, or the error's code) and only what is named as safe: the target
node's id and small scalar arguments. Query texts, bodies and secrets never reach the history.

What is recorded is bounded whatever the caller sent (any token may call, and each call is a row):
a target that is not a possible id is not kept as sent (bounded_target), and a detail string is
kept only when it is short and printable. So the history cannot be grown by megabytes per call,
and an export of it always fits the columns an import checks.
"""

from __future__ import annotations

import functools
import inspect
import math
from typing import Any, Callable, TypeVar

from rag.errors import RagError
from rag.service.checks import MAX_ID_CHARS, MAX_NAME_CHARS, is_id, name_problem

F = TypeVar("F", bound=Callable[..., Any])


MAX_TARGET_CHARS = max(MAX_ID_CHARS, MAX_NAME_CHARS)  # a target is a node or token id, or a knowledge base's name
INVALID_TARGET = "(an invalid id)"  # what the history keeps of a target no id or name can be


def bounded_target(value: object) -> str | None:
    """The target as the history keeps it: an id, or a name (a knowledge base's), kept as sent; anything
    else (too long, control or bidi characters) becomes INVALID_TARGET, so a hostile value is seen
    to have been tried, without being stored."""
    if not isinstance(value, str):
        return None
    if is_id(value) or (len(value) <= MAX_TARGET_CHARS and name_problem(value, separators=False) is None):
        return value
    return INVALID_TARGET


def _small(value: object) -> bool:
    """A detail worth keeping as sent: a flag, a number JSON can hold, an id-like string."""
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or isinstance(value, (bool, int)) or (isinstance(value, str) and is_id(value))


def recorded(
    action: str,
    target: str | None = None,
    detail: tuple[str, ...] = (),
    after: Callable[[Any], dict[str, Any]] | None = None,
) -> Callable[[F], F]:
    """Record each call as `action`. `target`: the argument naming the node (else the result's
    node_id); `detail`: arguments safe to keep (numbers, ids, flags); `after`: what of a
    successful result to keep (counts, new ids)."""

    def wrap(method: F) -> F:
        signature = inspect.signature(method)

        @functools.wraps(method)
        def call(self, principal, *args: Any, **kwargs: Any) -> Any:
            try:
                binding = signature.bind(self, principal, *args, **kwargs)
                binding.apply_defaults()
                bound = binding.arguments
            except TypeError:
                bound = {}
            node = bounded_target(bound.get(target)) if target else None
            info = {name: bound[name] for name in detail if name in bound and _small(bound[name])} or None
            try:
                result = method(self, principal, *args, **kwargs)
            except RagError as exc:
                self.record(principal, action, node, exc.code, info)
                raise
            except Exception:
                self.record(principal, action, node, "error", info)
                raise
            if node is None:
                node = getattr(result, "node_id", None)
            if after is not None:
                info = {**(info or {}), **after(result)}
            self.record(principal, action, node, "ok", info)
            return result

        return call  # type: ignore[return-value]

    return wrap
