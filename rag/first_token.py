"""`rag serve`'s first admin token (issues 16 and 28). On a store where no person has a token, the
server makes one for the local user so that the first call can be made. Its secret goes to a file
in RAG_HOME, `admin-token`, created 0600 (the home's rule: rag/store/home.py) with O_EXCL and
O_NOFOLLOW; the terminal gets only the file's path and how to use it, so a secret never lands in
whatever captures standard error (`rag serve 2> log`, a service manager's journal, `docker logs`).

A file already there is never overwritten unless it is provably an earlier store's token: a
regular file of this user's holding one `rag_…` secret that this store does not accept (the store
was reset, or RAG_DATABASE_URL moved, beside the same home). Anything else (a link, another
user's file, other content) is left alone, and no token is made: the warning says what to do.
"""

from __future__ import annotations

import getpass
import logging
import os
import shlex
import stat
from pathlib import Path
from typing import Callable

from rag.errors import STORAGE_FULL, RagError, Unauthenticated, is_storage_full
from rag.service.identity.tokens import TOKEN_PREFIX
from rag.store.home import DIR_MODE, FILE_MODE

log = logging.getLogger(__name__)

FILE_NAME = "admin-token"
LONGEST = 256  # bytes: a secret is 47, with its newline 48


def token_file(home: Path) -> Path:
    return home / FILE_NAME


def first_run_token(svc, say: Callable[[str], object], warn: Callable[[str], object]) -> Path | None:
    """Make the first admin token when no person has one, write it to RAG_HOME/admin-token and
    `say` where it is; `warn` when none could be made. Returns the file, or None. Nothing with
    RAG_FIRST_TOKEN=false."""
    if not svc.settings.first_token:
        return None
    if any(t.kind == "person" for t in svc.list_tokens()):
        return None
    path = token_file(svc.settings.home)
    refused = "no first admin token was made"
    replaced = _earlier_stores(svc, path)
    try:
        path.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        if replaced:
            path.unlink()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
    except FileExistsError:
        warn(f"{refused}: {path} exists and is not a token of an earlier store, so it is left as it is; move it "
             "away and start again, or make one with `rag token create --workspace W --role admin --access all`")
        return None
    except OSError as exc:
        warn(f"{refused}: {path} could not be created ({STORAGE_FULL if is_storage_full(exc) else exc.strerror})")
        return None
    try:
        made = _make_and_write(svc, fd)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    if isinstance(made, str):
        path.unlink(missing_ok=True)
        warn(f"{refused}: {made}")
        return None
    token_id, workspace, user = made
    log.info("first admin token %s made for %r; its secret is in %s", token_id, user, path)
    earlier = " (it replaces an earlier store's file, whose token this store does not know)" if replaced else ""
    say(f"No person had a token for this store, so one was made: {token_id}, admin of workspace {workspace!r}, "
        f"for {user!r}. Its secret is in {path}{earlier}, readable by you alone and never printed or logged; "
        f"to use it:\n\n    export RAG_TOKEN=$(cat {shlex.quote(str(path))})\n\n"
        "More tokens: `rag token create` (it works beside this server); docs/service.md.\n")
    return path


def _make_and_write(svc, fd: int) -> tuple[str, str, str] | str:
    """Make the token and write its secret to `fd` (closed); (token id, workspace, user), or why
    not (a full disk: the server serves what can be read all the same)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name (a container without a passwd entry)
        user = "local admin"
    workspace = svc.settings.default_workspace
    with os.fdopen(fd, "w") as file:
        try:
            secret, info = svc.create_token(workspace, "admin", ["knowledge:write"], "all", [], False, None,
                                            name=user)
        except Exception as exc:
            if not (isinstance(exc, RagError) or is_storage_full(exc)):
                raise
            return exc.message if isinstance(exc, RagError) else STORAGE_FULL
        try:
            file.write(secret + "\n")
            file.flush()
        except OSError as exc:  # nobody could ever read that secret: it is revoked at once
            svc.revoke_token(info.token_id)
            return f"its secret could not be written ({STORAGE_FULL if is_storage_full(exc) else exc.strerror})"
    return info.token_id, workspace, user


def _earlier_stores(svc, path: Path) -> bool:
    """True when `path` is a regular file of this user's holding one secret that this store does
    not accept: the token an earlier store's first run wrote there."""
    try:  # a link is refused (ELOOP); a FIFO does not block the open
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_size > LONGEST:
            return False
        secret = os.read(fd, LONGEST + 1).decode("ascii", "replace").strip()
    finally:
        os.close(fd)
    if not secret.startswith(TOKEN_PREFIX) or any(c.isspace() for c in secret):
        return False
    try:
        svc.authenticate(secret)
    except Unauthenticated:
        return True
    return False
