"""The IMAP source against a real Dovecot (tests/support/imapserver.py, started here): a first sync
reads every message, a re-sync reads only what is new and takes out what was deleted, a changed
UIDVALIDITY re-lists the folder without a duplicate, attachments are searchable and an answer cites
the message; TLS, STARTTLS, refused logins, untrusted certificates, the address rule, the size and
time bounds. What the server sent is counted by the server itself (its logout lines)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select

from rag.service import KnowledgeService, Principal
from rag.settings import Settings
from rag.sources.base import FetchLimits, Item, ItemFailed, SourceUnavailable, SyncContext
from rag.sources.imap import ImapConnector, mailbox_name, uid_sets
from rag.store.models import DOCUMENT, PUBLISHED, DocumentVersion, Node
from tests.support.imapserver import ImapServer, imap_server
from tests.support.mails import DOCX, PDF, message, paragraphs, quoted, section

LEAVE = paragraphs(section("travel-and-leave/leave.md", "Annual leave"))
CARRY_OVER = next(p for p in LEAVE if p.startswith("You can carry over a maximum of 240"))
TEAMS = paragraphs(section("tools/teams.md"))[1:]
SLACK = paragraphs(section("tools/slack/getting-started.md", "What is Slack?"))
RECORDS = paragraphs(section("tools/slack/getting-started.md", "Is Slack content a federal record?"))
ADMIN = Principal.local_admin("default")
_folders = iter(range(1000))


@pytest.fixture(scope="module")
def dovecot():
    with imap_server() as server:
        yield server


def folder() -> str:
    return f"Team {next(_folders)}"  # a space: the name is quoted on the wire


def settings_of(server: ImapServer, box: str, **more) -> dict:
    return {"host": "127.0.0.1", "port": server.imaps_port, "username": server.user, "folders": [box],
            "ca_file": str(server.cert), **more}


def connector(server: ImapServer, box: str, secret: str | None = None, limits: FetchLimits | None = None,
              previous: dict | None = None, operator_hosts: tuple[str, ...] = ("127.0.0.1",), **more) -> ImapConnector:
    """`operator_hosts`: RAG_SOURCES__ALLOW_HOSTS, which alone lets a source reach 127.0.0.1."""
    context = SyncContext(source_name="mail", workspace="default", secret=secret or server.password,
                          limits=limits or FetchLimits(timeout_seconds=10, total_seconds=20), previous=previous or {},
                          allow_hosts=operator_hosts)
    return ImapConnector(ImapConnector.Config.model_validate(settings_of(server, box, **more)), context)


def thread() -> list[bytes]:
    """Four messages of a team's mailbox, each from the handbook's text."""
    return [bytes(m) for m in (
        message("Carrying over annual leave", "How much annual leave can I carry over to next year?",
                sender="Bob Example <bob@example.org>", date="Sun, 02 Jun 2024 09:12:00 +0000"),
        message("Re: Carrying over annual leave", f"{CARRY_OVER}\n\nAda\n\n{quoted('How much annual leave?')}"),
        message("Teams at partner agencies", "\n\n".join(TEAMS), date="Tue, 04 Jun 2024 08:00:00 +0000"),
        message("What Slack is for", "\n\n".join(SLACK), sender="Grace Hopper <grace@example.org>",
                date="Wed, 05 Jun 2024 15:30:00 +0000"))]


def live_documents(svc: KnowledgeService) -> dict[str, Node]:
    """source label -> node of the documents with a published version."""
    with svc.db.session() as session:
        nodes = session.scalars(select(Node).join(DocumentVersion, DocumentVersion.node_id == Node.id).where(
            Node.kind == DOCUMENT, DocumentVersion.status == PUBLISHED))
        found = {n.source_label: n for n in nodes}
        for node in found.values():
            session.expunge(node)
        return found


# ----- the connector alone -----

def test_the_listing_names_each_message_by_folder_uidvalidity_and_uid(dovecot: ImapServer) -> None:
    box, messages = folder(), thread()
    uids = [dovecot.append(box, data) for data in messages]
    validity = dovecot.uidvalidity(box)
    with connector(dovecot, box) as source:
        items = {item.id: item for item in source.items()}
        assert set(items) == {f"{box}/{validity}/{uid}" for uid in uids}
        first = items[f"{box}/{validity}/{uids[0]}"]
        assert (first.filename, first.label, first.path) == (f"{uids[0]}.eml", f"{box}/{uids[0]}", ())
        assert first.url == (f"imaps://archivist@127.0.0.1:{dovecot.imaps_port}/Team%20{box.split()[1]};"
                             f"UIDVALIDITY={validity}/;UID={uids[0]}")
        assert len({item.version for item in items.values()}) == 4
        fetched = source.fetch(first, None)
    assert fetched.data.replace(b"\r\n", b"\n") == messages[0].replace(b"\r\n", b"\n")
    assert fetched.state == {"version": first.version, "size": len(fetched.data)}
    # A second listing that knows the versions (the states the engine keeps) asks the server for no headers.
    dovecot.mark()
    with connector(dovecot, box, previous={i.id: {"version": i.version} for i in items.values()}) as source:
        again = {item.id: item.version for item in source.items()}
    assert again == {i.id: i.version for i in items.values()} and dovecot.fetched() == (0, 0)


def test_starttls_and_a_loopback_server_without_tls(dovecot: ImapServer) -> None:
    box = folder()
    dovecot.append(box, thread()[2])
    for security in ("starttls", "none"):
        with connector(dovecot, box, security=security, port=dovecot.imap_port) as source:
            (item,) = source.items()
            assert item.url.startswith("imap://") and b"Microsoft Teams" in source.fetch(item, None).data


def test_refusals_say_why_and_never_the_password(dovecot: ImapServer) -> None:
    box = folder()
    dovecot.append(box, thread()[0])
    wrong = "not-the-password-at-all"
    with connector(dovecot, box, secret=wrong) as source, pytest.raises(SourceUnavailable) as refused:
        source.items()
    assert str(refused.value) == (f"127.0.0.1:{dovecot.imaps_port} refused the login of archivist: check the user "
                                  "name and the password (the source's secret)")
    assert not refused.value.transient and wrong not in str(refused.value)
    with connector(dovecot, box, ca_file=None) as source, pytest.raises(SourceUnavailable, match="not trusted"):
        source.items()  # a self-signed server, no ca_file: the system's roots do not know it
    with connector(dovecot, box, operator_hosts=()) as source, pytest.raises(SourceUnavailable) as private:
        source.items()
    assert "loopback" in str(private.value)
    with connector(dovecot, box, operator_hosts=(), allow_hosts=["127.0.0.1"]) as source, \
            pytest.raises(SourceUnavailable, match="loopback"):
        source.items()  # the source's own list never widens the operator's
    with connector(dovecot, "No Such Folder") as source, pytest.raises(SourceUnavailable) as missing:
        source.items()
    assert str(missing.value) == (f"the folder 'No Such Folder' cannot be opened on 127.0.0.1:{dovecot.imaps_port} "
                                  "(no such folder, or not this account's)")


def test_a_message_past_the_size_bound_fails_alone(dovecot: ImapServer) -> None:
    box = folder()
    small = dovecot.append(box, thread()[0])
    big = dovecot.append(box, bytes(message("The guide", "Attached.", attachments=(
        ("guide.docx", DOCX.read_bytes(), "application/octet-stream"),))))
    with connector(dovecot, box, max_message_bytes=20_000) as source:
        items = {item.meta["uid"]: item for item in source.items()}
        assert items[small].failed is None
        assert items[big].failed.startswith(f"{box}/{big} is ") and items[big].failed.endswith(
            ", past the bound of 20,000 bytes for one message")
        dovecot.mark()
        listed_small = Item(**{**items[big].__dict__, "failed": None, "meta": {**items[big].meta, "size": 0}})
        with pytest.raises(ItemFailed, match=f"{box}/{big} is larger than the bound of 20,000 bytes"):
            source.fetch(listed_small, None)  # listed small, larger when fetched: not read past the bound
    assert dovecot.fetched() == (0, 1)


def test_a_server_that_does_not_answer_fails_within_the_time_bound() -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)  # the connection is taken, no greeting ever comes
        config = ImapConnector.Config.model_validate({"host": "127.0.0.1", "port": silent.getsockname()[1],
                                                      "security": "none", "username": "x"})
        context = SyncContext(source_name="mail", workspace="default", secret="x",
                              limits=FetchLimits(timeout_seconds=0.5), allow_hosts=("127.0.0.1",))
        with ImapConnector(config, context) as source, pytest.raises(SourceUnavailable) as caught:
            source.items()
    assert caught.value.transient and "no answer within the time bound" in str(caught.value)


def test_settings_are_checked() -> None:
    check = ImapConnector.Config.model_validate
    with pytest.raises(ValueError, match="security none .* is for a server on this machine only"):
        check({"host": "mail.example.org", "security": "none", "username": "a"})
    with pytest.raises(ValueError, match="without a port or a scheme"):
        check({"host": "imaps://mail.example.org:993", "username": "a"})
    with pytest.raises(ValueError, match="Extra inputs are not permitted"):
        check({"host": "mail.example.org", "username": "a", "password": "never here"})
    assert check({"host": "[::1]", "username": "a", "security": "none"}).effective_port == 143
    assert check({"host": "mail.example.org", "username": "a"}).effective_port == 993
    assert mailbox_name('Archive "2024"/Café & co') == '"Archive \\"2024\\"/Caf&AOk- &- co"'
    assert list(uid_sets([7, 1, 2, 3, 9, 10])) == ["1:3,7,9:10"]


# ----- through the service -----

def test_a_mailbox_syncs_by_uid_and_a_new_uidvalidity_makes_no_duplicate(dovecot: ImapServer, tmp_path: Path) -> None:
    box = folder()
    uids = [dovecot.append(box, data) for data in thread()]
    settings = Settings(home=tmp_path / "home", source_secrets={"team_mail": dovecot.password},
                        sources={"allow_hosts": ["127.0.0.1"]})
    with KnowledgeService(settings) as svc:
        svc.ensure_workspace("default")
        svc.add_source(ADMIN, "team-mail", "imap", settings_of(dovecot, box), None, "Mail", secret="team_mail")

        dovecot.mark()
        _, first = svc.sync_source(ADMIN, "team-mail")
        assert sorted(first.added) == sorted(f"{box}/{uid}" for uid in uids) and not first.failed
        assert dovecot.fetched() == (4, 4)  # each message's header fields, then its body, once
        docs = live_documents(svc)
        reply = docs[f"imap:{box}/{uids[1]}"]
        assert reply.name == "Re: Carrying over annual leave" and reply.meta["from"] == "Ada Lovelace <ada@example.org>"
        assert reply.source_id == f"imap:default:team-mail:{box}/{dovecot.uidvalidity(box)}/{uids[1]}"

        dovecot.mark()
        _, second = svc.sync_source(ADMIN, "team-mail")
        assert len(second.unchanged) == 4 and not (second.added or second.updated or second.removed)
        assert dovecot.fetched() == (0, 0)  # the UIDs alone: nothing read again

        new = dovecot.append(box, bytes(message("Slack is a federal record", "\n\n".join(RECORDS))))
        dovecot.delete(box, uids[2])  # the Teams message
        dovecot.mark()
        _, third = svc.sync_source(ADMIN, "team-mail")
        assert (third.added, third.removed, len(third.unchanged)) == ([f"{box}/{new}"], [f"{box}/{uids[2]}"], 3)
        assert dovecot.fetched() == (1, 1)  # only the new message was looked at
        hits = svc.search(ADMIN, "Freedom of Information Act requests for Slack messages", 3).hits
        assert hits[0].source == f"imap:{box}/{new}"
        assert all(h.source != f"imap:{box}/{uids[2]}" for h in svc.search(ADMIN, "Microsoft Teams partner", 5).hits)

        before = dovecot.uidvalidity(box)
        dovecot.recreate(box)  # new UIDVALIDITY, every message under a new UID
        validity = dovecot.uidvalidity(box)
        assert validity != before
        dovecot.mark()
        _, fourth = svc.sync_source(ADMIN, "team-mail")
        assert len(fourth.moved) == 4 and not (fourth.added or fourth.removed or fourth.failed)
        assert dovecot.fetched() == (4, 0)  # the folder listed again; no body downloaded again
        docs = live_documents(svc)
        assert len(docs) == 4 and all(f";UIDVALIDITY={validity}/;UID=" in node.url for node in docs.values())
        assert {n.id for n in docs.values()} >= {reply.id}  # the same documents, under their new UIDs
        hits = svc.search(ADMIN, "How many annual leave hours can I carry over?", 10).hits
        assert [h.source for h in hits].count(docs_label(docs, reply.id)) >= 1
        assert len({h.source_id for h in hits if "240 annual leave hours" in h.text}) == 1  # one document says it

        dovecot.mark()
        _, fifth = svc.sync_source(ADMIN, "team-mail")  # the kept versions followed the documents to their new UIDs
        assert len(fifth.unchanged) == 4 and not (fifth.added or fifth.moved) and dovecot.fetched() == (0, 0)


def docs_label(docs: dict[str, Node], node_id: str) -> str:
    return next(label for label, node in docs.items() if node.id == node_id)


def test_rag_source_syncs_a_mailbox_and_an_answer_cites_the_message(dovecot: ImapServer, tmp_path: Path) -> None:
    """End to end through the CLI: `rag source add --kind imap` with the password in a _FILE secret,
    `rag source sync`, an attachment's text searchable, a question answered from a mail and cited."""
    box = folder()
    reply = dovecot.append(box, thread()[1])
    guide = dovecot.append(box, bytes(message("Reading for the 8(a) pilot", "The guide is attached.", attachments=(
        ("usds-8a-guide.docx", DOCX.read_bytes(),
         "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),))))
    pdf = dovecot.append(box, bytes(message("An example document", "Here is the PDF.", attachments=(
        ("example.pdf", PDF.read_bytes(), "application/pdf"),))))
    secret = tmp_path / "mail-password"
    secret.write_text(dovecot.password + "\n")
    home = tmp_path / "home"
    env = {"RAG_SOURCE_SECRETS__TEAM_MAIL_FILE": str(secret), "RAG_SOURCES__ALLOW_HOSTS": "127.0.0.1"}
    added = rag(home, env, "source", "add", "team-mail", "--kind", "imap", "--config",
                json.dumps(settings_of(dovecot, box)), "--kb", "mail", "--secret", "team_mail", "--json")
    assert added.returncode == 0, added.stderr
    synced = rag(home, env, "source", "sync", "team-mail", "--json")
    assert synced.returncode == 0, synced.stderr
    report = json.loads(synced.stdout)
    assert (report["added"], report["failed"], report["error"]) == (3, 0, None)
    validity = dovecot.uidvalidity(box)
    url = f"imaps://archivist@127.0.0.1:{dovecot.imaps_port}/Team%20{box.split()[1]};UIDVALIDITY={validity}/;UID="

    found = rag(home, env, "search", "sole source procurement of up to $4 million", "--kb", "mail", "--json")
    assert found.returncode == 0, found.stderr
    top = json.loads(found.stdout)["results"][0]
    assert (top["source"], top["url"]) == (f"imap:{box}/{guide}", f"{url}{guide}")
    assert top["title"] == "Reading for the 8(a) pilot" and "$4 million" in top["excerpt"]
    pdf_text = rag(home, env, "search", "Sparse is better than dense; readability counts", "--kb", "mail", "--json")
    assert json.loads(pdf_text.stdout)["results"][0]["source"] == f"imap:{box}/{pdf}"

    asked = rag(home, env, "ask", "How many annual leave hours can I carry over to the next leave year?", "--kb",
                "mail", "--json")
    assert asked.returncode == 0, asked.stderr
    answer = json.loads(asked.stdout)
    assert not answer["abstained"] and "240" in answer["answer"]
    assert (answer["sources"][0]["source"], answer["sources"][0]["url"]) == (f"imap:{box}/{reply}", f"{url}{reply}")


def rag(home: Path, extra: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAG_HOME": str(home), **extra}
    return subprocess.run([sys.executable, "-m", "rag.cli", *args], capture_output=True, text=True, env=env,
                          timeout=600)
