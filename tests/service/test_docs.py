"""Everything a user can reach is documented, in the manner of Datasette's tests/test_docs.py.

Each list is read from the code at run time, so a setting, tool, endpoint or command added (or
renamed) without its documentation fails here, one test per item, naming what is missing and where
it belongs:

- every setting of `rag.settings.Settings`, nested ones included, by the environment variable it is
  read from (`RAG_HOME`, `RAG_LLM__TIMEOUT`): README.md's Configuration table, or any docs/*.md;
- every MCP tool `rag.mcp.server.build_server` registers: a heading or a row of a parameters table
  in docs/mcp.md;
- every HTTP endpoint of `rag.api.create_app` (method and path, path parameters by any name; the
  OpenAPI schema's, so /docs and /openapi.json are not among them): `GET /v1/…` in docs/*.md;
- every command of the `rag` command line (`rag token create`): README.md or docs/*.md.

And the reverse for settings: every `RAG_…` variable the docs name is one something reads (a setting,
a command-line option, docker/compose.yaml, the tests), so a renamed setting leaves no stale name.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from unittest.mock import MagicMock

import anyio
import pytest
import typer.main
from pydantic import BaseModel

from rag.settings import Settings

from ..conftest import KEEP

ROOT = Path(__file__).resolve().parents[2]
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MCP_DOC = ROOT / "docs" / "mcp.md"
COMPOSE = ROOT / "docker" / "compose.yaml"
HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


@lru_cache
def docs_text() -> str:
    return "\n".join(path.read_text(encoding="utf-8") for path in DOC_FILES)


def _named(name: str, text: str) -> bool:
    """`name` appears whole: not as part of a longer name (RAG_LLM_MODEL is not in RAG_LLM_MODELS);
    a nested name below it (RAG_RETRIEVE__WEIGHTS__VECTOR for RAG_RETRIEVE__WEIGHTS) counts."""
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9]|_[A-Za-z0-9])", text) is not None


# ----- settings -----


def _env_names(model: type[BaseModel], prefix: str, delimiter: str) -> tuple[list[str], list[str]]:
    """(every leaf setting's variable, every nested model's prefix), read from the model's fields."""
    leaves: list[str] = []
    groups: list[str] = []
    for name, field in model.model_fields.items():
        variable = prefix + name.upper()
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            groups.append(variable + delimiter)
            nested_leaves, nested_groups = _env_names(annotation, variable + delimiter, delimiter)
            leaves += nested_leaves
            groups += nested_groups
        else:
            leaves.append(variable)
    return leaves, groups


def setting_variables() -> tuple[list[str], list[str]]:
    config = Settings.model_config
    prefix = (config.get("env_prefix") or "").upper()
    return _env_names(Settings, prefix, config.get("env_nested_delimiter") or "__")


SETTINGS, SETTING_GROUPS = setting_variables()


@pytest.mark.parametrize("variable", SETTINGS)
def test_setting_is_documented(variable: str) -> None:
    if not _named(variable, docs_text()):
        pytest.fail(f"the setting {variable} is not documented: add a row for it to README.md's Configuration "
                    "table (or name it in docs/*.md)", pytrace=False)


def _cli_envvars() -> set[str]:
    from rag.cli import app

    from rag.cli import TOKEN_FILE

    names: set[str] = {TOKEN_FILE}  # read by `rag mcp` itself, not by an option
    root = typer.main.get_command(app)  # the options before any command (`rag --config`)
    for command in [root, *(command for _, command in cli_commands())]:
        for param in command.params:
            envvar = param.envvar
            names.update([envvar] if isinstance(envvar, str) else envvar or ())
    return names


def _known_variable(name: str, others: set[str]) -> bool:
    from rag.config_file import file_variable
    from rag.settings import secret_settings

    if name in SETTINGS or name in SETTING_GROUPS or name in others:
        return True
    if name in {file_variable(path) for path in secret_settings()}:
        return True  # a secret's file (RAG_LLM__API_KEY_FILE)
    # below a leaf setting: a key of a mapping (RAG_RETRIEVE__WEIGHTS__VECTOR)
    return any(name.startswith(leaf + "__") for leaf in SETTINGS)


