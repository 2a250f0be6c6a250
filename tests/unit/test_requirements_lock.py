"""requirements.lock: the versions scripts/install.sh installs (the image and CI), kept in step with
pyproject.toml. A dependency added or narrowed without `bash scripts/lock.sh` fails here, naming it."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements.lock"
INSTALL = ROOT / "scripts" / "install.sh"
AGAIN = "run `bash scripts/lock.sh` to write requirements.lock again"


def _pins() -> dict[str, Version]:
    pins = {}
    for line in LOCK.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep, f"requirements.lock: {line!r} is not `name==version`"
            pins[canonicalize_name(name)] = Version(version.split(";")[0].strip())
    return pins


def _requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    listed = [*project["dependencies"], *(r for extra in project["optional-dependencies"].values() for r in extra)]
    return [Requirement(r) for r in listed]


def _torch_pin() -> Version:
    """The torch release scripts/install.sh installs first (from the CPU wheel index in the image)."""
    pins = set(re.findall(r'"torch==([\w.]+)"', INSTALL.read_text()))
    assert len(pins) == 1, f"scripts/install.sh should pin one torch release, it pins {sorted(pins)}"
    return Version(pins.pop())


@pytest.mark.parametrize("requirement", _requirements(), ids=str)
def test_every_dependency_is_pinned_where_pyproject_allows(requirement):
    name = canonicalize_name(requirement.name)
    if name == "torch":  # pinned by scripts/install.sh, so that any index's build of it passes
        assert name not in _pins(), "torch is pinned by scripts/install.sh, not in requirements.lock"
        assert requirement.specifier.contains(_torch_pin()), f"scripts/install.sh's torch is outside {requirement}"
        return
    pins = _pins()
    assert name in pins, f"{requirement.name} is not in requirements.lock: {AGAIN}"
    assert requirement.specifier.contains(pins[name], prereleases=True), (
        f"requirements.lock pins {requirement.name}=={pins[name]}, outside {requirement}: {AGAIN}"
    )


def test_the_lock_holds_the_cpu_build_s_packages_only():
    cuda = sorted(name for name in _pins() if name.startswith("nvidia-") or name == "triton")
    assert not cuda, f"requirements.lock was resolved with a CUDA torch ({', '.join(cuda)}): {AGAIN}"


def test_install_sh_installs_with_the_lock_and_the_image_without_test_tools():
    installs = [line.strip() for line in INSTALL.read_text().splitlines()
                if re.search(r"pip install .*-e ", line) and not line.lstrip().startswith("#")]
    assert len(installs) == 2, installs
    for line in installs:
        assert "-c requirements.lock" in line, f"scripts/install.sh installs without the lock: {line}"
    runtime = [line for line in installs if "[dev]" not in line]
    assert len(runtime) == 1 and "-e . " in runtime[0], "--runtime installs the project without its extras"
