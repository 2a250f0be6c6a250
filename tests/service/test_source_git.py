"""The Git connector (rag/sources/git.py) against real repositories: a bare "origin" built by the
test from pages of the uv documentation, with a history of adds, modifications, a rename, a
delete and a force-push, fetched over a path; and git's own smart-HTTP server on 127.0.0.1 for the
token and a transient outage. No git call is mocked."""

from __future__ import annotations

import logging
import os
import socket
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from rag.ingest.formats import SKIP_IMAGE
from rag.sources.base import FetchLimits, ItemFailed, SourceUnavailable, SyncContext
from rag.sources.git import (SKIP_CODE, SKIP_LFS, SKIP_LINK, SKIP_SUBMODULE, Config,
                             GitConnector)
from rag.sources.globs import Globs
from rag.sources.registry import connector_class
from ..support.gitrepo import UV_PAGES, GitHttpServer, GitRepo, lfs_pointer, uv_repo

PAGES = ["index.md", "getting-started/installation.md", "getting-started/first-steps.md",
         "guides/projects.md", "concepts/cache.md"]


@pytest.fixture
def origin(tmp_path: Path) -> GitRepo:
    repo = uv_repo(tmp_path / "repo", PAGES)
    repo.write("tools/build.py", "print('built')\n")
    repo.write("mkdocs.yml", "site_name: uv\n")
    repo.write("Makefile", "all:\n\ttrue\n")
    repo.write("assets/logo.png", b"\x89PNG\r\n\x1a\n")
    repo.write("assets/manual.pdf", lfs_pointer(b"%PDF-1.7 a real manual"))
    (repo.work / "latest.md").symlink_to("index.md")
    repo.commit("the first pages")
    repo.add_gitlink("vendor/theme", repo.head())
    repo.commit("a submodule", add=False)
    repo.push()
    return repo


def sync(repository: str | Path, tmp_path: Path, cursor: dict | None = None, **settings) -> GitConnector:
    settings.setdefault("cache_dir", str(tmp_path / "cache"))
    limits = settings.pop("limits", FetchLimits(attempts=2, backoff_seconds=0.05))
    context = SyncContext(source_name="repo-docs", workspace="default", cursor=cursor or {}, limits=limits,
                          secret=settings.pop("secret", None), allow_hosts=settings.pop("allow_hosts", ()))
    return GitConnector(Config(repository=str(repository), **settings), context)


def listing(connector: GitConnector) -> dict:
    return {item.id: item for item in connector.items()}


def test_the_registry_names_the_git_connector():
    assert connector_class("git") is GitConnector


def test_first_sync_lists_every_file_with_its_blob_and_reason(origin: GitRepo, tmp_path: Path):
    connector = sync(origin.bare, tmp_path)
    items = listing(connector)
    taken = {i for i, item in items.items() if item.skip is None}
    assert taken == set(PAGES) | {"tools/build.py", "mkdocs.yml"}
    for page in PAGES:
        item = items[page]
        assert item.version == origin.blob(page)
        assert item.filename == Path(page).name and item.title is None
        assert item.path == tuple(Path(page).parts[:-1])
        assert item.label == f"origin/{page}"
        assert item.url is None  # a bare repository: no file a reader could open, and no template
        assert item.moved_from is None
        assert connector.fetch(item, None).data == (UV_PAGES / page).read_bytes()
    assert items["tools/build.py"].skip is None and items["mkdocs.yml"].skip is None  # code and config
    assert items["Makefile"].skip == SKIP_CODE
    assert items["assets/logo.png"].skip == SKIP_IMAGE  # a picture beside the text: not OCR'd
    assert items["assets/manual.pdf"].skip == SKIP_LFS
    assert items["latest.md"].skip == SKIP_LINK
    assert items["vendor/theme"].skip == SKIP_SUBMODULE
    assert connector.cursor() == {"commit": origin.head(), "branch": "main"}


