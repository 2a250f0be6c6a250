#!/usr/bin/env bash
# Set up .venv with the project and its test tools. Safe to run again: it only adds what is missing.
#   bash scripts/install.sh            # the project and its test tools (.[dev])
#   bash scripts/install.sh --test     # the same, and the programs the tests run (below)
#   bash scripts/install.sh --runtime  # the project's runtime packages only: the image (docker/Dockerfile)
#   bash scripts/install.sh --ocr      # the project and OCR: Debian's tesseract-ocr (any position: --runtime --ocr)
# Every Python package gets the version requirements.lock pins (a constraints file: `bash
# scripts/lock.sh` writes it again after a change to pyproject.toml's dependencies).
set -euo pipefail
cd "$(dirname "$0")/.."

# --test: also install what the tests need beyond Python packages: a PostgreSQL server (Debian
# package), which the store tests start and stop themselves.
if [ "${1:-}" = "--test" ] && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    echo "installing PostgreSQL server binaries for the tests"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
# --test: and Dovecot's IMAP server (Debian's dovecot-imapd), which the IMAP source's tests start and
# stop themselves, unprivileged, from a config in a temp dir (tests/support/imapserver.py).
if [ "${1:-}" = "--test" ] && [ ! -x /usr/sbin/dovecot ]; then
    echo "installing Dovecot (dovecot-imapd) for the IMAP source's tests"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends dovecot-imapd >/dev/null
fi
# --ocr (and --test): OCR of images and scanned PDF pages (rag/ingest/formats/ocr.py) runs the
# `tesseract` command: Debian's tesseract-ocr 5 with its English data (tesseract-ocr-eng, a
# dependency; other languages are tesseract-ocr-LANG and RAG_PARSING__OCR_LANGUAGES). Optional:
# without it images and scans are refused, saying to run this.
if [[ " $* " == *" --ocr "* || "${1:-}" = "--test" ]] && ! command -v tesseract >/dev/null 2>&1; then
    echo "installing tesseract-ocr for OCR of images and scanned PDFs"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends tesseract-ocr >/dev/null
fi
# --test: and a Docker Compose command line, which tests/e2e/test_docker_files.py runs as `config` on
# docker/compose.yaml. Debian's docker-compose (1.29) without the Docker engine it recommends: a few
# small Python packages, seconds to install; `config` needs no engine.
if [ "${1:-}" = "--test" ] && ! command -v docker-compose >/dev/null 2>&1 && ! docker compose version >/dev/null 2>&1; then
    echo "installing docker-compose (the command line only) for the tests"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-compose >/dev/null
fi
# --test: and kubectl, whose `kubectl kustomize` tests/e2e/test_k8s_manifests.py renders deploy/k8s
# with: Debian's kubernetes-client (1.20, kustomize v2.0.3) where no kubectl is on the PATH. The
# ServiceMonitor component and overlays need kustomize >= 3.7 (kubectl >= 1.21): with an older one,
# their tests skip.
if [ "${1:-}" = "--test" ] && ! command -v kubectl >/dev/null 2>&1; then
    echo "installing kubectl (Debian's kubernetes-client) for the tests"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends kubernetes-client >/dev/null
fi
# --test: and Chromium with its WebDriver, which the editor's end-to-end tests drive headless
# (tests/e2e/test_editor_browser.py, through Selenium and /usr/bin/chromedriver; nothing is downloaded at run time).
if [ "${1:-}" = "--test" ] && { [ ! -x /usr/bin/chromedriver ] || ! command -v chromium >/dev/null 2>&1; }; then
    echo "installing chromium and chromium-driver for the editor's browser tests"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
fi
# --test: and a Node.js the MCP Inspector 2.x runs on (>= 22.19), which tests/e2e/test_mcp_stdio.py
# drives `rag mcp` with: the PATH's own when new enough, else one from the npm registry in the cache.
if [ "${1:-}" = "--test" ]; then
    bash scripts/install-node.sh
fi

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip wheel

# torch first, pinned, so pip takes the CPU build that lies on this machine's disk; a bare
# `torch` requirement would pull a CUDA build of several GB. Elsewhere, point TORCH_INDEX_URL at
# a CPU wheel index to get the same.
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
    if [ -n "${TORCH_INDEX_URL:-}" ]; then
        .venv/bin/pip install --quiet "torch==2.13.0" --index-url "$TORCH_INDEX_URL"
    else
        .venv/bin/pip install --quiet "torch==2.13.0"
    fi
fi
# The versions of requirements.lock; the test tools only outside the image.
if [ "${1:-}" = "--runtime" ]; then
    .venv/bin/pip install --quiet -e . -c requirements.lock
else
    .venv/bin/pip install --quiet -e ".[dev]" -c requirements.lock
fi
# The local model as ONNX (fp32, and int8 for queries), exported once into the user cache
# (RAG_EMBED__ONNX_DIR): query time then needs no torch. Skipped when the files are there.
.venv/bin/python -m rag.models.export_onnx
.venv/bin/python -c "import torch, rag; print(f'installed rag {rag.__version__} with torch {torch.__version__}')"
