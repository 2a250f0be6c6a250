"""The configuration beside the environment (rag/config_file.py, rag/settings.py): a TOML file
named by RAG_CONFIG or `rag --config`, the environment winning over it, the `_FILE` form of every
secret, the errors that name the file, the line or the key, and `rag config show` (the real
command, as a process) masking secrets and naming where each value came from."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import SecretStr

from rag.config_file import MAX_CONFIG_BYTES, ConfigError
from rag.settings import Settings, secret_settings
from rag.settings_report import MASK, mask_url, settings_report
from rag.store.lock import configured_home

API_KEY = "sk-live-VERY-SECRET-4711"
DB_PASSWORD = "pa55-Wurst-0815"
DB_URL = f"postgresql+psycopg://rag:{DB_PASSWORD}@db:5432/rag"
CONFIG = """\
llm_model = "gpt-4o-mini"
chroma_url = "http://chroma:8000"

[llm]
timeout = 12.5
fallbacks = ["gpt-4o"]

[retrieve.weights]
text = 1.5
"""


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch, tmp_path):
    """No RAG_ variable but a home of the test's own; each test sets what it needs."""
    for name in list(os.environ):
        if name.upper().startswith("RAG_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("RAG_HOME", str(tmp_path / "home"))


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def error_of(**kwargs) -> str:
    with pytest.raises(ConfigError) as caught:
        Settings(**kwargs)
    message = str(caught.value)
    assert "\n" not in message  # one line
    return message


def test_the_config_file_sets_values_and_the_environment_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("RAG_CONFIG", str(write(tmp_path / "rag.toml", CONFIG)))
    settings = Settings()
    assert settings.llm_model == "gpt-4o-mini" and settings.chroma_url == "http://chroma:8000"
    assert settings.llm.timeout == 12.5 and settings.llm.fallbacks == ["gpt-4o"]
    assert settings.llm.deadline == 120.0  # a table sets only what it names
    assert settings.retrieve.weights["text"] == 1.5 and settings.retrieve.weights["vector"] == 0.8

    monkeypatch.setenv("RAG_LLM__TIMEOUT", "30")
    monkeypatch.setenv("RAG_LLM_MODEL", "ollama/llama3")
    monkeypatch.setenv("RAG_RETRIEVE__WEIGHTS__VECTOR", "0.5")
    settings = Settings()
    assert settings.llm_model == "ollama/llama3" and settings.llm.timeout == 30.0
    assert settings.llm.fallbacks == ["gpt-4o"]  # the rest of the table still applies
    assert settings.retrieve.weights["vector"] == 0.5 and settings.retrieve.weights["text"] == 1.5
    assert Settings(llm_model="gpt-4o").llm_model == "gpt-4o"  # arguments win over both


def test_no_config_file_named_means_none_read(tmp_path, monkeypatch):
    monkeypatch.setenv("RAG_CONFIG", "")
    assert Settings().llm_model is None


def test_a_secret_comes_from_the_file_its_file_variable_names(tmp_path, monkeypatch):
    assert set(secret_settings()) >= {("database_url",), ("llm", "api_key")}
    monkeypatch.setenv("RAG_LLM__API_KEY_FILE", str(write(tmp_path / "key", API_KEY + "\n")))
    monkeypatch.setenv("RAG_DATABASE_URL_FILE", str(write(tmp_path / "db", DB_URL + "\n\n")))
    settings = Settings()
    assert settings.llm.api_key == SecretStr(API_KEY)  # one trailing newline removed
    assert settings.database_url == DB_URL + "\n"  # only one
    # Above the config file, below the environment (which may not name the same secret).
    monkeypatch.setenv("RAG_CONFIG", str(write(tmp_path / "rag.toml", '[llm]\napi_key = "from-the-file"\n')))
    assert Settings().llm.api_key.get_secret_value() == API_KEY


def test_a_secret_and_its_file_variable_both_set_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("RAG_LLM__API_KEY", API_KEY)
    monkeypatch.setenv("RAG_LLM__API_KEY_FILE", str(write(tmp_path / "key", API_KEY)))
    message = error_of()
    assert "RAG_LLM__API_KEY and RAG_LLM__API_KEY_FILE" in message and API_KEY not in message


@pytest.mark.parametrize("target, said", [
    ("missing", "does not exist"),
    ("folder", "cannot be read"),
    ("big", "is larger than"),
])
def test_a_secret_file_that_cannot_be_read_names_its_variable(tmp_path, monkeypatch, target, said):
    paths = {"missing": tmp_path / "nope", "folder": tmp_path, "big": write(tmp_path / "big", "x" * 70_000)}
    monkeypatch.setenv("RAG_DATABASE_URL_FILE", str(paths[target]))
    message = error_of()
    assert message.startswith("RAG_DATABASE_URL_FILE: ") and said in message and "xxxx" not in message


def test_a_config_file_with_a_syntax_error_names_the_file_and_line(tmp_path, monkeypatch):
    path = write(tmp_path / "rag.toml", 'llm_model = "gpt-4o-mini"\n\n[llm]\ntimeout = \n')
    monkeypatch.setenv("RAG_CONFIG", str(path))
    message = error_of()
    assert message.startswith(f"config file {path}, line 4, column ") and "not valid TOML" in message


@pytest.mark.parametrize("text, said", [
    ("chunk_size = 300\n", "unknown setting 'chunk_size'"),
    ("[llm]\ntimout = 3\n", "unknown setting 'llm.timout' (did you mean 'llm.timeout'?)"),
    ('[llm]\nmodel = "x"\n', "unknown setting 'llm.model': 'llm_model' is a top-level setting, so it goes above"),
    ("[retrieve]\nweights = { text = 1.0 }\nbogus = 1\n", "unknown setting 'retrieve.bogus'"),
])
def test_an_unknown_key_names_the_file_and_the_key(tmp_path, monkeypatch, text, said):
    path = write(tmp_path / "rag.toml", text)
    monkeypatch.setenv("RAG_CONFIG", str(path))
    message = error_of()
    assert message.startswith(f"config file {path}: ") and said in message


def test_a_config_file_that_cannot_be_used_names_it(tmp_path, monkeypatch):
    monkeypatch.setenv("RAG_CONFIG", str(tmp_path / "missing.toml"))
    assert error_of() == f"config file {tmp_path / 'missing.toml'}: no such file"
    monkeypatch.setenv("RAG_CONFIG", str(write(tmp_path / "big.toml", "#" * (MAX_CONFIG_BYTES + 1))))
    assert "larger than 1024 KiB" in error_of()
    (tmp_path / "binary.toml").write_bytes(b"a = '\xff'\n")
    monkeypatch.setenv("RAG_CONFIG", str(tmp_path / "binary.toml"))
    assert error_of().endswith("binary.toml: not UTF-8 text")


def test_the_cli_finds_the_home_as_the_settings_do(tmp_path, monkeypatch):
    """rag.store.lock.configured_home (which finds a running server without loading pydantic)
    reads the config file and RAG_DATABASE_URL_FILE as Settings does."""
    monkeypatch.delenv("RAG_HOME")
    config = write(tmp_path / "rag.toml", f'home = "{tmp_path / "toml-home"}"\nchroma_url = "http://chroma:8000"\n')
    monkeypatch.setenv("RAG_CONFIG", str(config))
    settings = Settings()
    assert configured_home() == (settings.home, settings.embedded) == (tmp_path / "toml-home", True)
    monkeypatch.setenv("RAG_DATABASE_URL_FILE", str(write(tmp_path / "db", DB_URL + "\n")))
    settings = Settings()
    assert configured_home() == (settings.home, settings.embedded) == (tmp_path / "toml-home", False)
    monkeypatch.setenv("RAG_HOME", str(tmp_path / "env-home"))
    assert configured_home()[0] == Settings().home == tmp_path / "env-home"


def test_the_report_names_each_source_and_masks_secrets(tmp_path, monkeypatch):
    config = write(tmp_path / "rag.toml", CONFIG + "\n[sources]\nconcurrency = 2\n")
    monkeypatch.setenv("RAG_CONFIG", str(config))
    monkeypatch.setenv("RAG_LLM__TIMEOUT", "30")
    monkeypatch.setenv("RAG_RETRIEVE__WEIGHTS__VECTOR", "0.5")
    monkeypatch.setenv("RAG_LLM__API_KEY_FILE", str(write(tmp_path / "key", API_KEY)))
    monkeypatch.setenv("RAG_SOURCE_SECRETS__DOCS_TOKEN", API_KEY)
    _, entries = settings_report(default_kb="handbook")
    rows = {e.name: (e.value, e.source) for e in entries}
    assert rows["default_kb"] == ("handbook", "option")
    assert rows["home"] == (str(tmp_path / "home"), "env RAG_HOME")
    assert rows["llm_model"] == ("gpt-4o-mini", f"config {config}")
    assert rows["llm.timeout"] == (30.0, "env RAG_LLM__TIMEOUT")
    assert rows["llm.api_key"] == (MASK, "file RAG_LLM__API_KEY_FILE")
    assert rows["source_secrets"] == ({"docs_token": MASK}, "env RAG_SOURCE_SECRETS__DOCS_TOKEN")
    assert rows["sources.concurrency"] == (2, f"config {config}")
    assert rows["retrieve.weights"][1] == f"env RAG_RETRIEVE__WEIGHTS__VECTOR, config {config}"
    assert rows["llm.deadline"] == (120.0, "default") and rows["database_url"] == (None, "default")
    # Every setting, nested ones by their dotted names.
    assert {"index.chunk_size", "http.backlog", "mcp.sessions_per_token", "embed.backend"} <= set(rows)


def test_passwords_inside_urls_are_masked():
    assert mask_url(DB_URL) == f"postgresql+psycopg://rag:{MASK}@db:5432/rag"
    assert mask_url("postgresql://u:p@ss:w@db/x?sslmode=require") == f"postgresql://u:{MASK}@db/x?sslmode=require"
    assert mask_url("postgresql://db/x?user=u&password=secret&sslmode=require") == (
        f"postgresql://db/x?user=u&password={MASK}&sslmode=require")
    assert mask_url("http://chroma:8000/path@x") == "http://chroma:8000/path@x"
    assert mask_url("sqlite:////data/rag.db") == "sqlite:////data/rag.db"


def rag(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """The real `rag` command, as a process."""
    return subprocess.run([sys.executable, "-m", "rag.cli", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})


def test_config_show_masks_secrets_and_names_sources(tmp_path):
    config = write(tmp_path / "rag.toml", f'database_url = "{DB_URL}"\n' + CONFIG)
    env = {"RAG_LLM__API_KEY_FILE": str(write(tmp_path / "key", API_KEY + "\n")), "RAG_LLM__TIMEOUT": "30"}
    shown = rag("--config", str(config), "config", "show", env=env)
    assert shown.returncode == 0, shown.stderr
    assert API_KEY not in shown.stdout + shown.stderr and DB_PASSWORD not in shown.stdout + shown.stderr
    lines = {line.split("│")[1].strip(): [cell.strip() for cell in line.split("│")[2:4]]
             for line in shown.stdout.splitlines() if line.startswith("│")}
    assert lines["llm.api_key"] == [MASK, "file RAG_LLM__API_KEY_FILE"]
    assert lines["database_url"] == [f"postgresql+psycopg://rag:{MASK}@db:5432/rag", f"config {config}"]
    assert lines["llm.timeout"] == ["30.0", "env RAG_LLM__TIMEOUT"]
    assert lines["llm_model"] == ["gpt-4o-mini", f"config {config}"]
    assert lines["llm.deadline"] == ["120.0", "default"]

    # For programs; relative to the working directory, the option's path is made absolute, and
    # it is the process's RAG_CONFIG (so the worker processes `rag serve --workers N` starts read it).
    shown = subprocess.run([sys.executable, "-m", "rag.cli", "--config", "rag.toml", "config", "show", "--json"],
                           capture_output=True, text=True, timeout=120, cwd=tmp_path, env={**os.environ, **env})
    assert shown.returncode == 0, shown.stderr
    assert API_KEY not in shown.stdout and DB_PASSWORD not in shown.stdout
    payload = json.loads(shown.stdout)
    assert payload["config_file"] == str(config)
    assert payload["settings"]["llm.api_key"] == {"value": MASK, "source": "file RAG_LLM__API_KEY_FILE"}
    assert payload["settings"]["llm.fallbacks"] == {"value": ["gpt-4o"], "source": f"config {config}"}


@pytest.mark.parametrize("command", [["config", "show"], ["search", "leave"], ["token", "list"]])
def test_a_bad_config_stops_every_command_with_one_line_and_exit_code_2(tmp_path, command):
    config = write(tmp_path / "rag.toml", "[llm]\ntimeout = \n")
    result = rag("--config", str(config), *command, env={})
    assert result.returncode == 2
    assert result.stderr == (f"error: invalid configuration: config file {config}, line 2, column 11: "
                             "not valid TOML: Invalid value\n")
    both = rag(*command, env={"RAG_LLM__API_KEY": API_KEY, "RAG_LLM__API_KEY_FILE": str(tmp_path / "key")})
    assert both.returncode == 2 and "Traceback" not in both.stderr and API_KEY not in both.stderr
    assert "both RAG_LLM__API_KEY and RAG_LLM__API_KEY_FILE are set" in both.stderr
    # Values of the wrong kind, from the file and from a variable: one line, each setting named by its
    # path and its variable, no value repeated (it may be a secret), no pydantic links.
    config = write(tmp_path / "kinds.toml", '[retrieve]\nexcerpt_chars = "sk-not-a-number"\n')
    wrong = rag("--config", str(config), *command, env={"RAG_HTTP__PING_SECONDS": "-3"})
    assert wrong.returncode == 2 and wrong.stderr == (
        "error: invalid configuration: http.ping_seconds (RAG_HTTP__PING_SECONDS): input should be greater "
        "than 0; retrieve.excerpt_chars (RAG_RETRIEVE__EXCERPT_CHARS): input should be a valid integer, unable to "
        "parse string as an integer\n")
