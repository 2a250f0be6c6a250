"""docker/: what a user would check before a first `docker compose up`, without a Docker engine.

The compose file is rendered by the Docker Compose command line (`docker compose config`, or the
older `docker-compose config` that `scripts/install.sh --test` installs from Debian); the rest is
read from the files: the rag service waits for a healthy PostgreSQL and Chroma, every service keeps
its data in a named volume and has a health check, the settings it passes are ones
`rag.settings.Settings` reads and point at those services, the image installs with CI's script and
serves with `rag serve`, and the Chroma image is the version of the installed chromadb client.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from sqlalchemy.engine import make_url

from rag.settings import LOCAL_EMBED_MODEL, Settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker" / "compose.yaml"
DOCKERFILE = ROOT / "docker" / "Dockerfile"

# ${NAME}, ${NAME:-default}, and $$ (a literal $), as Compose reads them.
_INTERPOLATION = re.compile(r"\$\$|\$\{(\w+)(?::-([^}]*))?\}")


def _defaults(value):
    """The compose file as Compose renders it with none of its variables set."""
    if isinstance(value, dict):
        return {key: _defaults(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_defaults(item) for item in value]
    if isinstance(value, str):
        return _INTERPOLATION.sub(lambda m: "$" if m.group(0) == "$$" else m.group(2) or "", value)
    return value


@pytest.fixture(scope="module")
def compose() -> dict:
    return _defaults(yaml.safe_load(COMPOSE.read_text()))


def _instructions() -> list[tuple[str, str]]:
    """The Dockerfile's instructions as (KEYWORD, arguments), continuation lines joined."""
    joined, current = [], ""
    for line in DOCKERFILE.read_text().splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
            continue
        joined.append(current + line)
        current = ""
    return [(keyword.upper(), rest.strip()) for keyword, rest in (line.strip().split(None, 1) for line in joined)]


def _one(keyword: str) -> str:
    found = [rest for kw, rest in _instructions() if kw == keyword]
    assert len(found) == 1, f"the Dockerfile should have one {keyword}, it has {len(found)}"
    return found[0]


def _image_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for keyword, rest in _instructions():
        if keyword == "ENV":
            env.update(token.split("=", 1) for token in shlex.split(rest))
    return env


def _cmd() -> str:
    """The CMD as the shell inside the image runs it."""
    cmd = json.loads(_one("CMD"))
    assert cmd[:2] == ["sh", "-c"], "the CMD runs in a shell so that ${RAG_WORKERS:-2} is read at start"
    return cmd[2]


def _volume_targets(service: dict) -> dict[str, str]:
    """target path -> named volume, from the short syntax (`name:/path`)."""
    targets = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        targets[target] = source
    return targets


# ----- the compose file -----


def test_three_services_each_keeping_its_data_in_a_named_volume(compose):
    services = compose["services"]
    assert set(services) == {"rag", "postgres", "chroma"}
    declared = set(compose["volumes"])
    expected = {"rag": "/data", "postgres": "/var/lib/postgresql/data", "chroma": "/data"}
    for name, path in expected.items():
        targets = _volume_targets(services[name])
        assert path in targets, f"{name} keeps no volume at {path}"
        assert targets[path] in declared, f"{name}'s volume {targets[path]} is not a named volume"
    assert len({_volume_targets(services[n])[p] for n, p in expected.items()}) == 3, "each service has its own volume"
    assert _image_env()["RAG_HOME"] == "/data", "the rag volume is mounted where RAG_HOME points"


def test_rag_starts_after_postgres_and_chroma_are_healthy(compose):
    depends = compose["services"]["rag"]["depends_on"]
    assert depends == {
        "postgres": {"condition": "service_healthy"},
        "chroma": {"condition": "service_healthy"},
    }


def test_every_service_has_a_health_check(compose):
    services = compose["services"]
    postgres = services["postgres"]["healthcheck"]["test"]
    assert postgres[0] == "CMD-SHELL" and "pg_isready" in postgres[1]

    chroma = services["chroma"]
    probe = " ".join(chroma["healthcheck"]["test"])
    port = chroma["command"][chroma["command"].index("--port") + 1]
    assert "/api/v2/heartbeat" in probe and f"/dev/tcp/127.0.0.1/{port}" in probe
    assert "curl" not in probe and "python" not in probe, "the Chroma image has neither"
    assert chroma["command"][chroma["command"].index("--path") + 1] in _volume_targets(chroma)

    # The rag service's health check is the image's HEALTHCHECK, on the port the CMD serves.
    healthcheck = _one("HEALTHCHECK")
    serve_port = re.search(r"--port (\d+)", _cmd()).group(1)
    assert f"http://127.0.0.1:{serve_port}/healthz" in healthcheck
    assert "curl" not in healthcheck, "python:3.11-slim has no curl"


