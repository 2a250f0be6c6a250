"""The configuration beside the environment: a TOML file named by ``RAG_CONFIG`` (or `rag --config
PATH`, which sets it), and the ``_FILE`` form of each secret (``RAG_LLM__API_KEY_FILE=/run/secrets/key``
reads the key from that file, as Docker and Kubernetes mount secrets). rag/settings.py makes them
settings sources; this module holds only the reading, with the standard library alone, so that
rag.store.lock finds RAG_HOME without loading pydantic.

Every problem is a ConfigError whose message is one line naming the file (or the variable), never a
secret's content."""

from __future__ import annotations

import errno
import os
import re
import stat
import tomllib
from pathlib import Path
from typing import Any, Mapping

CONFIG_VARIABLE = "RAG_CONFIG"
MAX_CONFIG_BYTES = 1024 * 1024
MAX_SECRET_BYTES = 64 * 1024
FILE_SUFFIX = "_FILE"


class ConfigError(ValueError):
    """A configuration file or a secret's file that cannot be used: one line saying which and why."""


def env_value(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """A variable's value, its name in any case, as the settings read the `RAG_` variables."""
    env = os.environ if environ is None else environ
    if name in env:
        return env[name]
    lowered = name.lower()
    return next((value for key, value in env.items() if key.lower() == lowered), None)


def config_path(environ: Mapping[str, str] | None = None) -> Path | None:
    """The configuration file RAG_CONFIG names; None when it names none (unset or empty)."""
    value = env_value(CONFIG_VARIABLE, environ)
    return Path(value).expanduser() if value and value.strip() else None


def _read_bounded(path: Path, limit: int) -> bytes:
    """A regular file's bytes (OSError for anything else: a folder, a pipe that would never end),
    a ValueError past `limit` bytes, before reading more."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as file:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "a folder, not a file")
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file")
        data = file.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"larger than {limit // 1024} KiB")
    return data


_AT_LINE = re.compile(r"^(?P<message>.*?)\s*\(at line (?P<line>\d+), column (?P<column>\d+)\)$")


def read_config(path: Path) -> dict[str, Any]:
    """The TOML file's tables, or a ConfigError naming the file (and the line of a syntax error)."""
    where = f"config file {path}"
    try:
        data = _read_bounded(path, MAX_CONFIG_BYTES)
    except FileNotFoundError:
        raise ConfigError(f"{where}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"{where}: cannot be read ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{where}: not UTF-8 text") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = _AT_LINE.match(str(exc))
        if found is None:
            raise ConfigError(f"{where}: not valid TOML: {exc}") from None
        raise ConfigError(
            f"{where}, line {found['line']}, column {found['column']}: not valid TOML: {found['message']}"
        ) from None


def file_variable(parts: tuple[str, ...]) -> str:
    """The `_FILE` variable of a setting: ('llm', 'api_key') -> RAG_LLM__API_KEY_FILE."""
    return "RAG_" + "__".join(parts).upper() + FILE_SUFFIX


def read_secret_file(variable: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The secret in the file `variable` names, one trailing newline removed; None when the
    variable is unset. A ConfigError when both it and the plain variable are set, or when the file
    cannot be read (naming the variable and its path, never what the file holds)."""
    name = env_value(variable, environ)
    if name is None:
        return None
    plain = variable[: -len(FILE_SUFFIX)]
    if env_value(plain, environ) is not None:
        raise ConfigError(f"both {plain} and {variable} are set: set one of them")
    if not name.strip():
        raise ConfigError(f"{variable} is empty: it must name the file that holds the secret")
    try:
        data = _read_bounded(Path(name), MAX_SECRET_BYTES)
        text = data.decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{variable}: the file {name} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"{variable}: the file {name} cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{variable}: the file {name} is not UTF-8 text") from None
    except ValueError as exc:
        raise ConfigError(f"{variable}: the file {name} is {exc}") from None
    return text[:-2] if text.endswith("\r\n") else text[:-1] if text.endswith("\n") else text


def configured(name: str, environ: Mapping[str, str] | None = None, secret: bool = False) -> Any:
    """A top-level setting as the settings would read it, without loading them: its variable, else
    (a secret) its `_FILE`, else the configuration file; None when none sets it."""
    value = env_value(f"RAG_{name.upper()}", environ)
    if value is None and secret:
        value = read_secret_file(file_variable((name,)), environ)
    if value is None and (path := config_path(environ)) is not None:
        value = read_config(path).get(name)
    return value
