"""A real, throwaway IMAP server for the tests: Debian's Dovecot (`dovecot-imapd`) started in the
foreground (`-F`) from a config of its own in a temp dir, on 127.0.0.1 and free ports, run by an
unprivileged user (the caller, or the `dovecot` user when the tests run as root), stopped at the end.

One user (passwd-file, the password in the clear: `{PLAIN}`), its mail in a Maildir under the temp
dir. Two listeners: `imaps` (TLS from the first byte) and `imap` (plain, offering STARTTLS), with a
self-signed certificate made here for 127.0.0.1 (`cert` is its PEM: what a source's `ca_file`
names). Every IMAP session logs its counts when it ends (`imap_logout_format`): `fetched()` sums
the message headers and bodies the server has sent since a mark, so a test can see what a sync
read, in the server's own words.
"""

from __future__ import annotations

import datetime as dt
import imaplib
import ipaddress
import os
import pwd
import re
import shutil
import ssl
import subprocess
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from benchmarks import wait_started
from tests.support.processes import free_port

DOVECOT = "/usr/sbin/dovecot"
USER = "archivist"
PASSWORD = "correct-horse-battery-staple"
_COUNTS = re.compile(r"fetch_hdr_count=(\d+) fetch_body_count=(\d+)")

_CONFIG = """\
protocols = imap
listen = 127.0.0.1
base_dir = {base}/run
state_dir = {base}/state
log_path = {base}/dovecot.log
info_log_path = {base}/dovecot.log
default_login_user = {user}
default_internal_user = {user}
first_valid_uid = 1
disable_plaintext_auth = no
auth_mechanisms = plain login
ssl = yes
ssl_cert = <{base}/cert.pem
ssl_key = <{base}/key.pem
mail_location = maildir:{base}/mail/%u
passdb {{
  driver = passwd-file
  args = scheme=PLAIN {base}/passwd
}}
userdb {{
  driver = static
  args = uid={uid} gid={gid} home={base}/home/%u
}}
service imap-login {{
  chroot =
  inet_listener imap {{
    address = 127.0.0.1
    port = {imap_port}
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {imaps_port}
  }}
}}
service anvil {{
  chroot =
}}
imap_logout_format = in=%i out=%o fetch_hdr_count=%{{fetch_hdr_count}} fetch_body_count=%{{fetch_body_count}}
"""


