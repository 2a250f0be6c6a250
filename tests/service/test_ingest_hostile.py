"""Hostile folders and archives: `rag ingest` never reads outside the folder it is given, never
opens a FIFO or a device, and says what it left out; `rag import` refuses a damaged archive with a
reason and exit code 2, whatever the damage."""

from __future__ import annotations

import json
import os
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from rag.cli import app
from rag.service import KnowledgeService, Principal
from rag.sources.folder import HIDDEN, _Found, _NotRegular
from rag.settings import Settings
from rag.store.models import Node, Workspace

ADMIN = Principal.local_admin("default")
SECRET = "Quokka-secret-7731: the host file's contents"
OUTSIDE = "a link to a file outside the ingested folder; refused"
DIR_LINK = "a link to a directory (links to directories are not followed)"
FIFO = "a FIFO (named pipe), not a regular file"


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    """A folder with two real pages and everything a walk must not take at face value."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text(f"# Secret\n\n{SECRET}\n")
    root = tmp_path / "folder"
    (root / "sub").mkdir(parents=True)
    (root / "page.md").write_text("# Page\n\nOtters hold hands while they sleep.\n")
    (root / "sub" / "inner.md").write_text("# Inner\n\nBadgers dig setts.\n")
    (root / "escape.md").symlink_to("../outside/secret.md")  # relative, out of the root
    (root / "host.md").symlink_to(outside / "secret.md")  # absolute, as `ln -s /etc/hostname x.md`
    (root / "sub" / "up.md").symlink_to("../../outside/secret.md")
    (root / "alias.md").symlink_to("sub/inner.md")  # stays inside: followed
    (root / "broken.md").symlink_to("nowhere.md")
    (root / "loop-a.md").symlink_to("loop-b.md")
    (root / "loop-b.md").symlink_to("loop-a.md")
    (root / "outdir").symlink_to(outside, target_is_directory=True)
    (root / "sub" / "cycle").symlink_to("..", target_is_directory=True)
    (root / ".hidden.md").write_text("# Hidden\n")
    (root / ".git").mkdir()
    (root / ".git" / "HEAD.md").write_text("# not a page\n")
    os.mkfifo(root / "pipe.md")
    return root


def _unblock(fifo: Path) -> None:
    """Open the FIFO's writing end and close it: a reader blocked on it gets end-of-file."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:  # no reader waiting: nothing is blocked
        pass


@contextmanager
def fifo_watchdog(fifo: Path, seconds: float = 60) -> Iterator[None]:
    """Fail (rather than hang the suite) when the code inside blocks on the FIFO: after `seconds`,
    keep unblocking it until the code returns, then fail."""
    done = threading.Event()
    fired: list[bool] = []

    def watch() -> None:
        if done.wait(seconds):
            return
        fired.append(True)
        while not done.wait(0.5):
            _unblock(fifo)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
    assert not fired, f"blocked on the FIFO {fifo.name} for more than {seconds} s"


def test_ingest_stays_in_its_folder_and_says_what_it_left_out(svc, admin, hostile: Path):
    with fifo_watchdog(hostile / "pipe.md"):
        report = svc.ingest_directory(ADMIN, hostile)
    assert sorted(report.added) == ["alias.md", "page.md", "sub/inner.md"]
    assert dict(report.failed) == {
        "escape.md": OUTSIDE,
        "host.md": OUTSIDE,
        "sub/up.md": OUTSIDE,
        "broken.md": "a broken link (its target does not exist)",
        "loop-a.md": "a link that cannot be resolved (a loop of links)",
        "loop-b.md": "a link that cannot be resolved (a loop of links)",
    }
    assert dict(report.skipped) == {
        "pipe.md": FIFO,
        "outdir/": DIR_LINK,
        "sub/cycle/": DIR_LINK,
        ".hidden.md": HIDDEN,
        ".git/": HIDDEN,
    }
    # nothing of the outside file reached the store, by any name
    with svc.db.session() as session:
        labels = set(session.scalars(select(Node.source_label).where(Node.source_label.is_not(None))))
    assert not {label for label in labels if "secret" in label or "escape" in label or "host" in label}
    assert all(SECRET not in hit.text for hit in svc.search(ADMIN, "Quokka secret host file", 10).hits)
    # the link that stays inside is the page it points at
    alias = svc.search(ADMIN, "Badgers dig setts", 5).hits
    assert {"fs:default:default:alias.md", "fs:default:default:sub/inner.md"} <= {h.source_id for h in alias}


