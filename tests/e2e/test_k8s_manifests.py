"""deploy/k8s: what a platform team would check before `kubectl apply -k`, without a cluster.

The base is rendered by `kubectl kustomize` (`bash scripts/install.sh --test` installs Debian's
kubectl where none is on the PATH), alone and with the ServiceMonitor component, and every object is
validated with kubernetes-validate against the API schemas of a pinned Kubernetes release, strictly
(an unknown or misspelt field fails). The ServiceMonitor is a custom resource of the Prometheus
Operator, whose schema kubernetes-validate does not have: its few fields are checked here instead.
Then what a user would look for: `rag serve` on every interface with options it has, the probes on
/livez and /readyz, a grace period longer than the server's shutdown, no secret value in the
objects, resource requests, a non-root read-only container that can still write where rag writes,
settings rag reads, selectors that find the pods, the ServiceMonitor's token the pods' own, and the
overlay docs/deployment.md shows rendering as it says.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import textwrap
from pathlib import Path
from urllib.parse import urlsplit

import kubernetes_validate
import pytest
import yaml

from rag.settings import secret_settings

from .test_docker_files import SHUTDOWN_GRACE_SECONDS, _image_env, _one, settings_read_from, unknown_settings

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "deploy" / "k8s"
DOCS = ROOT / "docs" / "deployment.md"
SERVICEMONITOR = BASE / "components" / "servicemonitor"
# The oldest release the manifests are written for: PodDisruptionBudget's unhealthyPodEvictionPolicy
# is generally available from 1.31.
KUBERNETES_VERSION = "1.31.0"
# Settings whose values are secrets: only ever by reference (secretKeyRef), never a value.
# The variables of rag's secret settings (and of the secrets sources name), as rag itself lists them.
SECRET_VARIABLES = {"RAG_" + "__".join(path).upper() for path in secret_settings()}


def _secret(name: str) -> bool:
    return name.removesuffix("_FILE") in SECRET_VARIABLES or name.startswith("RAG_SOURCE_SECRETS__")


def _kubectl() -> str:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        message = "no kubectl (`bash scripts/install.sh --test` installs Debian's kubernetes-client)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return kubectl


def _kustomize(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([_kubectl(), "kustomize", str(path)], capture_output=True, text=True, timeout=120)


def _objects(result: subprocess.CompletedProcess) -> list[dict]:
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


@pytest.fixture(scope="module")
def base() -> list[dict]:
    return _objects(_kustomize(BASE))


def _kustomize_version() -> tuple[int, ...]:
    """The kustomize inside kubectl: `Kustomize Version: v5.5.0`; kubectl 1.20 and older print none
    and carry v2.0.3, which knows neither components nor folders under `resources`."""
    result = subprocess.run([_kubectl(), "version", "--client"], capture_output=True, text=True, timeout=60)
    found = re.search(r"Kustomize Version: v(\d+)\.(\d+)", result.stdout)
    return tuple(int(part) for part in found.groups()) if found else (2, 0)


def _overlay(root: Path, kustomization: dict) -> list[dict]:
    """An overlay of a user's, in overlays/prod beside a checkout of this repository at rag/."""
    if _kustomize_version() < (3, 7):
        pytest.skip("this kubectl's kustomize predates components and folders as resources "
                    "(kustomize >= 3.7, kubectl >= 1.21)")
    (root / "rag").symlink_to(ROOT, target_is_directory=True)
    overlay = root / "overlays" / "prod"
    overlay.mkdir(parents=True)
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return _objects(_kustomize(overlay))


@pytest.fixture(scope="module")
def monitored(tmp_path_factory) -> list[dict]:
    """The base with the ServiceMonitor component, as a user's overlay adds it."""
    return _overlay(tmp_path_factory.mktemp("monitored"), {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": ["../../rag/deploy/k8s"],
        "components": ["../../rag/deploy/k8s/components/servicemonitor"],
    })