def test_documented_variables_exist() -> None:
    """A setting renamed or removed leaves no stale `RAG_…` name in the docs."""
    others = _cli_envvars() | set(re.findall(r"\$\{(RAG_\w+?)(?::-[^}]*)?\}", COMPOSE.read_text())) | set(KEEP)
    stale = sorted({name for name in re.findall(r"\bRAG_[A-Z0-9_]+", docs_text()) if not _known_variable(name, others)})
    if stale:
        pytest.fail(f"the docs name environment variables nothing reads: {', '.join(stale)} (not a setting of "
                    "rag/settings.py, an option of the command line or a variable of docker/compose.yaml)",
                    pytrace=False)


# ----- MCP tools -----


def mcp_tools() -> list[str]:
    from rag.mcp.server import build_server

    server = build_server(MagicMock(name="KnowledgeService"))  # registering the tools calls no service
    return sorted(tool.name for tool in anyio.run(server.list_tools))


@lru_cache
def documented_tools() -> set[str]:
    """Tools named in a heading of docs/mcp.md, or first in a row of a table with a parameters column."""
    names: set[str] = set()
    table_has_parameters = False
    for line in MCP_DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            names.update(re.findall(r"`(\w+)`", line))
        elif line.startswith("|"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if all(re.fullmatch(r":?-+:?", cell) for cell in cells):
                continue
            if cells[0] == "tool":  # a header row
                table_has_parameters = "parameters" in cells
            elif table_has_parameters:
                names.update(re.findall(r"`(\w+)`", cells[0]))
        else:
            table_has_parameters = False
    return names


@pytest.mark.parametrize("tool", mcp_tools())
def test_mcp_tool_is_documented(tool: str) -> None:
    if tool not in documented_tools():
        pytest.fail(f"the MCP tool `{tool}` is not documented: give it a row in docs/mcp.md's table of tools and "
                    "their parameters (or a heading of its own there)", pytrace=False)


# ----- HTTP endpoints -----


def _shape(path: str) -> str:
    return re.sub(r"\{[^}]*\}", "{}", path)  # path parameters by any name: {id} documents {node_id}


def http_endpoints() -> list[str]:
    from rag.api import create_app

    app = create_app(Settings(home=ROOT / ".rag-home" / "test-docs"))  # the app is built, never started
    schema = app.openapi()
    return sorted(
        f"{method.upper()} {path}"
        for path, operations in schema["paths"].items()
        for method in operations
        if method.upper() in HTTP_METHODS
    )


@lru_cache
def documented_endpoints() -> set[str]:
    methods = "|".join(HTTP_METHODS)
    return {f"{method} {_shape(path)}" for method, path in re.findall(rf"\b({methods}) (/[^\s`|,;)]*)", docs_text())}


@pytest.mark.parametrize("endpoint", http_endpoints())
def test_http_endpoint_is_documented(endpoint: str) -> None:
    method, path = endpoint.split(" ", 1)
    if f"{method} {_shape(path)}" not in documented_endpoints():
        pytest.fail(f"the HTTP endpoint {endpoint} is not documented: give it a row (`{endpoint}`) in docs/api.md",
                    pytrace=False)


# ----- the command line -----


def cli_commands() -> list[tuple[str, object]]:
    from rag.cli import app

    found: list[tuple[str, object]] = []

    def walk(command, words: list[str]) -> None:
        children = getattr(command, "commands", None)
        if children:
            for name, child in children.items():
                if not child.hidden:
                    walk(child, [*words, name])
        else:
            found.append((" ".join(words), command))

    walk(typer.main.get_command(app), ["rag"])
    return sorted(found, key=lambda item: item[0])


@pytest.mark.parametrize("command", [name for name, _ in cli_commands()])
def test_cli_command_is_documented(command: str) -> None:
    if not re.search(rf"(?<![\w-]){re.escape(command)}(?![\w-])", docs_text()):
        pytest.fail(f"the command `{command}` is not documented: add it to README.md's list of commands (or "
                    "docs/*.md)", pytrace=False)


def test_the_lists_are_read() -> None:
    """The enumerations above find what is there (an empty list would pass every test)."""
    assert {"RAG_HOME", "RAG_LLM__TIMEOUT", "RAG_INDEX__CHUNK_SIZE"} <= set(SETTINGS)
    assert {"search_knowledge", "get_document", "set_metadata"} <= set(mcp_tools())
    assert {"GET /healthz", "POST /v1/search", "POST /v1/chat/completions"} <= set(http_endpoints())
    assert {"rag serve", "rag token create", "rag import"} <= {name for name, _ in cli_commands()}
    assert {"get_document", "search_knowledge_base"} <= documented_tools()
