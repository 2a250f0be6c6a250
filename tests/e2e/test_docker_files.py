"""docker/: what a user would check before a first `docker compose up`, without a Docker engine.

The compose file is rendered by the Docker Compose command line (`docker compose config`, or the
older `docker-compose config` that `scripts/install.sh --test` installs from Debian); the rest is
read from the files: the rag service waits for a healthy PostgreSQL and Chroma, every service keeps
its data in a named volume and has a health check, the settings it passes are ones
`rag.settings.Settings` reads and point at those services, the database password has no default
(Compose refuses to start without one), rag gets more time to stop than its shutdown grace, the
image installs its runtime packages only with CI's script and serves with `rag serve`, and the
Chroma image is the version of the installed chromadb client.
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

from rag.settings import LOCAL_EMBED_MODEL, HttpSettings, Settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker" / "compose.yaml"
DOCKERFILE = ROOT / "docker" / "Dockerfile"

# ${NAME}, ${NAME:-default}, ${NAME:?message} (required), and $$ (a literal $), as Compose reads them.
_INTERPOLATION = re.compile(r"\$\$|\$\{(\w+)(?:(:-|:\?)([^}]*))?\}")
# The one variable the file requires (no default password), as a user sets it.
REQUIRED = {"POSTGRES_PASSWORD": "a-password-of-the-tests"}
# How long `rag serve` waits for the requests in progress after SIGTERM (RAG_HTTP__SHUTDOWN_SECONDS).
SHUTDOWN_GRACE_SECONDS = HttpSettings.model_fields["shutdown_seconds"].default


def _interpolate(match: re.Match, variables: dict[str, str]) -> str:
    if match.group(0) == "$$":
        return "$"
    name, kind, word = match.groups()
    if variables.get(name):
        return variables[name]
    if kind == ":?":
        raise KeyError(f"{name} is required: {word}")
    return word or ""


def _rendered(value, variables: dict[str, str]):
    """The compose file as Compose renders it with only `variables` set."""
    if isinstance(value, dict):
        return {key: _rendered(item, variables) for key, item in value.items()}
    if isinstance(value, list):
        return [_rendered(item, variables) for item in value]
    if isinstance(value, str):
        return _INTERPOLATION.sub(lambda m: _interpolate(m, variables), value)
    return value


@pytest.fixture(scope="module")
def compose() -> dict:
    return _rendered(yaml.safe_load(COMPOSE.read_text()), REQUIRED)


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


def test_the_database_password_has_no_default():
    raw = yaml.safe_load(COMPOSE.read_text())
    for service in ("rag", "postgres"):
        with pytest.raises(KeyError, match="POSTGRES_PASSWORD is required"):
            _rendered(raw["services"][service]["environment"], {})


def _seconds(duration: str) -> float:
    """A Compose duration such as 30s, 1m30s or 1m."""
    parts = re.fullmatch(r"(?:(\d+)m)?(?:(\d+)s)?", str(duration))
    assert parts and any(parts.groups()), f"not a duration of minutes and seconds: {duration!r}"
    minutes, seconds = (int(part or 0) for part in parts.groups())
    return minutes * 60 + seconds


def test_rag_has_longer_to_stop_than_its_shutdown_grace(compose):
    """Docker sends SIGKILL 10 s after SIGTERM unless told otherwise: less than rag's 20 s grace."""
    assert "RAG_HTTP__SHUTDOWN_SECONDS" not in compose["services"]["rag"]["environment"]
    assert _seconds(compose["services"]["rag"]["stop_grace_period"]) > SHUTDOWN_GRACE_SECONDS


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


def unknown_settings(keys) -> list[str]:
    """The names among `keys` that neither rag.settings.Settings (a setting, or a secret's `_FILE`)
    nor `rag serve` (RAG_WORKERS) reads."""
    from typer.main import get_command

    from rag.cli import app
    from rag.config_file import file_variable
    from rag.settings import secret_settings

    params = get_command(app).commands["serve"].params
    other = {param.envvar for param in params if isinstance(param.envvar, str)}
    other |= {file_variable(path) for path in secret_settings()}
    nested = {name: field.annotation for name, field in Settings.model_fields.items()}
    unknown = []
    for key in keys:
        head, _, tail = key.removeprefix("RAG_").lower().partition("__")
        known = head in nested and (not tail or tail in getattr(nested[head], "model_fields", {}))
        if key not in other and not (key.startswith("RAG_") and known):
            unknown.append(key)
    return unknown


