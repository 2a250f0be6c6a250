"""The CLI's latency as a user feels it: whole processes, from start to exit (issue 16).

On a temporary RAG_HOME holding the 18F handbook (document vectors from the shared embedding
cache), each command is run `--runs` times (default 5) and the median wall time is reported:

- with no server: `rag --help`, `rag search Q`, `rag ask Q` (each process opens the store and its
  models itself), and `rag mcp` until it has answered its first `tools/list` over stdio;
- with `rag serve` running on the same home: `rag search Q` and `rag ask Q`, which the server runs
  for them (rag/client.py), `rag token list`, and `rag mcp` (which relays the server's /mcp).

    python -m benchmarks.cli_latency [--runs 5] [--json out.json]
    python -m benchmarks.cli_latency --imports-of HOME     # only where a cold search and ask go

Targets: cold search <= 2.0 s and ask <= 2.5 s with no server, <= 0.5 s each with a server, the
first MCP tools/list <= 2.0 s. The load average is printed: on a busy machine the figures are not
the code's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import write_json
from benchmarks.http_latency import HANDBOOK, REPO, Served

QUERY = "How much annual leave do I earn?"
TARGETS = {"search": 2.0, "ask": 2.5, "mcp tools/list": 2.0, "search (server)": 0.5, "ask (server)": 0.5,
           "mcp tools/list (server)": 2.0}


def timed(env: dict[str, str], *args: str) -> float:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "rag.cli", *args], env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"rag {' '.join(args)} failed: {done.stderr[-2000:]}")
    return elapsed


def mcp_first_list(env: dict[str, str], token: str) -> float:
    """Seconds from starting `rag mcp` to its answer to the first tools/list (after initialize)."""
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "rag.cli", "mcp"], env=env | {"RAG_TOKEN": token}, text=True,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert process.stdin is not None and process.stdout is not None

    def send(message: dict) -> None:
        process.stdin.write(json.dumps(message) + "\n")
        process.stdin.flush()

    try:
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
        json.loads(process.stdout.readline())
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        listed = json.loads(process.stdout.readline())
        elapsed = time.perf_counter() - started
        if not listed.get("result", {}).get("tools"):
            raise RuntimeError(f"rag mcp did not list its tools: {listed}")
        return elapsed
    finally:
        process.stdin.close()
        process.wait(60)


# Heavy libraries named in the profile wherever they are imported from (not only at the top level).
WATCHED = ("llama_index.core", "chromadb", "onnxruntime", "torch", "sentence_transformers", "litellm", "pydantic_settings",
           "nltk", "transformers", "alembic", "sqlalchemy", "yaml", "pypdfium2", "docx", "lxml")


def import_profile(env: dict[str, str], *args: str, top: int = 8) -> list[tuple[str, float]]:
    """The modules `rag ARGS` imports at the top level, and the WATCHED libraries wherever they
    are imported, by cumulative import time (python -X importtime), the slowest first."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "rag.cli", *args], env=env,
                          capture_output=True, text=True)
    rows = []
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and not line.startswith("import time: self"):
            _, cumulative, name = line[len("import time:"):].split("|")
            if not name[1:].startswith(" "):  # nesting is shown by indentation: top level only
                rows.append((name.strip(), int(cumulative) / 1e6))
            elif name.strip() in WATCHED:
                rows.append((f"  {name.strip()} (within)", int(cumulative) / 1e6))
    return sorted(rows, key=lambda row: -row[1])[:top]


def print_imports(command: str, imports: list[tuple[str, float]]) -> None:
    load = os.getloadavg()
    print(f"\nimports of a cold `rag {command}` (python -X importtime), slowest first (load average {load[0]:.2f})")
    print(f"{'module':<36} {'cumulative s':>12}")
    for name, seconds in imports:
        print(f"{name:<36} {seconds:>12.2f}")


def measure(runs: int, call) -> dict[str, float]:
    seconds = [call() for _ in range(runs)]
    return {"runs": runs, "median_s": round(statistics.median(seconds), 3), "min_s": round(min(seconds), 3),
            "max_s": round(max(seconds), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", help="Also write the results as JSON (- for standard output).")
    parser.add_argument("--imports-of", type=Path, metavar="HOME",
                        help="Only profile the imports of a cold `rag search` and `rag ask` on this existing home.")
    args = parser.parse_args()
    if args.imports_of:
        for command in ("search", "ask"):
            env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            print_imports(command, import_profile(env | {"RAG_HOME": str(args.imports_of)}, command, QUERY, top=14))
        return
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="cli-latency-") as tmp:
        home = Path(tmp) / "home"
        served = Served(home)
        env = served.env
        # As installed: Python keeps the compiled modules (a test environment may have turned that off,
        # and then every process compiles this project's modules again).
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        subprocess.run([sys.executable, "-m", "rag.cli", "ingest", str(HANDBOOK), "--json"], env=env, check=True,
                       capture_output=True, cwd=REPO)
        agent = subprocess.run(
            [sys.executable, "-m", "rag.cli", "token", "create", "--workspace", "default", "--role", "viewer",
             "--agent", "--access", "all"], env=env, check=True, capture_output=True, text=True).stdout.strip()
        results["--help"] = measure(args.runs, lambda: timed(env, "--help"))
        results["search"] = measure(args.runs, lambda: timed(env, "search", QUERY))
        results["ask"] = measure(args.runs, lambda: timed(env, "ask", QUERY))
        results["mcp tools/list"] = measure(args.runs, lambda: mcp_first_list(env, agent))
        imports = import_profile(env, "search", QUERY)
        with served:  # it ingests the handbook again (nothing changes), then serves
            results["search (server)"] = measure(args.runs, lambda: timed(env, "search", QUERY))
            results["ask (server)"] = measure(args.runs, lambda: timed(env, "ask", QUERY))
            results["token list (server)"] = measure(args.runs, lambda: timed(env, "token", "list"))
            results["mcp tools/list (server)"] = measure(args.runs, lambda: mcp_first_list(env, agent))
    load = os.getloadavg()
    print(f"rag CLI, whole processes, median of {args.runs} (load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, "
          f"{os.cpu_count()} CPUs)")
    print(f"{'command':<22} {'median s':>9} {'min s':>7} {'max s':>7} {'target s':>9}  met")
    for name, row in results.items():
        target = TARGETS.get(name)
        met = "" if target is None else ("yes" if row["median_s"] <= target else "no")
        print(f"{name:<22} {row['median_s']:>9.2f} {row['min_s']:>7.2f} {row['max_s']:>7.2f} "
              f"{'' if target is None else f'{target:.1f}':>9}  {met}")
    print_imports("search", imports)
    write_json({"runs": args.runs, "load_average": load, "results": results, "imports": imports}, args.json)


if __name__ == "__main__":
    main()