def test_rag_ingest_prints_what_it_skipped_and_refused(tmp_path: Path, hostile: Path):
    env = {"RAG_HOME": str(tmp_path / "home")}
    with fifo_watchdog(hostile / "pipe.md"):
        text = CliRunner().invoke(app, ["ingest", str(hostile)], env=env)
    assert text.exit_code == 1, text.output  # refused links are failures, as unreadable files are
    assert f"failed: host.md: {OUTSIDE}" in text.stderr
    assert f"skipped: pipe.md: {FIFO}" in text.stderr
    assert f"skipped: outdir/: {DIR_LINK}" in text.stderr
    assert f"skipped: .git/: {HIDDEN}" in text.stderr
    assert "Traceback" not in text.output

    with fifo_watchdog(hostile / "pipe.md"):
        as_json = CliRunner().invoke(app, ["ingest", str(hostile), "--json"], env=env)
    assert as_json.exit_code == 1, as_json.output
    payload = json.loads(as_json.stdout)
    assert payload["unchanged"] == 3 and payload["failed"] == 6 and payload["skipped"] == 5
    assert {"path": "pipe.md", "reason": FIFO} in payload["skips"]
    assert {"path": "escape.md", "error": OUTSIDE} in payload["failures"]


def test_a_file_swapped_for_a_fifo_after_the_walk_is_never_read(tmp_path: Path):
    """Between the walk's check and the read, a page becomes a FIFO, or another file: opening does
    not block and the file is not read."""
    root = tmp_path / "folder"
    root.mkdir()
    page = root / "page.md"
    page.write_text("# Page\n")
    found = _Found.check(root, page)
    assert found.read() == b"# Page\n"

    page.unlink()
    os.mkfifo(page)
    with fifo_watchdog(page, 30), pytest.raises(_NotRegular) as refused:
        found.read()
    assert str(refused.value) == FIFO

    page.unlink()
    page.write_text("# Another file\n")  # a new inode under the same name
    (root / "keep.md").write_text("x")  # so the old inode number is not simply reused
    if (page.stat().st_dev, page.stat().st_ino) != found.identity:
        with pytest.raises(ValueError, match="replaced while the folder was read"):
            found.read()


# ----- archives -----

def test_a_deeply_nested_archive_line_is_refused_with_exit_2_and_changes_nothing(tmp_path: Path):

    source = Settings(home=tmp_path / "source")
    with KnowledgeService(source) as svc:
        svc.ensure_workspace("default")
        kb = svc.knowledge_base(ADMIN, "default", create=True)
        svc.create_folder(ADMIN, kb.root_id, "Folder", metadata={"depth": 1})
        svc.export_archive(ADMIN, tmp_path / "store.jsonl")
    lines = (tmp_path / "store.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    deep = "[" * 100_000 + "]" * 100_000
    variants = {
        "a line": "".join(lines[:2]) + deep + "\n" + "".join(lines[2:]),
        "a value": "".join(lines).replace('"metadata":{"depth":1}', '"metadata":{"depth":' + deep + "}"),
    }
    target = Settings(home=tmp_path / "target")
    with KnowledgeService(target) as svc:
        svc.ensure_workspace("elsewhere")  # a store with something in it
    for name, text in variants.items():
        assert text.count(deep) == 1, name
        archive = tmp_path / f"deep-{name.replace(' ', '-')}.jsonl"
        archive.write_text(text, encoding="utf-8")
        result = CliRunner().invoke(app, ["import", str(archive)], env={"RAG_HOME": str(target.home)})
        assert result.exit_code == 2, (name, result.output)
        line = 3 if name == "a line" else 5  # header, workspace, knowledge base, root folder, folder
        assert f"error: line {line} is nested too deeply to be an archive row" in result.stderr, name
        assert "unexpected" not in result.stderr and "Traceback" not in result.output
    with KnowledgeService(target) as svc, svc.db.session() as session:
        assert set(session.scalars(select(Workspace.id))) == {"elsewhere"}


def test_names_no_api_call_could_give_fail_that_file_alone(svc, admin, tmp_path):
    """A file or folder name with a control or bidi character is refused for that file, with a reason."""
    root = tmp_path / "names"
    (root / "dir\x07bell").mkdir(parents=True)
    (root / "dir\x07bell" / "a.md").write_text("# Fine title\n\nText.\n")
    (root / "esc.md").write_text("# Bad \x1b[31mtitle\n\nText.\n")
    (root / "rtl.md").write_text("# Invoice \u202etxt.exe\n\nText.\n")
    (root / "late-nul.md").write_text("# Late\n\n" + "x" * 9000 + "\x00")
    (root / "good.md").write_text("# Good\n\nText.\n")
    report = svc.ingest_directory(admin, root)
    assert [item for item in report.added] == ["good.md"]
    failed = dict(report.failed)
    assert set(failed) == {"dir\x07bell/a.md", "esc.md", "rtl.md", "late-nul.md"}
    assert "control characters" in failed["esc.md"] and "bidirectional" in failed["rtl.md"]
    assert "control characters" in failed["dir\x07bell/a.md"] and failed["late-nul.md"] == "a binary file, not text"