def test_history_add_modify_rename_delete_then_force_push(origin: GitRepo, tmp_path: Path, caplog):
    first = sync(origin.bare, tmp_path)
    before = listing(first)
    cursor = first.cursor()

    origin.write("guides/projects.md", (UV_PAGES / "guides/projects.md").read_text() + "\nOne more line.\n")
    origin.move("getting-started/first-steps.md", "tutorials/first-steps.md")
    origin.git("rm", "--quiet", "concepts/cache.md")
    origin.copy_page("concepts/tools.md")
    origin.commit("modify, rename, delete, add")
    origin.push()

    second = sync(origin.bare, tmp_path, cursor)
    after = listing(second)
    assert "concepts/cache.md" not in after and "getting-started/first-steps.md" not in after
    moved = after["tutorials/first-steps.md"]
    assert moved.moved_from == "getting-started/first-steps.md"
    assert moved.version == before["getting-started/first-steps.md"].version  # same content: not fetched again
    assert moved.path == ("tutorials",)
    changed = {i for i, item in after.items() if before.get(i) is None or before[i].version != item.version}
    assert changed == {"guides/projects.md", "tutorials/first-steps.md", "concepts/tools.md"}
    assert [i for i, item in after.items() if item.moved_from] == ["tutorials/first-steps.md"]
    assert second.cursor()["commit"] == origin.head() != cursor["commit"]

    # A force-push: the history after the first sync is rewritten, with another rename in it.
    origin.git("reset", "--quiet", "--hard", cursor["commit"])
    origin.move("index.md", "home.md")
    rewritten = origin.commit("rewritten history")
    origin.push(force=True)
    with caplog.at_level(logging.INFO, logger="rag.sources.git"):
        third = sync(origin.bare, tmp_path, second.cursor())
        final = listing(third)
    assert "not an ancestor" in caplog.text and "the versions decide" in caplog.text
    assert all(item.moved_from is None for item in final.values())  # renames are not guessed across a rewrite
    assert "home.md" in final and "index.md" not in final and "concepts/cache.md" in final
    assert final["home.md"].version == before["index.md"].version
    assert third.cursor()["commit"] == rewritten


def test_a_sync_from_an_empty_cache_still_lists_everything(origin: GitRepo, tmp_path: Path):
    first = sync(origin.bare, tmp_path)
    listing(first)
    cursor = first.cursor()
    origin.move("index.md", "home.md")
    origin.commit("rename")
    origin.push()
    fresh = listing(sync(origin.bare, tmp_path, cursor, cache_dir=str(tmp_path / "other-cache")))
    assert fresh["home.md"].moved_from == "index.md"  # the old commit is in the new fetch's history


def test_paths_globs_and_the_url_template(origin: GitRepo, tmp_path: Path):
    origin.copy_page("guides/tools.md", "guides/more tools.md")
    origin.commit("a name with a space")
    origin.push()
    template = "https://forge.example/org/uv/blob/{commit}/{path}?ref={branch}"
    connector = sync(origin.bare, tmp_path, paths=["getting-started/**", "guides/*.md"], url_template=template)
    items = listing(connector)
    assert set(items) == {"getting-started/installation.md", "getting-started/first-steps.md",
                          "guides/projects.md", "guides/more tools.md"}
    commit = origin.head()
    assert items["guides/more tools.md"].url == (
        f"https://forge.example/org/uv/blob/{commit}/guides/more%20tools.md?ref=main")


def test_a_work_tree_links_to_its_files(origin: GitRepo, tmp_path: Path):
    items = listing(sync(f"file://{origin.work}", tmp_path, paths=["index.md"]))
    assert items["index.md"].url == (origin.work / "index.md").as_uri()
    assert items["index.md"].label == "work/index.md"


def test_globs_follow_folders():
    globs = Globs(["docs/**/*.md", "*.txt", "handbook/"])
    assert globs.match("docs/a.md") and globs.match("docs/x/y/a.md") and globs.match("notes.txt")
    assert globs.match("handbook/a/b.pdf")
    assert not globs.match("docs/a.py") and not globs.match("sub/notes.txt") and not globs.match("docsx/a.md")
    assert Globs(["docs/**", "guides/*.md"]).prefixes() == ["docs/", "guides/"]
    assert Globs(["**/*.md"]).prefixes() == []


def test_a_missing_repository_or_branch_is_unavailable_with_a_clear_message(origin: GitRepo, tmp_path: Path):
    missing = tmp_path / "nowhere.git"
    with pytest.raises(SourceUnavailable, match=f"the repository {missing} does not exist"):
        sync(missing, tmp_path).items()
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(SourceUnavailable, match="does not appear to be a git repository") as caught:
        sync(plain, tmp_path).items()
    assert "cache" not in str(caught.value)  # the mirror's own path is an internal
    with pytest.raises(SourceUnavailable, match="has no branch 'release'"):
        sync(origin.bare, tmp_path, branch="release").items()


def test_oversized_files_fail_alone(origin: GitRepo, tmp_path: Path):
    connector = sync(origin.bare, tmp_path, limits=FetchLimits(max_bytes=4000))
    items = listing(connector)
    big = items["getting-started/installation.md"]
    assert (UV_PAGES / big.id).stat().st_size > 4000
    assert big.failed is not None and "more than the 4000 bytes a file may have" in big.failed
    with pytest.raises(ItemFailed, match=r"more than the 4000 bytes a file may have"):
        connector.fetch(big, None)
    small = next(item for item in items.values()
                 if item.skip is None and item.id.endswith(".md") and 100 < item.meta["size"] <= 4000)
    assert connector.fetch(small, None).data
    tight = sync(origin.bare, tmp_path, max_file_bytes=100)
    with pytest.raises(ItemFailed, match="more than the 100 bytes"):
        tight.fetch(small, None)


