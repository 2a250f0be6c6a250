"""`rag serve`'s first admin token goes to RAG_HOME/admin-token (0600), never to the terminal: a
file already there is replaced only when it is an earlier store's token, and anything else there
(a link, other content) is left alone, no token made, with a warning (issue 28). The server end to
end: tests/e2e/test_cli_server.py."""

from __future__ import annotations

import os
import stat

import pytest

from rag.first_token import first_run_token
from rag.service import KnowledgeService
from rag.settings import Settings


@pytest.fixture
def svc(tmp_path):
    with KnowledgeService(Settings(home=tmp_path / "home")) as svc:
        yield svc


def _first(svc) -> tuple[object, list[str], list[str]]:
    said, warned = [], []
    return first_run_token(svc, said.append, warned.append), said, warned


def test_the_secret_is_in_a_private_file_and_only_its_path_is_printed(svc):
    path, said, warned = _first(svc)
    assert path == svc.settings.home / "admin-token" and warned == []
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.stat().st_uid == os.geteuid()
    secret = path.read_text()
    assert secret.endswith("\n") and secret.count("\n") == 1
    principal = svc.authenticate(secret.strip())
    assert not principal.is_agent and (principal.workspace_id, principal.role, principal.access) == ("default", "admin", "all")
    (message,) = said
    assert secret.strip() not in message and f"    export RAG_TOKEN=$(cat {path})\n" in message
    assert "admin of workspace 'default'" in message and "readable by you alone" in message
    # A person has a token now: the next start makes none and leaves the file as it is.
    assert _first(svc) == (None, [], []) and path.read_text() == secret


def test_an_earlier_stores_token_is_replaced_and_said(svc):
    path = svc.settings.home / "admin-token"
    svc.settings.home.mkdir(parents=True, exist_ok=True)
    path.write_text("rag_" + "x" * 43 + "\n")  # the store it belonged to was reset: this one knows no such token
    made, said, warned = _first(svc)
    assert made == path and warned == [] and "replaces an earlier store's file" in said[0]
    assert svc.authenticate(path.read_text().strip()).role == "admin"


@pytest.mark.parametrize("kind", ["link", "notes", "folder"])
def test_anything_else_there_is_left_alone_and_no_token_is_made(svc, tmp_path, kind):
    path = svc.settings.home / "admin-token"
    svc.settings.home.mkdir(parents=True, exist_ok=True)
    outside = tmp_path / "outside"
    outside.write_text("rag_" + "y" * 43 + "\n")  # even a token-like text is not written through a link
    if kind == "link":
        path.symlink_to(outside)
    elif kind == "notes":
        path.write_text("my notes\n")
    else:
        path.mkdir()
    made, said, warned = _first(svc)
    assert made is None and said == [] and svc.list_tokens() == []
    (warning,) = warned
    assert warning.startswith(f"no first admin token was made: {path} exists and is not a token of an earlier")
    assert outside.read_text() == "rag_" + "y" * 43 + "\n"
    assert path.is_symlink() if kind == "link" else (path.is_dir() or path.read_text() == "my notes\n")


def test_turned_off_no_token_is_made(tmp_path):
    # RAG_FIRST_TOKEN=false (the Kubernetes manifests): each pod's home is its own and short-lived.
    with KnowledgeService(Settings(home=tmp_path / "home", first_token=False)) as svc:
        path, said, warned = _first(svc)
        assert (path, said, warned) == (None, [], [])
        assert not (svc.settings.home / "admin-token").exists() and svc.list_tokens() == []
