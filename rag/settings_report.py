"""The effective settings as `rag config show` prints them: every setting by its dotted name
(`llm.timeout`), its value with secrets masked, and where the value came from: `option` (an
argument to Settings), `env RAG_X`, `file RAG_X_FILE`, `config PATH` or `default`."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretStr
from pydantic_settings import EnvSettingsSource

from rag.config_file import config_path, env_value, file_variable
from rag.settings import ConfigFileSource, Settings, nested_model, secret_settings

MASK = "********"
# A URL's password (scheme://user:PASSWORD@host) and a password given as a query parameter
# (libpq's ?password=…): masked wherever a value holds one.
_QUERY_PASSWORD = re.compile(r"(?i)([?&](?:password|passwd|pwd)=)[^&#]*")


@dataclass(frozen=True)
class Entry:
    name: str
    value: Any
    source: str


def mask_url(text: str) -> str:
    """`text` with the password of any URL in it masked (the user and host stay readable)."""
    scheme, sep, rest = text.partition("://")
    if sep:
        end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
        userinfo, at, host = rest[:end].rpartition("@")
        if at and ":" in userinfo:
            rest = f"{userinfo.split(':', 1)[0]}:{MASK}@{host}{rest[end:]}"
        text = f"{scheme}{sep}{rest}"
    return _QUERY_PASSWORD.sub(lambda m: m[1] + MASK, text)


def _shown(value: Any, secret: bool) -> Any:
    """A value as JSON would carry it, every secret masked."""
    if isinstance(value, SecretStr):
        return MASK
    if secret and isinstance(value, str) and "://" not in value:
        return MASK  # a secret that is not a URL: nothing of it is shown
    if isinstance(value, str):
        return mask_url(value)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _shown(v, secret) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_shown(v, secret) for v in value]
    return value


def _has(values: dict[str, Any], path: tuple[str, ...]) -> bool:
    for part in path:
        if not isinstance(values, dict) or part not in values:
            return False
        values = values[part]
    return True


def _env_names(path: tuple[str, ...]) -> list[str]:
    """The `RAG_` variables that set the setting at `path`: its own, one per key of a mapping
    (RAG_RETRIEVE__WEIGHTS__TEXT), else the JSON of a table holding it (RAG_LLM='{…}')."""
    own, outer = [], []
    for name in os.environ:
        if not name.upper().startswith("RAG_"):
            continue
        parts = tuple(name[4:].lower().split("__"))
        if parts[: len(path)] == path:
            own.append(name)
        elif path[: len(parts)] == parts:
            outer.append(name)
    return sorted(own or outer)


def settings_report(**options: Any) -> tuple[Settings, list[Entry]]:
    """The settings built as every process builds them (with `options` as arguments), and an
    entry for each. Raises what Settings raises (a ConfigError, a ValidationError)."""
    settings = Settings(**options)
    environment = EnvSettingsSource(Settings)()
    config = ConfigFileSource(Settings).toml_data
    path = config_path()
    secrets = set(secret_settings())
    entries: list[Entry] = []

    def walk(model: BaseModel, prefix: tuple[str, ...]) -> None:
        for name, field in type(model).model_fields.items():
            here = (*prefix, name)
            value = getattr(model, name)
            if nested_model(field.annotation) is not None:
                walk(value, here)
                continue
            sources = []
            if _has(options, here):
                sources.append("option")
            if _has(environment, here):
                sources.append("env " + ", ".join(_env_names(here)))
            if here in secrets and env_value(file_variable(here)) is not None:
                sources.append(f"file {file_variable(here)}")
            if _has(config, here):
                sources.append(f"config {path}")
            # A mapping merges what every source gives; any other value is the first source's.
            source = ", ".join(sources if isinstance(value, dict) else sources[:1]) or "default"
            entries.append(Entry(".".join(here), _shown(value, here in secrets), source))

    walk(settings, ())
    return settings, entries
