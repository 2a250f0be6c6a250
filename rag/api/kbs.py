"""Knowledge bases as a caller sees them: the `kb` of /v1/search and /v1/ask and the `model` of
the OpenAI-compatible endpoints.

A caller with folder access sees only the knowledge bases that hold its folders, and one with no
access none; any other name reads exactly as a missing one, so naming a knowledge base never
tells whether it exists. The default knowledge base is always listed, as `default`: every
workspace has one, so listing it tells nothing.
"""

from __future__ import annotations

from rag.service import KnowledgeService, Principal
from rag.service.checks import name_key
from rag.service.principal import ACCESS_ALL, ACCESS_FOLDERS
from rag.store.models import KnowledgeBase

DEFAULT = "default"


def visible_knowledge_bases(svc: KnowledgeService, principal: Principal) -> dict[str, KnowledgeBase]:
    """Model id (`default`, else the knowledge base's name) to knowledge base, default first."""
    every = svc.knowledge_bases(principal)
    default_key = name_key(svc.settings.default_kb)
    if principal.access == ACCESS_ALL:
        seen = every
    elif principal.access == ACCESS_FOLDERS:
        holding = {root.kb_id for root in svc.get_root_nodes(principal)}
        seen = [kb for kb in every if kb.id in holding]
    else:
        seen = []
    found: dict[str, KnowledgeBase] = {DEFAULT: kb for kb in every if kb.name_key == default_key}
    for kb in seen:
        if kb.name_key not in (default_key, DEFAULT):  # a base named `default` that is not the default is shadowed
            found[kb.name] = kb
    return found


def find_knowledge_base(svc: KnowledgeService, principal: Principal, name: str) -> KnowledgeBase | None:
    """The visible knowledge base a model id or a name picks (names ignore case), else None."""
    visible = visible_knowledge_bases(svc, principal)
    if name in visible:
        return visible[name]
    key = name_key(name)
    return next((kb for kb in visible.values() if kb.name_key == key), None)
