#!/usr/bin/env bash
# Start (or stop) the servers the scale-out tests run against: a PostgreSQL from Debian's packages
# and a Chroma server (`chroma run`, from the project's .venv), both on 127.0.0.1, with their data
# in a scratch directory. `start` prints the variables the tests read:
#
#   eval "$(bash scripts/test-servers.sh start DIR)"   # exports RAG_TEST_POSTGRES, RAG_TEST_CHROMA_URL
#   bash scripts/test-servers.sh stop DIR
#
# Without them, the tests start their own servers (tests/support/pgserver.py, tests/support/chromaserver.py).
set -euo pipefail
cd "$(dirname "$0")/.."

action="${1:?usage: test-servers.sh start|stop DIR}"
dir="${2:?usage: test-servers.sh start|stop DIR}"
# Free ports unless given: another run's servers (another checkout, a helper's tests) may hold the usual ones.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PG_PORT="${PG_PORT:-$(free_port)}"
CHROMA_PORT="${CHROMA_PORT:-$(free_port)}"

bindir=$(dirname "$(ls /usr/lib/postgresql/*/bin/initdb | sort -V | tail -1)")
as_postgres=()
if [ "$(id -u)" = 0 ]; then as_postgres=(runuser -u postgres --); fi

case "$action" in
start)
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    if [ "$(id -u)" = 0 ]; then chown postgres:postgres "$dir"; fi
    "${as_postgres[@]}" "$bindir/initdb" -D "$dir/pg" -U postgres --auth=trust -E UTF8 >"$dir/initdb.log" 2>&1
    "${as_postgres[@]}" "$bindir/pg_ctl" -D "$dir/pg" -l "$dir/pg.log" -w \
        -o "-p $PG_PORT -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off -c max_connections=300" \
        start >&2
    mkdir -p "$dir/chroma"
    nohup .venv/bin/chroma run --host 127.0.0.1 --port "$CHROMA_PORT" --path "$dir/chroma" >"$dir/chroma.log" 2>&1 &
    echo $! >"$dir/chroma.pid"
    for _ in $(seq 1 300); do  # its heartbeat, for up to 60 s
        if .venv/bin/python -c "import chromadb; chromadb.HttpClient(host='127.0.0.1', port=$CHROMA_PORT).heartbeat()" \
            >/dev/null 2>&1; then
            echo "export RAG_TEST_POSTGRES=postgresql://postgres@127.0.0.1:$PG_PORT/postgres"
            echo "export RAG_TEST_CHROMA_URL=http://127.0.0.1:$CHROMA_PORT"
            exit 0
        fi
        sleep 0.2
    done
    echo "the Chroma server did not start; see $dir/chroma.log" >&2
    exit 1
    ;;
stop)
    if [ -f "$dir/chroma.pid" ]; then kill "$(cat "$dir/chroma.pid")" 2>/dev/null || true; fi
    if [ -d "$dir/pg" ]; then "${as_postgres[@]}" "$bindir/pg_ctl" -D "$dir/pg" -m fast stop >&2 || true; fi
    rm -rf "$dir"
    ;;
*)
    echo "usage: test-servers.sh start|stop DIR" >&2
    exit 2
    ;;
esac