def test_a_repository_past_max_items_is_refused(origin: GitRepo, tmp_path: Path):
    with pytest.raises(SourceUnavailable, match="more than 3 files"):
        sync(origin.bare, tmp_path, limits=FetchLimits(max_items=3)).items()
    assert len(listing(sync(origin.bare, tmp_path, paths=["guides/**"], limits=FetchLimits(max_items=3)))) == 1


@pytest.mark.parametrize("repository, words", [
    ("ext::sh -c touch% /tmp/pwned", "not a repository address|is an https"),
    ("https://user:hunter2@forge.example/org/repo.git", "give the token as the source's secret"),
    ("relative/path", "not a repository address"),
    ("-uhelp", "is an https"),
    ("ftp://forge.example/repo.git", "not one a Git source uses"),
])
def test_repository_settings_git_must_not_be_given_are_refused(repository: str, words: str):
    with pytest.raises(ValidationError, match=words):
        Config(repository=repository)


def test_settings_are_checked():
    with pytest.raises(ValidationError, match="may use"):
        Config(repository="/srv/repo.git", url_template="https://forge.example/{owner}/{path}")
    with pytest.raises(ValidationError, match="not a branch name"):
        Config(repository="/srv/repo.git", branch="--upload-pack=evil")
    with pytest.raises(ValidationError, match="extra"):
        Config(repository="/srv/repo.git", brnach="main")
    assert Config(repository="git@forge.example:org/repo.git").repository == "git@forge.example:org/repo.git"
    assert Config(repository="/srv/repo.git", paths="docs/**").paths == ["docs/**"]
    with pytest.raises(ValidationError, match="at least one"):
        Config(repository="/srv/repo.git", paths=[])


def test_a_loopback_host_is_refused_unless_allowed(origin: GitRepo, tmp_path: Path):
    with GitHttpServer(origin.root) as server:
        with pytest.raises(SourceUnavailable, match="refused"):
            sync(f"{server.url}/origin.git", tmp_path).items()
        assert server.seen == []  # refused before git was run


def test_a_token_travels_as_a_header_and_nowhere_else(origin: GitRepo, tmp_path: Path):
    token = "tok-3f9a1c-very-secret"
    with GitHttpServer(origin.root, token=token) as server:
        url = f"{server.url}/origin.git"
        with pytest.raises(SourceUnavailable) as refused:
            sync(url, tmp_path, allow_hosts=("127.0.0.1",)).items()
        assert str(refused.value) == f"the repository {url} refused the credentials (no secret: the source names none)"
        with pytest.raises(SourceUnavailable) as wrong:
            sync(url, tmp_path, allow_hosts=("127.0.0.1",), secret="not-" + token).items()
        assert str(wrong.value) == f"the repository {url} refused the credentials (the source's secret)"

        connector = sync(url, tmp_path, allow_hosts=("127.0.0.1",), secret=token)
        items = listing(connector)
    assert items["index.md"].version == origin.blob("index.md")
    assert any(h.get("authorization", "").startswith("Basic ") for h in server.seen)
    cache = tmp_path / "cache"
    for path in (p for p in cache.rglob("*") if p.is_file()):
        assert token.encode() not in path.read_bytes(), f"the token was written to {path}"


def test_a_token_is_not_sent_over_plain_http(tmp_path: Path):
    with pytest.raises(SourceUnavailable, match="sent unencrypted"):
        sync("http://forge.example/org/repo.git", tmp_path, secret="tok").items()


def test_a_server_that_never_answers_is_abandoned_at_the_bound(tmp_path: Path):
    with socket.socket() as silent:  # accepts connections (the kernel's backlog) and never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/org/repo.git"
        limits = FetchLimits(timeout_seconds=1, attempts=2, backoff_seconds=0.01)
        started = time.monotonic()
        with pytest.raises(SourceUnavailable) as caught:
            sync(url, tmp_path, branch="main", fetch_seconds=3, allow_hosts=("127.0.0.1",), limits=limits).items()
        assert time.monotonic() - started < 2 * 3 + 5  # two attempts, each within its bound
    assert caught.value.transient
    assert f"git cannot reach the repository {url}" in str(caught.value)


