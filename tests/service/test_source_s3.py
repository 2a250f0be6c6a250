"""The S3 connector against a real S3-compatible server (moto_server on 127.0.0.1, started here):
listing, fetching, overwrite and delete between syncs, the prefix, folder markers, the size bound,
refused credentials, a missing bucket, the address rule, and a public bucket read unsigned."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rag.sources.base import FetchLimits, Item, ItemFailed, NotModified, SourceUnavailable, SyncContext
from rag.sources.s3 import S3Connector
from tests.support.paths import SHARED
from tests.support.processes import free_port
from tests.support.s3server import S3Server, s3_server

UV_PAGES = SHARED / "datasets" / "uv_docs" / "pages"
PDF = SHARED / "datasets" / "office_docs" / "files" / "pdf" / "google-doc-example.pdf"
PAGES = ["index.md", "getting-started/installation.md", "concepts/projects/sync.md", "guides/tools.md"]
_names = itertools.count()


@pytest.fixture(scope="module")
def s3():
    with s3_server(auth=True) as server:  # checks signatures as S3 does
        yield server


@pytest.fixture(scope="module")
def public_s3():
    with s3_server(auth=False) as server:  # takes unsigned requests: a public bucket
        yield server


def bucket(server: S3Server) -> str:
    name = f"docs-{next(_names)}"
    server.client().create_bucket(Bucket=name)
    return name


def connector(server: S3Server, bucket: str, secret: str | None = "good", limits: FetchLimits | None = None,
              operator_hosts: tuple[str, ...] = ("127.0.0.1",), **settings) -> S3Connector:
    """`operator_hosts`: RAG_SOURCES__ALLOW_HOSTS, which alone lets a source reach 127.0.0.1."""
    settings = {"bucket": bucket, "endpoint_url": server.url, "access_key_id": server.access_key_id, **settings}
    context = SyncContext(source_name="reports", workspace="default",
                          secret=server.secret if secret == "good" else secret, allow_hosts=operator_hosts,
                          limits=limits or FetchLimits(attempts=2, backoff_seconds=0.01, timeout_seconds=10))
    return S3Connector(S3Connector.Config.model_validate(settings), context)


def by_id(items) -> dict:
    return {item.id: item for item in items}


def test_lists_and_fetches_pages_and_a_pdf(s3):
    name, client = bucket(s3), s3.client()
    for page in PAGES:
        client.put_object(Bucket=name, Key=f"uv/{page}", Body=(UV_PAGES / page).read_bytes())
    client.put_object(Bucket=name, Key="uv/reports/example.pdf", Body=PDF.read_bytes())
    client.put_object(Bucket=name, Key="uv/empty/", Body=b"")  # a folder marker
    client.put_object(Bucket=name, Key="uv/tools/sync.py", Body=b"print('hi')\n")
    client.put_object(Bucket=name, Key="uv/tables/people.csv", Body=b"name\nAda\n")

    with connector(s3, name, prefix="uv/") as source:
        items = by_id(source.items())
        assert set(items) == {f"uv/{p}" for p in PAGES} | {
            "uv/reports/example.pdf", "uv/tools/sync.py", "uv/tables/people.csv"}
        sync = items["uv/concepts/projects/sync.md"]
        etag = client.head_object(Bucket=name, Key=sync.id)["ETag"].strip('"')
        assert (sync.version, sync.filename, sync.path) == (etag, "sync.md", ("concepts", "projects"))
        assert sync.label == f"{name}/uv/concepts/projects/sync.md"
        assert sync.url == f"{s3.url}/{name}/uv/concepts/projects/sync.md"
        assert items["uv/index.md"].path == ()
        assert items["uv/tools/sync.py"].skip is None  # code (rag/ingest/formats/code.py)
        assert items["uv/tables/people.csv"].skip is None  # a sheet (rag/ingest/formats/spreadsheet.py)
        taken = [item for item in items.values() if item.skip is None]
        assert len(taken) == len(PAGES) + 3

        with ThreadPoolExecutor(4) as pool:  # the engine fetches from several threads at once
            fetched = dict(zip([i.id for i in taken], pool.map(lambda i: source.fetch(i, None), taken)))
    for page in PAGES:
        assert fetched[f"uv/{page}"].data == (UV_PAGES / page).read_bytes()
    pdf = fetched["uv/reports/example.pdf"]
    assert pdf.data == PDF.read_bytes() and pdf.version is None
    assert pdf.state == {"etag": items["uv/reports/example.pdf"].version}


def test_overwrite_changes_the_etag_and_delete_drops_the_item(s3):
    name, client = bucket(s3), s3.client()
    client.put_object(Bucket=name, Key="notes/a.md", Body=b"# A\n\nfirst\n")
    client.put_object(Bucket=name, Key="notes/b.md", Body=b"# B\n")
    with connector(s3, name) as source:
        first = by_id(source.items())
        kept = source.fetch(first["notes/a.md"], None).state

        client.put_object(Bucket=name, Key="notes/a.md", Body=b"# A\n\nsecond\n")
        client.delete_object(Bucket=name, Key="notes/b.md")
        second = by_id(source.items())
        assert set(second) == {"notes/a.md"}
        assert second["notes/a.md"].version != first["notes/a.md"].version
        again = source.fetch(second["notes/a.md"], kept)  # the old ETag does not match: the new body
        assert again.data == b"# A\n\nsecond\n" and again.state == {"etag": second["notes/a.md"].version}
        with pytest.raises(NotModified):
            source.fetch(second["notes/a.md"], again.state)
        with pytest.raises(ItemFailed, match="notes/b.md is no longer in bucket"):
            source.fetch(first["notes/b.md"], None)


def test_a_fetch_reports_the_version_it_saw(s3):
    name, client = bucket(s3), s3.client()
    client.put_object(Bucket=name, Key="a.md", Body=b"one")
    with connector(s3, name) as source:
        (item,) = source.items()
        client.put_object(Bucket=name, Key="a.md", Body=b"two")
        got = source.fetch(item, None)
    assert got.data == b"two" and got.version not in (None, item.version)


def test_the_prefix_filters_and_its_folders_leave_the_paths(s3):
    name, client = bucket(s3), s3.client()
    for key in ("team/a/one.md", "team/a/deep/two.md", "team/ab/three.md", "team/b/four.md", "top.md"):
        client.put_object(Bucket=name, Key=key, Body=b"# x\n")
    with connector(s3, name, prefix="team/a/") as source:
        items = by_id(source.items())
    assert set(items) == {"team/a/one.md", "team/a/deep/two.md"}
    assert items["team/a/deep/two.md"].path == ("deep",) and items["team/a/one.md"].path == ()
    with connector(s3, name, prefix="team/a") as source:  # not a folder: the keys that start so
        items = by_id(source.items())
    assert set(items) == {"team/a/one.md", "team/a/deep/two.md", "team/ab/three.md"}
    assert items["team/ab/three.md"].path == ("ab",)


def test_an_object_past_the_size_bound_fails_alone(s3):
    name, client = bucket(s3), s3.client()
    client.put_object(Bucket=name, Key="big.md", Body=b"x" * 50_000)
    client.put_object(Bucket=name, Key="small.md", Body=b"# small\n")
    with connector(s3, name, limits=FetchLimits(max_bytes=10_000, attempts=1)) as source:
        items = by_id(source.items())
        assert items["big.md"].failed == "big.md is 50,000 bytes, past the bound of 10,000 bytes for one item"
        assert items["small.md"].failed is None
        client.put_object(Bucket=name, Key="small.md", Body=b"y" * 20_000)  # grown since the listing
        with pytest.raises(ItemFailed, match=r"small.md is 20,000 bytes, past the bound of 10,000 bytes"):
            source.fetch(items["small.md"], None)
    with connector(s3, name, limits=FetchLimits(max_bytes=30_000, attempts=1)) as source:
        assert source.fetch(by_id(source.items())["small.md"], None).data == b"y" * 20_000


def test_the_listing_bound_refuses_a_partial_listing(s3):
    name, client = bucket(s3), s3.client()
    for n in range(5):
        client.put_object(Bucket=name, Key=f"n{n}.md", Body=b"x")
    with connector(s3, name, limits=FetchLimits(max_items=3, attempts=1)) as source:
        with pytest.raises(SourceUnavailable, match="more than 3 objects"):
            source.items()


def test_a_wrong_secret_is_refused_without_naming_it(s3):
    name = bucket(s3)
    with connector(s3, name, secret="not-the-secret-at-all") as source:
        with pytest.raises(SourceUnavailable) as refused:
            source.items()
    message = str(refused.value)
    assert "refused the source's credentials" in message and not refused.value.transient
    assert "not-the-secret-at-all" not in message and s3.secret not in message
    with connector(s3, name, access_key_id="AKIAUNKNOWN000000000") as source:
        with pytest.raises(SourceUnavailable, match="refused the source's credentials"):
            source.items()


def test_a_missing_bucket(s3):
    with connector(s3, "no-bucket-here") as source:
        with pytest.raises(SourceUnavailable, match="no such bucket: no-bucket-here"):
            source.items()


def test_a_loopback_endpoint_must_be_allowed(s3):
    name = bucket(s3)
    with connector(s3, name, operator_hosts=()) as source:
        with pytest.raises(SourceUnavailable, match="the endpoint is refused: 127.0.0.1 resolves to a private"):
            source.items()
    with connector(s3, name, operator_hosts=(), allow_hosts=["127.0.0.1"]) as source:
        with pytest.raises(SourceUnavailable, match="the endpoint is refused: 127.0.0.1 resolves to a private"):
            source.items()  # the source's own list never widens the operator's
    local = s3.url.replace("127.0.0.1", "localhost")
    with connector(s3, name, endpoint_url=local) as source:
        with pytest.raises(SourceUnavailable, match="localhost is a local or metadata host"):
            source.items()


def test_an_allowed_host_name_connects_to_its_checked_address(s3):
    name, client = bucket(s3), s3.client()
    client.put_object(Bucket=name, Key="a.md", Body=b"# A\n")
    local = s3.url.replace("127.0.0.1", "localhost")
    with connector(s3, name, endpoint_url=local, operator_hosts=("localhost",)) as source:
        (item,) = source.items()
        assert source.fetch(item, None).data == b"# A\n"
        # botocore's pools make connections that go to the address the rule checked, not a new lookup's
        pools = source._client()._endpoint.http_session._manager.pool_classes_by_scheme
        assert {pool.__name__ for pool in pools.values()} == {"PinnedAWSHTTPConnectionPool",
                                                              "PinnedAWSHTTPSConnectionPool"}


def test_an_endpoint_that_does_not_answer_is_transient():
    server = S3Server(url=f"http://127.0.0.1:{free_port()}", process=None, log=Path("/dev/null"),  # type: ignore[arg-type]
                      access_key_id="AKIAEXAMPLE", secret="x")
    with connector(server, "docs", limits=FetchLimits(attempts=2, backoff_seconds=0.01, timeout_seconds=2)) as source:
        with pytest.raises(SourceUnavailable, match="cannot reach 127.0.0.1") as failed:
            source.items()
        assert failed.value.transient
        with pytest.raises(SourceUnavailable, match="cannot reach 127.0.0.1") as failed:  # the engine retries it
            source.fetch(Item(id="a.md", version="1", filename="a.md"), None)
        assert failed.value.transient


def test_a_public_bucket_is_read_unsigned(public_s3):
    name, client = bucket(public_s3), public_s3.client()
    client.put_object(Bucket=name, Key="open/readme.md", Body=b"# Open\n", ACL="public-read")
    client.put_object(Bucket=name, Key="open/private.md", Body=b"# Closed\n")
    with connector(public_s3, name, secret=None, url_template="https://files.example.org/{bucket}/{key}") as source:
        items = by_id(source.items())
        assert items["open/readme.md"].url == f"https://files.example.org/{name}/open/readme.md"
        assert source.fetch(items["open/readme.md"], None).data == b"# Open\n"
        with pytest.raises(ItemFailed, match="reading open/private.md is denied"):
            source.fetch(items["open/private.md"], None)


def test_the_listing_reads_every_page(s3, monkeypatch):
    import rag.sources.s3 as module

    monkeypatch.setattr(module, "_PAGE_SIZE", 2)  # five pages of two, not 10,000 objects
    name, client = bucket(s3), s3.client()
    keys = {f"pages/p{n}/doc.md" for n in range(9)}
    for key in keys:
        client.put_object(Bucket=name, Key=key, Body=b"# page\n")
    with connector(s3, name, prefix="pages/") as source:
        assert {item.id for item in source.items()} == keys


def test_an_archived_object_is_listed_as_skipped(s3):
    name, client = bucket(s3), s3.client()
    client.put_object(Bucket=name, Key="old/2019.md", Body=b"# 2019\n", StorageClass="GLACIER")
    with connector(s3, name) as source:
        (item,) = source.items()
        assert item.skip == "archived in GLACIER: it is read once it is restored"
        with pytest.raises(ItemFailed, match="old/2019.md is archived"):  # were it fetched all the same
            source.fetch(item, None)


def test_rag_source_syncs_a_bucket_end_to_end(s3, tmp_path):
    """`rag source add` with the secret in RAG_SOURCE_SECRETS__<NAME>, `rag source sync`, an overwrite and
    a delete in the bucket, and a re-sync that fetches only what changed."""
    name, client = bucket(s3), s3.client()
    pages = ["getting-started/installation.md", "guides/tools.md", "concepts/cache.md"]
    for page in pages:
        client.put_object(Bucket=name, Key=f"uv/{page}", Body=(UV_PAGES / page).read_bytes())
    client.put_object(Bucket=name, Key="uv/reports/example.pdf", Body=PDF.read_bytes())
    client.put_object(Bucket=name, Key="uv/scripts/build.sh", Body=b"uv build\n")
    home = tmp_path / "home"
    env = {"RAG_SOURCE_SECRETS__UV_BUCKET": s3.secret, "RAG_SOURCES__ALLOW_HOSTS": "127.0.0.1"}
    settings = {"bucket": name, "prefix": "uv/", "endpoint_url": s3.url, "access_key_id": s3.access_key_id,
                "allow_hosts": ["127.0.0.1"]}

    added = rag_env(home, env, "source", "add", "uv-docs", "--kind", "s3", "--config", json.dumps(settings),
                    "--kb", "uv", "--secret", "uv_bucket", "--json")
    assert added.returncode == 0, added.stderr
    assert s3.secret not in added.stdout + added.stderr

    first = sync(home, env)
    assert (first["added"], first["failed"], first["skipped"], first["error"]) == (5, 0, 0, None)  # build.sh: code

    client.put_object(Bucket=name, Key="uv/guides/tools.md",
                      Body=b"# Tools\n\nThe uv tool command runs the zebra-striped ferret linter.\n")
    client.delete_object(Bucket=name, Key="uv/concepts/cache.md")
    second = sync(home, env)
    assert (second["added"], second["updated"], second["removed"], second["unchanged"]) == (0, 1, 1, 3)

    found = rag_env(home, env, "search", "zebra-striped ferret linter", "--kb", "uv", "--json")
    assert found.returncode == 0, found.stderr
    top = json.loads(found.stdout)["results"][0]
    assert top["url"] == f"{s3.url}/{name}/uv/guides/tools.md"
    assert top["source_id"] == "s3:default:uv-docs:uv/guides/tools.md"
    assert top["source"] == f"s3:{name}/uv/guides/tools.md"
    asked = rag_env(home, env, "ask", "What linter does the uv tool command run?", "--kb", "uv", "--json")
    assert asked.returncode == 0, asked.stderr
    answer = json.loads(asked.stdout)  # the answer cites the object, with its URL back
    assert not answer["abstained"] and "ferret" in answer["answer"]
    assert answer["sources"][0]["url"] == f"{s3.url}/{name}/uv/guides/tools.md"

    third = sync(home, env)
    assert (third["added"], third["updated"], third["removed"], third["unchanged"]) == (0, 0, 0, 4)


def sync(home: Path, env: dict[str, str]) -> dict:
    done = rag_env(home, env, "source", "sync", "uv-docs", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def rag_env(home: Path, extra: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAG_HOME": str(home), **extra}
    return subprocess.run([sys.executable, "-m", "rag.cli", *args], capture_output=True, text=True, env=env,
                          timeout=600)
