"""A Git work tree that commits and pushes to a bare "origin" (a remote reached over a path), with
a git that reads none of the machine's configuration: the Git connector's tests
(tests/support/gitrepo.py) and `python -m benchmarks.sources` build their repositories with it.
Nothing here imports rag or tests."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def git_env(home: Path) -> dict[str, str]:
    """A git that reads no configuration of the machine's and commits as one fixed author."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0",
        "GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.org",
        "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.org",
    }


class GitRepo:
    """A work tree under `root/work` whose branch `main` is pushed to the bare `root/origin.git`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.work = root / "work"
        self.bare = root / "origin.git"
        self.env = git_env(root)
        self.work.mkdir(parents=True)
        self.git("init", "--quiet", "--initial-branch=main")
        self.git("init", "--quiet", "--bare", "--initial-branch=main", str(self.bare), cwd=root)
        self.git("remote", "add", "origin", str(self.bare))

    def git(self, *args: str, cwd: Path | None = None, stdin: bytes | None = None) -> str:
        done = subprocess.run(["git", *args], cwd=cwd or self.work, env=self.env, input=stdin,
                              capture_output=True, timeout=60)
        if done.returncode != 0:
            raise AssertionError(f"git {' '.join(args)}: {done.stderr.decode(errors='replace')}")
        return done.stdout.decode().strip()

    def write(self, path: str, data: bytes | str) -> None:
        target = self.work / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data.encode() if isinstance(data, str) else data)

    def move(self, source: str, target: str) -> None:
        (self.work / target).parent.mkdir(parents=True, exist_ok=True)
        self.git("mv", source, target)

    def commit(self, message: str, add: bool = True) -> str:
        if add:  # what the work tree holds (add=False: the index as it is, a gitlink with no folder)
            self.git("add", "--all")
        self.git("commit", "--quiet", "--allow-empty", "-m", message)
        return self.head()

    def push(self, force: bool = False) -> None:
        self.git("push", "--quiet", *(["--force"] if force else []), "origin", "main")

    def head(self) -> str:
        return self.git("rev-parse", "HEAD")

    def blob(self, path: str, commit: str = "HEAD") -> str:
        return self.git("rev-parse", f"{commit}:{path}")

    def add_gitlink(self, path: str, commit: str) -> None:
        """A submodule entry (mode 160000) pointing at `commit`, without a repository behind it."""
        self.git("update-index", "--add", "--cacheinfo", f"160000,{commit},{path}")
