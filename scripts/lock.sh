#!/usr/bin/env bash
# Write requirements.lock again: the exact version of every package that `pip install ".[dev]"`
# brings, resolved for the image and CI (CPython 3.11 on x86-64 Linux) with torch's CPU build.
# scripts/install.sh installs with it as a constraints file (`-c`): the image (runtime packages only)
# and CI (with the test tools) get these versions and no others. A constraints file installs nothing
# by itself, so the test tools pinned here stay out of the image.
#
#   bash scripts/lock.sh                              # after a change to pyproject.toml's dependencies
#   bash scripts/lock.sh --upgrade-package litellm    # move one package to its newest allowed version
#   bash scripts/lock.sh --upgrade                    # move them all
#
# Versions already in the file are kept wherever pyproject.toml still allows them. torch itself is
# left out: scripts/install.sh pins it (torch==2.13.0) and takes it from TORCH_INDEX_URL, and a
# `+cpu` pin here would refuse the same release from another index. Its CPU build is what the
# resolution sees (no CUDA packages): from TORCH_INDEX_URL (default the CPU wheel index), or from the
# wheel folders in PIP_FIND_LINKS where that is set and TORCH_INDEX_URL is not.
set -euo pipefail
cd "$(dirname "$0")/.."

UV_VERSION=0.13.9
uv="$(command -v uv || true)"
if [ -z "$uv" ]; then
    tools="${XDG_CACHE_HOME:-$HOME/.cache}/rag/uv-$UV_VERSION"
    if [ ! -x "$tools/bin/uv" ]; then
        "${PYTHON:-python3}" -m venv "$tools"
        "$tools/bin/pip" install --quiet "uv==$UV_VERSION"
    fi
    uv="$tools/bin/uv"
fi

torch=()
if [ -z "${TORCH_INDEX_URL:-}" ] && [ -n "${PIP_FIND_LINKS:-}" ]; then
    for links in $PIP_FIND_LINKS; do torch+=(--find-links "$links"); done
else
    # The lock records versions only, so which index a version was seen on does not matter.
    torch+=(--extra-index-url "${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}" --index-strategy unsafe-best-match)
fi
cpu="$(mktemp)"
trap 'rm -f "$cpu"' EXIT
echo "torch==2.13.0+cpu" >"$cpu"

"$uv" pip compile pyproject.toml --extra dev --constraint "$cpu" "${torch[@]}" \
    --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
    --no-emit-package torch --no-header --quiet --output-file requirements.lock "$@"
{
    echo "# Exact versions for scripts/install.sh (pip install -c requirements.lock): the image and CI."
    echo "# Written by \`bash scripts/lock.sh\` from pyproject.toml (runtime and dev) for CPython 3.11 on"
    echo "# x86-64 Linux with torch's CPU build; torch itself is pinned by scripts/install.sh. Do not edit."
    cat requirements.lock
} >requirements.lock.new
mv requirements.lock.new requirements.lock
echo "wrote requirements.lock: $(grep -c '^[A-Za-z0-9]' requirements.lock) packages"
