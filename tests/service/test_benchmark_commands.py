"""Every command docs/benchmarks.md names still runs: its module exists and takes the flags shown.

The figures there are only worth their rows while the commands that measured them can be run again.
Each backticked `python -m MODULE …` or `rag …` in the file (`python -m rag.cli …` is `rag …`) is
checked without running it:

- `python -m MODULE`: the module is found (importlib.util.find_spec), and `python -m MODULE --help`,
  run once per module in a subprocess (all at once, with a timeout), exits 0 and lists every `--flag`
  the command shows;
- `bash SCRIPT` (after any `NAME=value` settings): the script is in the repository;
- `rag …`: the leading words name a group or command of `rag.cli` (a group alone is a name, as in
  "`rag eval` scores …"), and each `--flag` shown is one of its options.

And every row of a table with a `command` column names a command, or says why it has none.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS_DOC = ROOT / "docs" / "benchmarks.md"
HELP_TIMEOUT = 60  # seconds for one `--help`; they take well under one


def _cells(line: str) -> list[str]:
    # a `|` inside backticks does not occur in these tables; split on every other one
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


_SCRIPT = re.compile(r"(?:[A-Z_]+=\S+ )*bash (\S+)$")
_ENVIRONMENT = re.compile(r"^(?:[A-Z][A-Z0-9_]*=\S+ )+")  # `NAME=value … python -m …`: variables for the command


def _bare(span: str) -> str:
    return _ENVIRONMENT.sub("", span)


def _is_command(span: str) -> bool:
    bare = _bare(span)
    return bare.startswith("python -m ") or bare == "rag" or bare.startswith("rag ") or bool(_SCRIPT.match(span))


def commands(text: str) -> list[str]:
    """Every backticked command of the text, in order, each once."""
    return list(dict.fromkeys(span for span in re.findall(r"`([^`\n]+)`", text) if _is_command(span)))


def rows_without_command(text: str) -> list[str]:
    """Rows of a table with a `command` column whose command cell names none and says no reason."""
    missing: list[str] = []
    column: int | None = None
    for line in text.splitlines():
        if not line.startswith("|"):
            column = None
            continue
        cells = _cells(line)
        if all(re.fullmatch(r":?-+:?", cell) for cell in cells):
            continue
        if column is None:  # a header row
            column = cells.index("command") if "command" in cells else -1
            continue
        if column < 0:
            continue
        cell = cells[column] if column < len(cells) else ""
        if not commands(cell) and "no command" not in cell:
            missing.append(line)
    return missing


def parse(command: str) -> tuple[str | None, list[str], list[str]]:
    """(the module of a `python -m` command, or None for `rag`; the words after it; the flags shown)."""
    words = shlex.split(_bare(command))
    if words[0] == "python":
        module, rest = words[2], words[3:]
        if module == "rag.cli":
            module = None
    else:
        module, rest = None, words[1:]
    flags = [word.split("=", 1)[0] for word in rest if re.match(r"--[A-Za-z]", word)]
    return module, rest, flags


@lru_cache
def doc_commands() -> list[str]:
    return commands(BENCHMARKS_DOC.read_text(encoding="utf-8"))


def _help(module: str) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "COLUMNS": "1000"}
    try:
        done = subprocess.run([sys.executable, "-m", module, "--help"], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=HELP_TIMEOUT)
    except subprocess.TimeoutExpired:
        return -1, f"`python -m {module} --help` took more than {HELP_TIMEOUT} s"
    return done.returncode, done.stdout + done.stderr


@lru_cache
def help_texts() -> dict[str, tuple[int, str]]:
    """`--help` of every module the doc runs with `python -m`, one subprocess each, side by side."""
    modules = sorted({module for module, _, _ in map(parse, doc_commands())
                      if module is not None and importlib.util.find_spec(module) is not None})
    with ThreadPoolExecutor(max_workers=8) as pool:
        return dict(zip(modules, pool.map(_help, modules)))


def _shown(flag: str, text: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text) is not None


def check_module_command(command: str, module: str, flags: list[str]) -> list[str]:
    if importlib.util.find_spec(module) is None:
        return [f"`{command}`: no module {module}"]
    code, text = help_texts()[module] if module in help_texts() else _help(module)
    if code != 0:
        return [f"`{command}`: `python -m {module} --help` failed ({code}): {text[-400:]}"]
    return [f"`{command}`: {module} takes no {flag}" for flag in flags if not _shown(flag, text)]


@lru_cache
def rag_cli():
    import typer.main

    from rag.cli import app

    return typer.main.get_command(app)


def _is_group(command) -> bool:
    return getattr(command, "commands", None) is not None  # typer's own click, or click's


def check_rag_command(command: str, words: list[str], flags: list[str]) -> list[str]:
    node = rag_cli()
    path = ["rag"]
    for word in words:
        if word.startswith("-") or not _is_group(node):
            break
        child = node.commands.get(word)
        if child is None:
            return [f"`{command}`: `{' '.join(path)}` has no command {word!r}"]
        node, path = child, [*path, word]
    options = {"--help"}
    for param in node.params:
        options.update(opt for opt in [*getattr(param, "opts", ()), *getattr(param, "secondary_opts", ())]
                       if opt.startswith("--"))
    return [f"`{command}`: `{' '.join(path)}` takes no {flag}" for flag in flags if flag not in options]


def problems(command: str) -> list[str]:
    script = _SCRIPT.match(command)
    if script:
        return [] if (ROOT / script.group(1)).is_file() else [f"`{command}`: no {script.group(1)} in the repository"]
    module, words, flags = parse(command)
    if module is None:
        return check_rag_command(command, words, flags)
    return check_module_command(command, module, flags)


@pytest.mark.parametrize("command", doc_commands(), ids=str)
def test_command_runs(command: str) -> None:
    found = problems(command)
    if found:
        pytest.fail("docs/benchmarks.md names a command that no longer runs: " + "; ".join(found), pytrace=False)


def test_every_row_names_its_command() -> None:
    missing = rows_without_command(BENCHMARKS_DOC.read_text(encoding="utf-8"))
    assert not missing, "rows of docs/benchmarks.md without a command (or `no command …`):\n" + "\n".join(missing)


def test_the_commands_are_read() -> None:
    """The parsing finds what is there, and the checks catch what is wrong (an empty list would pass)."""
    found = doc_commands()
    assert "python -m benchmarks.search_latency --scale 100k" in found
    assert any(command.startswith("rag eval retrieval ") for command in found)
    assert len(found) >= 20
    assert problems("python -m benchmarks.no_such_module --scale 100k")
    assert problems("python -m benchmarks.search_latency --no-such-flag")
    assert problems("rag eval retrieval --dataset D --no-such-flag")
    assert problems("rag eval no-such-command")
    assert not problems("RAG_EMBED_CACHE=/tmp/e.sqlite bash .ci/run") and problems("bash .ci/no-such-script")
    assert not problems("OTEL_TRACES_SAMPLER_ARG=0.1 python -m benchmarks.http_latency --rounds 40")
    assert problems("OTEL_TRACES_SAMPLER_ARG=0.1 python -m benchmarks.http_latency --no-such-flag")
    assert not problems("python -m rag.cli eval run --dataset D --judge none --home H --out O")
    assert not problems("rag --help")