def settings_read_from(env: dict[str, str], monkeypatch) -> Settings:
    """rag.settings.Settings as a process whose only `RAG_` variables are `env` reads them."""
    for key in list(os.environ):
        if key.startswith("RAG_"):
            monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return Settings()


def test_the_rag_environment_is_what_settings_reads_and_points_at_the_services(compose, monkeypatch):
    services = compose["services"]
    env = services["rag"]["environment"]
    assert not unknown_settings(env), f"no setting of rag.settings.Settings: {unknown_settings(env)}"
    assert "${RAG_WORKERS" in _cmd(), "RAG_WORKERS is read by the image's CMD"

    # A bare name is passed through from the shell only when set there.
    passed = {key: str(value) for key, value in env.items() if value is not None}
    settings = settings_read_from({**passed, "RAG_HOME": _image_env()["RAG_HOME"]}, monkeypatch)

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
    assert "--runtime" in install[0], "the image installs the runtime packages, not the test tools"
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


def _compose_config(tmp_path: Path, variables: dict[str, str]) -> subprocess.CompletedProcess:
    """`config` with only `variables` set: nothing from this shell or a local docker/.env."""
    cli = _compose_cli()
    if cli is None:
        message = "no Docker Compose command line (`bash scripts/install.sh --test` installs one)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    env = {key: os.environ[key] for key in ("PATH", "HOME", "DOCKER_CONFIG") if key in os.environ}
    no_env_file = tmp_path / "empty.env"  # docker-compose 1.x takes no /dev/null here
    no_env_file.write_text("")
    return subprocess.run(
        [*cli, "--env-file", str(no_env_file), "-f", str(COMPOSE), "config"],
        capture_output=True, text=True, env={**env, **variables}, timeout=60,
    )


def test_docker_compose_config_accepts_the_file(compose, tmp_path):
    result = _compose_config(tmp_path, REQUIRED)
    assert result.returncode == 0, result.stderr
    rendered = yaml.safe_load(result.stdout)
    assert set(rendered["services"]) == {"rag", "postgres", "chroma"}
    assert set(rendered["volumes"]) == set(compose["volumes"])
    wanted = {key: str(value) for key, value in compose["services"]["rag"]["environment"].items() if value is not None}
    got = {key: str(value) for key, value in rendered["services"]["rag"]["environment"].items() if value is not None}
    assert got == wanted, "Compose renders the settings the other tests read"
    for name in ("postgres", "chroma"):
        assert rendered["services"]["rag"]["depends_on"][name]["condition"] == "service_healthy"
    assert _seconds(rendered["services"]["rag"]["stop_grace_period"]) > SHUTDOWN_GRACE_SECONDS


@pytest.mark.parametrize("password", [None, ""], ids=["unset", "empty"])
def test_docker_compose_refuses_to_start_without_a_database_password(tmp_path, password):
    variables = {} if password is None else {"POSTGRES_PASSWORD": password}
    result = _compose_config(tmp_path, variables)
    assert result.returncode != 0, "Compose rendered the file without a database password"
    assert "set POSTGRES_PASSWORD in the shell or docker/.env" in result.stderr, result.stderr


def _engine() -> bool:
    docker = shutil.which("docker")
    if docker is None:
        return False
    return subprocess.run([docker, "info"], capture_output=True, timeout=60).returncode == 0


@pytest.mark.skipif(not _engine(), reason="no Docker engine answers here (`docker info`): the image is built where one does")
def test_the_image_builds_runs_as_no_root_and_has_no_test_tools(tmp_path):
    """Where an engine exists (not on this project's machine): the image builds from the
    repository, `rag --help` runs in it as a user other than root, and none of the test tools is in it."""
    tag = f"rag-build-check:{os.getpid()}"
    built = subprocess.run(["docker", "build", "-f", str(DOCKERFILE), "-t", tag, str(ROOT)],
                           capture_output=True, text=True, timeout=3600)
    assert built.returncode == 0, built.stderr[-3000:]
    try:
        ran = subprocess.run(["docker", "run", "--rm", "--entrypoint", "sh", tag, "-c",
                              "id -u; rag --help >/dev/null; echo rag=$?; python -c 'import pytest' 2>&1; true"],
                             capture_output=True, text=True, timeout=600)
        uid, said, *rest = ran.stdout.splitlines()
        assert ran.returncode == 0 and uid != "0" and said == "rag=0", ran.stdout + ran.stderr
        assert "No module named 'pytest'" in "\n".join(rest)
    finally:
        subprocess.run(["docker", "image", "rm", "-f", tag], capture_output=True, timeout=300)
