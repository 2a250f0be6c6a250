"""`rag eval …`: evaluation commands, mounted by rag.cli as `eval_app`.

The harness lives in the repository's `evals` package, installed beside `rag`.
"""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

import typer

from rag.errors import RagError, StoreLocked

if TYPE_CHECKING:
    from rich.table import Table

    from evals.compare import Difference


class Split(str, Enum):
    """`rag eval run --split`: which questions of a pages layout, by the number their id ends with."""

    all = "all"
    odd = "odd"
    even = "even"


eval_app = typer.Typer(help="Measure retrieval and cited answers on benchmark datasets.", no_args_is_help=True)


def _table(result: dict) -> Table:
    from rich.table import Table

    table = Table(title=f"{result['dataset']} ({result['split']}, {result['queries']} queries)")
    table.add_column("system")
    table.add_column("nDCG@10", justify="right")
    table.add_column("Recall@100", justify="right")
    table.add_column("Recall@10", justify="right")
    table.add_column("all relevant in top 10", justify="right")
    rows = [(f"rag {name}", result[name]) for name in (*result["lanes"], "hybrid")]
    rows += [(f"peer {name}", scores) for name, scores in result["peers"].items()]
    for label, scores in rows:
        style = "bold" if label == "rag hybrid" else None
        table.add_row(label, *(f"{scores[key]:.4f}" for key in ("ndcg@10", "recall@100", "recall@10", "all@10")),
                      style=style)
    return table


def _footer(result: dict) -> str:
    s = result["settings"]
    weights = ", ".join(f"{name} {weight}" for name, weight in s["weights"].items())
    return (
        f"weights {weights}, rrf_k {s['rrf_k']}, rerank {s['rerank']} ({s.get('score_norm')}), chunk_size {s['chunk_size']}; "
        f"{result['seconds']:.0f} s"
    )