def test_an_ssh_repository_that_refuses_says_why(tmp_path: Path):
    limits = FetchLimits(attempts=1, timeout_seconds=5)
    with pytest.raises(SourceUnavailable) as caught:
        sync("ssh://git@127.0.0.1:1/org/repo.git", tmp_path, branch="main", allow_hosts=("127.0.0.1",),
             limits=limits).items()
    assert "ssh: connect to host 127.0.0.1 port 1: Connection refused" in str(caught.value)
    assert caught.value.transient
    with pytest.raises(SourceUnavailable, match="git cannot reach the repository git@127.0.0.1:org/repo.git"):
        sync("git@127.0.0.1:org/repo.git", tmp_path, branch="main", allow_hosts=("127.0.0.1",),
             limits=limits).items()  # port 22: refused, or an sshd whose host key is not known (BatchMode)


def test_a_transient_outage_is_retried(origin: GitRepo, tmp_path: Path):
    with GitHttpServer(origin.root, fail_first=1) as server:
        items = listing(sync(f"{server.url}/origin.git", tmp_path, allow_hosts=("127.0.0.1",)))
        assert set(PAGES) <= set(items)
    with GitHttpServer(origin.root, fail_first=100) as server:
        limits = FetchLimits(attempts=3, backoff_seconds=0.01)
        with pytest.raises(SourceUnavailable) as caught:
            sync(f"{server.url}/origin.git", tmp_path, allow_hosts=("127.0.0.1",), limits=limits).items()
        assert caught.value.transient
        assert len(server.seen) == 3  # one request per attempt, then it gave up


def test_fetches_from_several_threads_at_once(origin: GitRepo, tmp_path: Path):
    from concurrent.futures import ThreadPoolExecutor

    connector = sync(origin.bare, tmp_path)
    taken = [item for item in connector.items() if item.skip is None] * 4
    with ThreadPoolExecutor(max_workers=4) as pool:
        bodies = list(pool.map(lambda item: connector.fetch(item, None).data, taken))
    assert bodies == [(origin.work / item.id).read_bytes() for item in taken]


def test_a_fetch_killed_midway_leaves_no_lock_that_stops_the_next(origin: GitRepo, tmp_path: Path):
    connector = sync(origin.bare, tmp_path)
    listing(connector)
    (connector.mirror / "refs" / "heads" / "main.lock").write_text("left by a git fetch killed with -9\n")
    (connector.mirror / "packed-refs.lock").write_text("")
    origin.copy_page("concepts/tools.md")
    origin.commit("one more page")
    origin.push()
    again = sync(origin.bare, tmp_path, connector.cursor())
    assert "concepts/tools.md" in listing(again)
    assert again.cursor()["commit"] == origin.head()


def test_every_git_call_is_bounded_in_time_and_output(tmp_path: Path):
    from rag.sources.gitrun import Git, GitFailed, find_git, git_env

    git = Git(find_git(), git_env(protocol="file", timeout=5, token=None, username="x"), {"hunter2": "***"})
    with pytest.raises(GitFailed) as long:
        git.run(["help", "--all"], timeout=10, max_output=100)
    assert long.value.too_long
    started = time.monotonic()
    with pytest.raises(GitFailed) as slow:  # an alias running a shell command that outlives the bound
        git.run(["-c", "alias.pause=!sleep 60", "pause"], timeout=0.5, max_output=100)
    assert slow.value.timed_out and time.monotonic() - started < 10  # the whole process group was killed
    with pytest.raises(GitFailed) as failed:
        git.run(["--git-dir=/nonexistent/hunter2", "rev-parse", "HEAD"], timeout=5, max_output=100)
    assert "hunter2" not in str(failed.value) and "***" in str(failed.value)


def test_the_mirror_lives_in_the_engines_working_directory(origin: GitRepo, tmp_path: Path):
    workdir = tmp_path / "home" / "sources" / "s1"
    context = SyncContext(source_name="repo-docs", workspace="default", workdir=workdir)
    connector = GitConnector(Config(repository=str(origin.bare)), context)
    assert len(list(connector.items())) == len(PAGES) + 7
    assert connector.mirror == workdir / "mirror.git" and (workdir / "mirror.git" / "HEAD").is_file()


def test_a_cache_someone_else_could_write_is_refused(origin: GitRepo, tmp_path: Path, monkeypatch):
    import tempfile

    shared = tmp_path / "shared-tmp"
    (shared / f"rag-git-{os.getuid()}").mkdir(parents=True, mode=0o777)
    (shared / f"rag-git-{os.getuid()}").chmod(0o777)  # as another user's planted folder would be
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    connector = GitConnector(Config(repository=str(origin.bare)), SyncContext(source_name="s", workspace="w"))
    with pytest.raises(SourceUnavailable, match="writable by others"):
        connector.items()
    (shared / f"rag-git-{os.getuid()}").chmod(0o700)
    assert len(list(GitConnector(Config(repository=str(origin.bare)),
                                 SyncContext(source_name="s", workspace="w")).items())) == len(PAGES) + 7
