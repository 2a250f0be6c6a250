#!/usr/bin/env bash
# A Node.js for the MCP Inspector: @modelcontextprotocol/inspector@2.12.0 (README.md, docs/mcp.md,
# tests/e2e/test_mcp_stdio.py) needs Node >= 22.19. When the `node` on PATH is older, Node 22.23.3 is
# installed into ${XDG_CACHE_HOME:-~/.cache}/rag/node from the npm registry, the one place npx
# downloads from anyway: the package node-linux-<arch> is the official binary (no install script
# runs). tests/e2e/test_mcp_stdio.py puts its node_modules/.bin first on PATH. Run by
# `scripts/install.sh --test`; safe to run again (it only adds what is missing).
set -euo pipefail

NEEDED=22.19.0
VERSION=22.23.3
dir="${XDG_CACHE_HOME:-$HOME/.cache}/rag/node"

new_enough() {  # the node at $1 is at least $NEEDED
    local have
    have="$("$1" -p 'process.versions.node' 2>/dev/null)" || return 1
    [ "$(printf '%s\n' "$NEEDED" "$have" | sort -V | head -n 1)" = "$NEEDED" ]
}

if command -v node >/dev/null 2>&1 && new_enough node; then
    exit 0  # the PATH's own node runs the Inspector
fi
if [ -x "$dir/node_modules/.bin/node" ] && [ "$("$dir/node_modules/.bin/node" --version)" = "v$VERSION" ]; then
    exit 0
fi
if ! command -v npm >/dev/null 2>&1; then  # npm (and npx) themselves: Debian's, whatever their Node
    echo "installing npm for the MCP Inspector tests"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null
fi
case "$(uname -m)" in
    x86_64) arch=x64 ;;
    aarch64 | arm64) arch=arm64 ;;
    *) echo "no Node $VERSION package for $(uname -m): install Node >= $NEEDED for the MCP Inspector" >&2; exit 1 ;;
esac
echo "installing Node $VERSION (node-linux-$arch from the npm registry) into $dir for the MCP Inspector"
mkdir -p "$dir"
npm install --prefix "$dir" --no-audit --no-fund --ignore-scripts --loglevel=error "node-linux-$arch@$VERSION" >/dev/null
"$dir/node_modules/.bin/node" --version >/dev/null