def test_the_rag_environment_is_what_settings_reads_and_points_at_the_services(compose, monkeypatch):
    services = compose["services"]
    env = services["rag"]["environment"]
    nested = {name: field.annotation for name, field in Settings.model_fields.items()}
    for key in env:
        assert key.startswith("RAG_"), key
        name = key[len("RAG_"):].lower()
        if key == "RAG_WORKERS":  # read by the image's CMD, not by Settings
            assert "${RAG_WORKERS" in _cmd()
            continue
        head, _, tail = name.partition("__")
        assert head in nested, f"{key} is no setting of rag.settings.Settings"
        if tail:
            assert tail in nested[head].model_fields, f"{key} is no setting of rag.settings.Settings"

    for key in list(os.environ):
        if key.startswith("RAG_"):
            monkeypatch.delenv(key)
    for key, value in env.items():
        if value is not None:  # a bare name is passed through from the shell only when set there
            monkeypatch.setenv(key, str(value))
    monkeypatch.setenv("RAG_HOME", _image_env()["RAG_HOME"])
    settings = Settings()

    assert not settings.embedded, "both engines are servers, so several processes may share the store"
    url = make_url(settings.database_url)
    postgres = services["postgres"]["environment"]
    assert url.drivername == "postgresql+psycopg" and importlib.util.find_spec("psycopg") is not None
    assert (url.host, url.port) == ("postgres", 5432)
    assert (url.username, url.password, url.database) == (
        postgres["POSTGRES_USER"], postgres["POSTGRES_PASSWORD"], postgres["POSTGRES_DB"],
    )
    chroma = services["chroma"]["command"]
    assert settings.chroma_url == f"http://chroma:{chroma[chroma.index('--port') + 1]}"
    assert settings.embed_model == LOCAL_EMBED_MODEL
    assert settings.llm_model is None, "without RAG_LLM_MODEL in the shell, answers are extractive"
    assert settings.llm.api_key is None and settings.llm.api_base is None


def test_the_chroma_image_is_the_installed_chromadb_version(compose):
    image, _, tag = compose["services"]["chroma"]["image"].partition(":")
    assert image == "chromadb/chroma"
    installed = importlib.metadata.version("chromadb")
    assert tag.split(".")[:2] == installed.split(".")[:2], (
        f"chromadb/chroma:{tag} serves a client of chromadb {installed}: pin a {'.'.join(installed.split('.')[:2])}.x tag"
    )


# ----- the Dockerfile -----


def test_the_image_installs_with_the_script_ci_uses():
    assert _one("FROM") == "python:3.11-slim"
    runs = [rest for keyword, rest in _instructions() if keyword == "RUN"]
    install = [run for run in runs if "bash scripts/install.sh" in run]
    assert len(install) == 1
    assert "--test" not in install[0], "the image needs no PostgreSQL server of its own"
    assert "bash scripts/install.sh" in (ROOT / ".ci" / "run").read_text()
    assert "TORCH_INDEX_URL" in install[0] and "TORCH_INDEX_URL" in (ROOT / "scripts" / "install.sh").read_text()
    assert "download.pytorch.org/whl/cpu" in _one("ARG"), "a plain torch is a CUDA build of several GB"

    user = _one("USER").split(":")[0]
    assert user not in ("root", "0")
    env = _image_env()
    assert env["OPENBLAS_NUM_THREADS"] == "1" and env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert ".venv/bin" in env["PATH"]
    assert _one("EXPOSE") == "8000"


def test_the_image_serves_with_rag_serve_and_options_it_has():
    from typer.main import get_command

    from rag.cli import app

    cmd = _cmd()
    assert cmd.startswith("exec rag serve "), "exec: rag gets the container's signals"
    assert "--host 0.0.0.0" in cmd and "--port 8000" in cmd
    serve = get_command(app).commands["serve"]
    known = {opt for param in serve.params for opt in param.opts}
    for option in re.findall(r"--[a-z-]+", cmd):
        assert option in known, f"`rag serve` has no {option} option"


def test_the_build_context_leaves_local_builds_out():
    ignored = set((ROOT / ".dockerignore").read_text().split())
    # A copied .venv would be reused by scripts/install.sh, with this machine's paths in it.
    assert {".venv", ".git", ".cache"} <= ignored
    assert "**/__pycache__" in ignored and "*.egg-info" in ignored


# ----- the Docker Compose command line -----


def _compose_cli() -> list[str] | None:
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0:
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    return [legacy] if legacy else None


def test_docker_compose_config_accepts_the_file(compose, tmp_path):
    cli = _compose_cli()
    if cli is None:
        message = "no Docker Compose command line (`bash scripts/install.sh --test` installs one)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    # Nothing from this shell or a local docker/.env: the file's own defaults.
    env = {key: os.environ[key] for key in ("PATH", "HOME", "DOCKER_CONFIG") if key in os.environ}
    no_env_file = tmp_path / "empty.env"  # docker-compose 1.x takes no /dev/null here
    no_env_file.write_text("")
    result = subprocess.run(
        [*cli, "--env-file", str(no_env_file), "-f", str(COMPOSE), "config"],
        capture_output=True, text=True, env=env, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    rendered = yaml.safe_load(result.stdout)
    assert set(rendered["services"]) == {"rag", "postgres", "chroma"}
    assert set(rendered["volumes"]) == set(compose["volumes"])
    wanted = {key: str(value) for key, value in compose["services"]["rag"]["environment"].items() if value is not None}
    got = {key: str(value) for key, value in rendered["services"]["rag"]["environment"].items() if value is not None}
    assert got == wanted, "Compose renders the settings the other tests read"
    for name in ("postgres", "chroma"):
        assert rendered["services"]["rag"]["depends_on"][name]["condition"] == "service_healthy"