def _only(objects: list[dict], kind: str) -> dict:
    found = [obj for obj in objects if obj["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def _pod(objects: list[dict]) -> dict:
    return _only(objects, "Deployment")["spec"]["template"]


def _container(objects: list[dict]) -> dict:
    (container,) = _pod(objects)["spec"]["containers"]
    return container


def _environment(objects: list[dict]) -> dict[str, dict | str]:
    """The container's variables: a ConfigMap's values as strings, the others as their `env` entries."""
    container = _container(objects)
    maps = {obj["metadata"]["name"]: obj.get("data", {}) for obj in objects if obj["kind"] == "ConfigMap"}
    env: dict[str, dict | str] = {}
    for source in container.get("envFrom", []):
        env.update(maps[source["configMapRef"]["name"]])
    env.update({item["name"]: item for item in container.get("env", [])})
    return env


# ----- the objects -----


def test_the_base_holds_the_api_and_what_it_needs(base):
    assert sorted(obj["kind"] for obj in base) == [
        "ConfigMap", "Deployment", "PodDisruptionBudget", "Service", "ServiceAccount",
    ]
    assert not any(obj.get("metadata", {}).get("namespace") for obj in base), "the namespace is the user's to set"


@pytest.mark.parametrize("render", ["base", "monitored"])
def test_every_object_is_valid_for_the_pinned_kubernetes(render, request):
    for obj in request.getfixturevalue(render):
        if obj["apiVersion"].startswith("monitoring.coreos.com/"):
            continue  # a custom resource: no schema in kubernetes-validate (see the ServiceMonitor test)
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{obj['kind']} {obj['metadata']['name']}: {exc}", pytrace=False)


def test_the_servicemonitor_component_scrapes_metrics_with_the_pods_token(base, monitored):
    added = [obj for obj in monitored if obj["kind"] not in {o["kind"] for o in base}]
    assert [obj["kind"] for obj in added] == ["ServiceMonitor"], "the component adds the ServiceMonitor only"
    monitor = added[0]
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    service = _only(base, "Service")
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items(), "it selects the rag Service by its labels"
    ports = {port["name"] for port in service["spec"]["ports"]}
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in ports and endpoint["path"] == "/metrics" and endpoint.get("scheme", "http") == "http"

    # /metrics answers a scrape from another pod only with RAG_TELEMETRY__METRICS_TOKEN: the pods read
    # it from the file of the Secret key that the ServiceMonitor sends.
    credentials = endpoint["authorization"]["credentials"]
    assert endpoint["authorization"].get("type", "Bearer") == "Bearer"
    (mount, secret), = _secret_mounts(base).items()
    assert credentials["name"] == secret
    env = _environment(monitored)
    assert env["RAG_TELEMETRY__METRICS_TOKEN_FILE"]["value"] == f"{mount}/{credentials['key']}"
    assert not unknown_settings(env), f"no setting of rag.settings.Settings: {unknown_settings(env)}"
    assert {k: v for k, v in env.items() if k != "RAG_TELEMETRY__METRICS_TOKEN_FILE"} == _environment(base), (
        "the component changes nothing else of the pods"
    )
    for obj in monitored:
        if obj["kind"] not in ("ServiceMonitor", "Deployment"):
            assert obj in base


def _documented_yaml() -> list[dict]:
    """The YAML blocks of docs/deployment.md's "Kubernetes" section, in order."""
    text = DOCS.read_text(encoding="utf-8")
    section = text[text.index("\n## Kubernetes\n"):text.index("\n## The image and its lock file\n")]
    return [yaml.safe_load(textwrap.dedent(block)) for block in re.findall(r"```yaml\n(.*?)```", section, re.S)]


def test_the_documented_overlay_renders_and_validates(base, tmp_path):
    overlay, component = _documented_yaml()
    assert overlay["kind"] == "Kustomization" and list(component) == ["components"]
    objects = _overlay(tmp_path, {**overlay, **component})
    for obj in objects:
        assert obj["metadata"]["namespace"] == overlay["namespace"]
        if not obj["apiVersion"].startswith("monitoring.coreos.com/"):
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    (image,) = overlay["images"]
    assert _container(objects)["image"] == f"{image['newName']}:{image['newTag']}"
    env = _environment(objects)
    literals = dict(item.split("=", 1) for item in overlay["configMapGenerator"][0]["literals"])
    assert literals.items() <= env.items() and _environment(base).keys() <= env.keys(), "merged, not replaced"
    assert not unknown_settings(env), f"no setting of rag.settings.Settings: {unknown_settings(env)}"
    assert literals["RAG_LLM__API_KEY_FILE"].startswith(next(iter(_secret_mounts(base))) + "/")


# ----- the API pods -----


def test_the_pods_run_rag_serve_on_every_interface_with_options_it_has(base):
    from typer.main import get_command

    from rag.cli import app

    command = _container(base)["command"]
    assert command[:2] == ["rag", "serve"]
    options = dict(zip(command[2::2], command[3::2]))
    serve = get_command(app).commands["serve"]
    known = {opt for param in serve.params for opt in param.opts}
    assert set(options) <= known, f"`rag serve` has no {set(options) - known}"
    assert options["--host"] == "0.0.0.0", "the kubelet, the Service and other pods reach the pod's address"
    ports = {port["name"]: port["containerPort"] for port in _container(base)["ports"]}
    assert ports == {"http": int(options["--port"])}


def _probe_path(probe: dict, container: dict) -> str:
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    port = probe["httpGet"]["port"]
    assert ports.get(port, port) == ports["http"], "the probe asks the port rag serves"
    return probe["httpGet"]["path"]


def test_the_probes_ask_livez_and_readyz(base):
    container = _container(base)
    assert _probe_path(container["startupProbe"], container) == "/livez"
    # Alive is the process answering: a PostgreSQL or Chroma outage must not restart every pod.
    assert _probe_path(container["livenessProbe"], container) == "/livez"
    assert _probe_path(container["readinessProbe"], container) == "/readyz"
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 300, (
        "start-up (migrations, resumed publishes, vectors put back) gets at least 5 minutes"
    )


def test_the_probes_are_routes_the_app_serves(tmp_path):
    from rag.api import create_app
    from rag.settings import Settings

    app = create_app(Settings(home=tmp_path))  # built, never started
    assert {"/livez", "/readyz"} <= app.openapi()["paths"].keys()


def test_the_grace_period_outlasts_the_server_s_shutdown(base):
    pod = _pod(base)
    container = _container(base)
    pause = 0
    if "preStop" in container.get("lifecycle", {}):
        sleep = container["lifecycle"]["preStop"]["exec"]["command"]
        assert sleep[0] == "sleep", sleep
        pause = int(sleep[1])
    # Kubernetes counts the preStop pause inside the grace period, then sends SIGTERM.
    shutdown = float(_environment(base).get("RAG_HTTP__SHUTDOWN_SECONDS", SHUTDOWN_GRACE_SECONDS))
    assert pod["spec"]["terminationGracePeriodSeconds"] > pause + shutdown


def _secret_mounts(objects: list[dict]) -> dict[str, str]:
    """mount path -> the Secret whose keys are files there."""
    volumes = {volume["name"]: volume for volume in _pod(objects)["spec"]["volumes"]}
    return {mount["mountPath"]: volumes[mount["name"]]["secret"]["secretName"]
            for mount in _container(objects)["volumeMounts"] if "secret" in volumes[mount["name"]]}


def test_no_secret_value_is_in_the_objects(base):
    # (the component adds a ServiceMonitor only: test_the_servicemonitor_component_…)
    assert not [obj for obj in base if obj["kind"] == "Secret"], "secrets are the user's, created apart"
    mounts = _secret_mounts(base)
    for name, entry in _environment(base).items():
        value = entry if isinstance(entry, str) else entry.get("value")
        if _secret(name):
            if name.endswith("_FILE"):  # a file of a mounted Secret
                assert value and any(value.startswith(path + "/") for path in mounts), f"{name}: {value}"
            else:
                assert value is None and "secretKeyRef" in entry.get("valueFrom", {}), (
                    f"{name} must come from a Secret by reference"
                )
        assert urlsplit(value or "").password is None, f"{name} holds a password"


def test_every_container_requests_resources_and_caps_memory(base):
    for container in _pod(base)["spec"]["containers"]:
        resources = container["resources"]
        assert {"cpu", "memory"} <= resources["requests"].keys()
        assert "memory" in resources["limits"]


def test_the_container_runs_as_the_image_s_user_on_a_read_only_root(base):
    pod, container = _pod(base)["spec"], _container(base)
    security = pod["securityContext"]
    assert security["runAsNonRoot"] is True
    assert str(security["runAsUser"]) == _one("USER").split(":")[0], "the image's user (docker/Dockerfile)"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert pod["automountServiceAccountToken"] is False
    # Where rag writes (RAG_HOME, temporary files, onnxruntime's file under $HOME) is a volume.
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    mounted = {mount["mountPath"]: volumes[mount["name"]] for mount in container["volumeMounts"]}
    for path in (_image_env()["RAG_HOME"], "/tmp", "/home/rag"):
        assert path in mounted and "emptyDir" in mounted[path], f"{path} is not writable"


def test_the_settings_are_what_rag_reads_and_name_servers(base, monkeypatch, tmp_path):
    env = _environment(base)
    assert not unknown_settings(env), f"no setting of rag.settings.Settings: {unknown_settings(env)}"
    values = {name: entry for name, entry in env.items() if isinstance(entry, str)}
    values.update({name: entry["value"] for name, entry in env.items() if isinstance(entry, dict) and "value" in entry})
    # The Secret's file, as the kubelet mounts it, here.
    (path, secret), = _secret_mounts(base).items()
    assert values["RAG_DATABASE_URL_FILE"].startswith(path + "/")
    local = tmp_path / "database-url"
    local.write_text("postgresql+psycopg://rag:from-the-secret@postgres:5432/rag\n")
    values["RAG_DATABASE_URL_FILE"] = str(local)
    values["RAG_HOME"] = _image_env()["RAG_HOME"]
    settings = settings_read_from(values, monkeypatch)
    assert settings.database_url == "postgresql+psycopg://rag:from-the-secret@postgres:5432/rag", (
        f"the database URL comes from the Secret {secret}"
    )
    assert not settings.embedded, "several pods, and RAG_WORKERS above 1, need PostgreSQL and a Chroma server"
    assert settings.allowed_hosts != ["localhost"], "/mcp answers the Service's name"
    assert settings.first_token is False, "a first admin token's secret would go with one pod's emptyDir"


def test_the_service_and_the_budget_find_the_pods(base):
    labels = _pod(base)["metadata"]["labels"]
    deployment = _only(base, "Deployment")
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    service = _only(base, "Service")
    assert service["spec"]["selector"].items() <= labels.items()
    assert [port["targetPort"] for port in service["spec"]["ports"]] == ["http"]
    budget = _only(base, "PodDisruptionBudget")["spec"]
    assert budget["selector"]["matchLabels"].items() <= labels.items()
    assert deployment["spec"]["replicas"] - budget["maxUnavailable"] >= 1, "a drain leaves a pod serving"
