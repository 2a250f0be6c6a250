"""Scopes filter both lanes before fusion; the embedded store belongs to one process at a time."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from rag.errors import PermissionDenied, StoreLocked
from rag.service import KnowledgeService, Principal
from rag.service.identity.principal import ACCESS_FOLDERS, ACCESS_NONE


def test_folder_scope_fills_top_k_with_in_scope_hits(svc, admin, small_tree):
    from sqlalchemy import select

    from rag.errors import NotFound
    from rag.store.models import Node

    svc.ingest_directory(admin, small_tree)
    leave = svc.search(admin, "How much annual leave do I earn?", 8).hits
    assert leave[0].source == "fs:travel-and-leave/leave.md"
    with svc.db.session() as session:
        tools = session.scalar(select(Node).where(Node.name == "tools", Node.kind == "folder"))
    agent = Principal(actor="agent", workspace_id="default", role="viewer", access=ACCESS_FOLDERS,
                      folder_ids=(tools.id,), is_agent=True)
    # The same question from an agent scoped to tools/: every hit is in scope, and k is still filled.
    hits = svc.search(agent, "How much annual leave do I earn?", 8).hits
    assert len(hits) == 8
    assert all(h.source.startswith("fs:tools/") for h in hits)
    with pytest.raises(NotFound):
        svc.get_document(agent, leave[0].node_id)
    nobody = Principal(actor="agent", workspace_id="default", access=ACCESS_NONE)
    with pytest.raises(PermissionDenied, match="^no knowledge base access$"):  # not an empty result
        svc.search(nobody, "annual leave", 5)


def test_kb_scope_and_workspace_isolation(svc, admin, two_kbs):
    assert {h.kb_id for h in svc.search(admin, "pretzels leave", 10).hits} == {kb.id for kb in two_kbs}
    only = svc.search(admin, "pretzels leave", 10, kb_name="cafeteria").hits
    assert {h.title for h in only} == {"Cafeteria menu"}
    svc.ensure_workspace("elsewhere")
    assert svc.search(Principal.local_admin("elsewhere"), "pretzels leave", 10).hits == []


def test_two_rag_homes_never_see_each_other(tmp_path, small_tree):
    from rag.settings import Settings

    with KnowledgeService(Settings(home=tmp_path / "a")) as a:
        a.ensure_workspace("default")
        a.ingest_directory(Principal.local_admin("default"), small_tree)
    with KnowledgeService(Settings(home=tmp_path / "b")) as b:
        b.ensure_workspace("default")
        assert b.search(Principal.local_admin("default"), "annual leave", 5).hits == []


def test_a_second_process_is_told_who_holds_the_store(settings, svc):
    if not settings.embedded:
        pytest.skip("the scale-out store has no home lock: workers share it (tests/e2e/test_scale_out.py)")
    code = textwrap.dedent(
        f"""
        from rag.settings import Settings
        from rag.service import KnowledgeService
        from rag.errors import StoreLocked
        try:
            KnowledgeService(Settings(home={str(settings.home)!r}))
        except StoreLocked as exc:
            print(exc)
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    import os

    assert f"in use by process {os.getpid()}" in result.stdout
    with pytest.raises(StoreLocked, match="one process at a time"):
        KnowledgeService(settings, writer=False)