def _quoted(folder: str) -> str:
    """An ASCII folder name as a quoted IMAP string (imaplib sends what it is given)."""
    return '"' + folder.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _self_signed(base: Path) -> None:
    """cert.pem and key.pem: a certificate for 127.0.0.1 (and localhost) signed by its own key."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1)).not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName([
                x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]), critical=False)
            .sign(key, hashes.SHA256()))
    (base / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (base / "key.pem").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))


@dataclass
class ImapServer:
    base: Path
    imap_port: int
    imaps_port: int
    process: subprocess.Popen
    user: str = USER
    password: str = PASSWORD
    _mark: int = field(default=0, repr=False)

    @property
    def cert(self) -> Path:
        return self.base / "cert.pem"

    def log(self) -> str:
        path = self.base / "dovecot.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def client(self) -> imaplib.IMAP4_SSL:
        """A logged-in IMAP client of the test's own (over TLS), to fill and change the mailbox."""
        context = ssl.create_default_context(cafile=str(self.cert))
        client = imaplib.IMAP4_SSL("127.0.0.1", self.imaps_port, ssl_context=context, timeout=30)
        client.login(self.user, self.password)
        return client

    def append(self, folder: str, message: bytes) -> int:
        """Puts `message` into `folder` (made when missing); its UID."""
        with self.session() as client:
            client.create(_quoted(folder))  # NO when it exists: fine
            typ, data = client.append(_quoted(folder), None, None, message)
            assert typ == "OK", data
            found = re.search(rb"APPENDUID \d+ (\d+)", data[0] or b"")
            assert found, data
            return int(found.group(1))

    def delete(self, folder: str, uid: int) -> None:
        """Deletes the message of this UID (flagged \\Deleted, then expunged)."""
        with self.session() as client:
            assert client.select(_quoted(folder))[0] == "OK"
            assert client.uid("STORE", str(uid), "+FLAGS.SILENT", r"(\Deleted)")[0] == "OK"
            assert client.expunge()[0] == "OK"

    def recreate(self, folder: str) -> None:
        """The folder deleted and made again with the same messages: a new UIDVALIDITY, new UIDs
        (what a server restored from a backup, or a folder rebuilt by an admin, looks like)."""
        with self.session() as client:
            assert client.select(_quoted(folder))[0] == "OK"
            typ, data = client.uid("FETCH", "1:*", "(BODY.PEEK[])")
            assert typ == "OK", data
            messages = [part[1] for part in data if isinstance(part, tuple)]
            client.close()
            assert client.delete(_quoted(folder))[0] == "OK"
            assert client.create(_quoted(folder))[0] == "OK"
            for message in messages:
                assert client.append(_quoted(folder), None, None, message)[0] == "OK"

    def uidvalidity(self, folder: str) -> int:
        with self.session() as client:
            typ, data = client.status(_quoted(folder), "(UIDVALIDITY)")
            assert typ == "OK", data
            return int(re.search(rb"UIDVALIDITY (\d+)", data[0]).group(1))

    @contextmanager
    def session(self) -> Iterator[imaplib.IMAP4_SSL]:
        client = self.client()
        try:
            yield client
        finally:
            client.logout()

    def mark(self, settle: float = 10.0) -> None:
        """What `fetched` counts from: the sessions that end after now (those that ended before,
        the lines of their ends awaited first, count no more)."""
        deadline = time.monotonic() + settle
        while True:
            text = self.log()
            if len(_COUNTS.findall(text)) >= text.count("imap-login: Info: Login:") or time.monotonic() > deadline:
                self._mark = len(text)
                return
            time.sleep(0.05)

    def fetched(self, sessions: int = 1, settle: float = 10.0) -> tuple[int, int]:
        """(headers, bodies) the server sent in the sessions that ended since `mark`, as its
        logout lines count them. Call it once the client is done: a session's logout line is
        written as it ends, so the lines are awaited until every session logged in since the
        mark (at least `sessions` of them) has logged its counts (`settle` seconds at most)."""
        deadline = time.monotonic() + settle
        while True:
            text = self.log()[self._mark:]
            logins = text.count("imap-login: Info: Login:")
            ended = _COUNTS.findall(text)
            if logins >= sessions and len(ended) >= logins:
                return sum(int(h) for h, _ in ended), sum(int(b) for _, b in ended)
            if time.monotonic() > deadline:
                raise AssertionError(f"{logins} sessions logged in, {len(ended)} logged out: {text[-2000:]}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def _wait_up(server: ImapServer, seconds: float = 30.0) -> None:
    """Until the server answers a login over TLS (its listeners and its auth process are up)."""
    def login() -> bool:
        with server.session():
            return True

    wait_started(server.process, login, "dovecot", seconds, server.log, (OSError, imaplib.IMAP4.error), every=0.1)


@contextmanager
def imap_server() -> Iterator[ImapServer]:
    """Dovecot on 127.0.0.1, running until the block ends; RuntimeError when it is not installed
    (`scripts/install.sh --test` installs it)."""
    if not os.path.exists(DOVECOT):
        raise RuntimeError("Dovecot is not installed (Debian package dovecot-imapd; scripts/install.sh --test)")
    base = Path(tempfile.mkdtemp(prefix="rag-imap-"))
    runner = pwd.getpwnam("dovecot") if os.geteuid() == 0 else pwd.getpwuid(os.geteuid())  # never root
    for sub in ("run", "state", "mail", "home"):
        (base / sub).mkdir()
    _self_signed(base)
    (base / "passwd").write_text(f"{USER}:{{PLAIN}}{PASSWORD}\n")
    imap_port, imaps_port = free_port(), free_port()
    while imaps_port == imap_port:
        imaps_port = free_port()
    (base / "dovecot.conf").write_text(_CONFIG.format(
        base=base, user=runner.pw_name, uid=runner.pw_uid, gid=runner.pw_gid, imap_port=imap_port,
        imaps_port=imaps_port))
    for path in [base, *base.rglob("*")]:
        os.chown(path, runner.pw_uid, runner.pw_gid)
    os.chmod(base, 0o700)
    as_user = {"user": runner.pw_uid, "group": runner.pw_gid, "extra_groups": []} if os.geteuid() == 0 else {}
    process = subprocess.Popen([DOVECOT, "-F", "-c", str(base / "dovecot.conf")], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **as_user)
    server = ImapServer(base, imap_port, imaps_port, process)
    try:
        _wait_up(server)
        yield server
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)
