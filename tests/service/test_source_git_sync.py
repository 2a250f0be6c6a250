"""A Git source end to end, as a user runs it: `rag source add --kind git` of a bare repository built
from pages of the uv documentation, `rag source sync`, a commit touching three files (two edited,
one renamed and edited), and a re-sync: exactly those three documents get a new version, the renamed
one keeps its node, and the documents carry the forge URL of the synced commit."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import func, select

from rag.settings import Settings
from rag.store.db import Database
from rag.store.models import DocumentVersion, Node

from ..support.gitrepo import UV_PAGES, uv_repo
from ..support.processes import rag_run as rag

PAGES = ["index.md", "getting-started/installation.md", "guides/projects.md", "concepts/cache.md",
         "concepts/tools.md"]
TEMPLATE = "https://forge.example/astral/uv-docs/blob/{commit}/{path}"


def documents(home: Path) -> dict[str, tuple[str, int, str | None]]:
    """source id -> (node id, how many versions it has, its URL) of the Git source's documents."""
    db = Database(Settings(home=home).sqlalchemy_url)
    with db.session() as session:
        rows = session.execute(
            select(Node.source_id, Node.id, func.count(DocumentVersion.id), Node.url)
            .join(DocumentVersion, DocumentVersion.node_id == Node.id)
            .where(Node.source_id.like("git:%")).group_by(Node.id)).all()
    return {source_id: (node_id, versions, url) for source_id, node_id, versions, url in rows}


def synced(home: Path) -> dict:
    result = rag(home, "source", "sync", "uv-docs", "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_a_commit_touching_three_files_gives_three_new_versions(tmp_path: Path):
    origin = uv_repo(tmp_path / "repo", PAGES)
    origin.write("hooks/check.py", "print('checked')\n")
    origin.commit("the first pages")
    origin.push()
    home = tmp_path / "home"
    added = rag(home, "source", "add", "uv-docs", "--kind", "git", "--kb", "uv", "--json",
                "--option", f"repository={origin.bare}", "--option", f"url_template={TEMPLATE}")
    assert added.returncode == 0, added.stderr

    first = synced(home)
    assert (first["added"], first["skipped"], first["failed"], first["outcome"]) == (6, 0, 0, "ok")
    before = documents(home)
    assert set(before) == {f"git:default:uv-docs:{page}" for page in [*PAGES, "hooks/check.py"]}
    assert all(versions == 1 for _, versions, _ in before.values())
    commit = origin.head()
    assert before["git:default:uv-docs:concepts/cache.md"][2] == TEMPLATE.format(commit=commit,
                                                                                 path="concepts/cache.md")

    for page in ("index.md", "guides/projects.md"):
        origin.write(page, (UV_PAGES / page).read_text() + "\nA closing line added in the second commit.\n")
    origin.move("concepts/tools.md", "guides/tools-explained.md")
    origin.write("guides/tools-explained.md", (UV_PAGES / "concepts/tools.md").read_text() + "\nMoved here.\n")
    second_commit = origin.commit("edit two pages, move and edit a third")
    origin.push()

    second = synced(home)
    assert (second["updated"], second["unchanged"], second["added"], second.get("moved")) == (3, 3, 0, 1)
    after = documents(home)
    new_versions = {sid for sid, (_, versions, _) in after.items() if versions == 2}
    assert new_versions == {"git:default:uv-docs:index.md", "git:default:uv-docs:guides/projects.md",
                            "git:default:uv-docs:guides/tools-explained.md"}
    assert all(versions == 1 for sid, (_, versions, _) in after.items() if sid not in new_versions)
    moved = after["git:default:uv-docs:guides/tools-explained.md"]
    assert moved[0] == before["git:default:uv-docs:concepts/tools.md"][0]  # the same node, its history kept
    assert "git:default:uv-docs:concepts/tools.md" not in after
    assert moved[2] == TEMPLATE.format(commit=second_commit, path="guides/tools-explained.md")

    third = synced(home)  # nothing changed: nothing fetched
    assert (third["updated"], third["added"], third["unchanged"]) == (0, 0, 6)

    asked = rag(home, "ask", "What is the uvx alias for?", "--kb", "uv", "--json")
    assert asked.returncode == 0, asked.stderr
    answer = json.loads(asked.stdout)  # an answer from the repository cites the file at its forge URL
    cited = {source["source_id"]: source.get("url") for source in answer["sources"]}
    assert cited.get("git:default:uv-docs:guides/tools-explained.md") == moved[2], answer