@eval_app.command("retrieval")
def retrieval(
    dataset: Path = typer.Option(
        ..., "--dataset", exists=True, file_okay=False,
        help="A BEIR-layout directory, or a HotpotQA-layout one (its gold passages are the relevant documents).",
    ),
    split: str = typer.Option("test", "--split", help="Which qrels/<split>.tsv to score (BEIR layout)."),
    peers: bool = typer.Option(True, "--peers/--no-peers", help="Also run bm25s and LlamaIndex+Chroma."),
    home: Optional[Path] = typer.Option(None, "--home", help="Keep the ingested store here (default: a temp dir)."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Score only the first N queries."),
    database_url: Optional[str] = typer.Option(
        None, "--database-url", help="Ingest into this (empty) PostgreSQL database instead of SQLite in the home, "
        "to score its keyword lane.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """nDCG@10 and Recall@100 of each lane of the search index, and of the hybrid, with peers."""
    from rich.console import Console

    from evals.retrieval import EvalOptions, run_retrieval_eval

    try:
        options = EvalOptions(dataset, split, peers, home, limit, database_url=database_url)
        result = run_retrieval_eval(options, Console(stderr=True))
    except (FileNotFoundError, RagError) as exc:
        raise _fail(exc) from None
    if as_json:
        typer.echo(json.dumps(result, indent=2))
    else:
        out = Console()
        out.print(_table(result))
        out.print(_footer(result), style="dim")


def _fail(exc: Exception) -> typer.Exit:
    """The one mapping of a harness error to a message and an exit code."""
    if isinstance(exc, RagError):
        sys.stderr.write(f"error: {exc.message}\n")
        return typer.Exit(3 if isinstance(exc, StoreLocked) else 1)
    sys.stderr.write(f"error: {exc}\n")
    return typer.Exit(2)


def _answer_table(title: str, scores: dict) -> Table:
    from rich.table import Table

    from evals.answer_report import table_rows

    header, rows = table_rows(scores)
    table = Table(title=title)
    for i, name in enumerate(header):
        table.add_column(name, justify="left" if i == 0 else "right", style="bold" if i == 1 else None)
    for row in rows:
        table.add_row(*row)
    return table


@eval_app.command("run")
def run(
    dataset: Path = typer.Option(
        ..., "--dataset", exists=True, file_okay=False,
        help="corpus.jsonl + questions.jsonl (HotpotQA layout), or questions.jsonl beside a pages/ or files/ "
        "folder (pages layout: the folder is ingested, a page's id is its path in it).",
    ),
    synthesizer: Optional[str] = typer.Option(
        None, "--synthesizer", help="'extractive' or a litellm model (default: RAG_LLM_MODEL, else extractive)."
    ),
    split: Split = typer.Option(
        Split.all, "--split", case_sensitive=False,
        help="Pages layout: the questions whose id ends in an odd number (calibration), an even one (held out), or all.",
    ),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Ask only the first N questions (of the split)."),
    unanswerable: float = typer.Option(
        0.0, "--unanswerable", min=0.0, max=1.0, help="Make this fraction unanswerable (gold passages left out)."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the unanswerable choice."),
    judge: Optional[str] = typer.Option(
        None, "--judge", help="litellm model judging citation support (default: RAG_LLM_MODEL; 'none': skip)."
    ),
    questions: Optional[Path] = typer.Option(
        None, "--questions", exists=True, dir_okay=False,
        help="Pages layout: questions from this JSONL file instead of DATASET/questions.jsonl; the folder "
        "ingested is DATASET/pages, DATASET/files or DATASET itself.",
    ),
    out: Optional[Path] = typer.Option(None, "--out", file_okay=False, help="Write the report files here."),
    home: Optional[Path] = typer.Option(None, "--home", help="Keep the ingested store here (default: a temp dir)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Cited answers scored against gold answers and passages, beside top-1 copy and always abstain;
    on a pages layout, against gold pages and answer keys, by question kind."""
    from rich.console import Console

    from evals.answer_report import GROUP_TITLES, write_run
    from evals.answers import AnswerEvalOptions, run_answer_eval
    from evals.pages import is_pages_layout

    if questions is not None or is_pages_layout(dataset):
        if unanswerable:
            raise _fail(ValueError("--unanswerable applies to the HotpotQA layout, not to a pages layout")) from None
        _run_pages(dataset, synthesizer, split.value, limit, judge, out, home, as_json, questions)
        return
    if split is not Split.all:
        raise _fail(ValueError("--split applies to a pages layout (questions.jsonl beside pages/ or files/)")) from None
    options = AnswerEvalOptions(dataset, synthesizer, limit, unanswerable, seed, home, judge=judge)
    summary = _run_and_write(lambda: run_answer_eval(options, Console(stderr=True)), write_run, out, as_json)
    if summary is None:
        return
    console = Console()
    for group in ("all", "yes_no"):
        if summary["scores"][group]["rag"]["questions"]:
            console.print(_answer_table(GROUP_TITLES[group], summary["scores"][group]))
    seconds, load = summary["seconds"], summary["load_average"]
    console.print(f"{summary['synthesizer']}; {seconds['total']:.0f} s; load {load['end'][0]}"
                  + (f"; report in {out}" if out else ""), style="dim")


def _run_and_write(run: Callable[[], tuple[dict, list]], write: Callable[[Path, dict, list], None],
                   out: Optional[Path], as_json: bool) -> Optional[dict]:
    """Run an answer eval, write its files to `out`, print the summary as JSON when asked (then
    None: nothing more to print); bad input exits with the eval's own message."""
    try:
        summary, rows = run()
    except (FileNotFoundError, ValueError, RagError) as exc:
        raise _fail(exc) from None
    if out is not None:
        write(out, summary, rows)
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
        return None
    return summary


def _run_pages(dataset: Path, synthesizer: Optional[str], split: str, limit: Optional[int], judge: Optional[str],
               out: Optional[Path], home: Optional[Path], as_json: bool, questions: Optional[Path] = None) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    from evals.answer_report import pages_table_rows, write_pages_run
    from evals.page_answers import PagesEvalOptions, run_pages_eval

    options = PagesEvalOptions(dataset, synthesizer, split, limit, home, judge=judge, questions=questions)
    summary = _run_and_write(lambda: run_pages_eval(options, Console(stderr=True)), write_pages_run, out, as_json)
    if summary is None:
        return
    header, table_rows = pages_table_rows(summary)
    table = Table(title=f"{summary['dataset']} ({summary['split']}, {summary['questions']} questions, "
                        f"{summary['corpus_records']} pages)", box=box.SIMPLE_HEAD,
                  caption="odd: ids ending in an odd number (calibration); even: held out" if "odd" in header else None)
    for i, name in enumerate(header):
        table.add_column(name, justify="left" if i == 0 else "right", style="bold" if name == "all" else None,
                         no_wrap=True)
    for row in table_rows:
        table.add_row(*row)
    console = Console()
    if not console.is_terminal:  # written to a file or a pipe: wide enough for a column per kind, never cut
        console = Console(width=max(console.width, 120))
    console.print(table)
    seconds, load = summary["seconds"], summary["load_average"]
    console.print(f"{summary['synthesizer']}; {seconds['total']:.0f} s (ingest {seconds['ingest']:.0f} s); "
                  f"load {load['end'][0]}" + (f"; report in {out}" if out else ""), style="dim")


def _print_differences(diffs: list[Difference], title: str) -> None:
    """A table per question group: ours always, a baseline only where it moved (then retrieval or
    the data did)."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(title, style="bold")
    short = {"rag": "rag", "top1_copy": "top-1", "always_abstain": "abstain"}
    for group in dict.fromkeys(d.group for d in diffs):
        table = Table(title=group)
        for name in ("system", "metric", "A", "B", "Δ", ""):
            table.add_column(name, justify="right" if name in ("A", "B", "Δ") else "left", no_wrap=True)
        for d in diffs:
            if d.group == group and (d.system == "rag" or d.a != d.b):
                table.add_row(short.get(d.system, d.system), d.metric, *(
                    "–" if v is None else f"{v:.4g}" for v in (d.a, d.b, d.delta)
                ), "REGRESSION" if d.regression else "", style="bold red" if d.regression else None)
        console.print(table)


@eval_app.command("compare")
def compare(
    a: Path = typer.Argument(..., help="The reference run's --out folder."),
    b: Path = typer.Argument(..., help="The new run's --out folder."),
    tolerance: float = typer.Option(0.02, "--tolerance", min=0.0, help="Largest drop of a score that is no regression."),
    latency_tolerance: Optional[float] = typer.Option(
        None, "--latency-tolerance", min=0.0, help="Also fail when a latency grows by more than this share (0.5: +50%)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the differences as JSON."),
) -> None:
    """The differences between two runs; exit code 1 when B regresses on A beyond the tolerance."""
    from dataclasses import asdict

    from evals.compare import compare_runs, load_run, mismatches

    try:
        run_a, run_b = load_run(a), load_run(b)
        diffs = compare_runs(run_a, run_b, tolerance, latency_tolerance)
    except (FileNotFoundError, ValueError, KeyError) as exc:
        raise _fail(exc if not isinstance(exc, KeyError) else ValueError(f"not a run summary (no {exc})")) from None
    for line in mismatches(run_a, run_b):
        sys.stderr.write(f"warning: the runs differ in {line}\n")
    regressions = [d for d in diffs if d.regression]
    if as_json:
        typer.echo(json.dumps([{**asdict(d), "delta": d.delta} for d in diffs], indent=2))
    else:
        _print_differences(diffs, f"{a} → {b}")
    if regressions:
        sys.stderr.write(f"{len(regressions)} regression(s) beyond the tolerance\n")
        raise typer.Exit(1)


if __name__ == "__main__":
    eval_app()
