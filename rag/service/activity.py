"""Every service call lands in the activity history: who, what, when, and how it ended.

`@recorded(...)` wraps a service method whose first argument after self is the Principal. It
records the outcome (`ok`, or the error's code) and only what is named as safe: the target
node's id and small scalar arguments. Query texts, bodies and secrets never reach the history.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, TypeVar

from rag.errors import RagError

F = TypeVar("F", bound=Callable[..., Any])


def _small(value: object) -> bool:
    return value is None or isinstance(value, (bool, int, float)) or (isinstance(value, str) and len(value) <= 200)


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
            node = bound.get(target) if target else None
            node = node if isinstance(node, str) else None
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
