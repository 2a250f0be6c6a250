"""`rag eval …`: evaluation commands, mounted by rag.cli as `eval_app`.

The harness lives in the repository's `evals` package, installed beside `rag`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from rag.errors import RagError, StoreLocked

eval_app = typer.Typer(help="Measure retrieval quality on benchmark datasets.", no_args_is_help=True)


def _table(result: dict) -> Table:
    table = Table(title=f"{result['dataset']} ({result['split']}, {result['queries']} queries)")
    table.add_column("system")
    table.add_column("nDCG@10", justify="right")
    table.add_column("Recall@100", justify="right")
    rows = [(f"rag {name}", result[name]) for name in ("text", "vector", "hybrid")]
    rows += [(f"peer {name}", scores) for name, scores in result["peers"].items()]
    for label, scores in rows:
        style = "bold" if label == "rag hybrid" else None
        table.add_row(label, f"{scores['ndcg@10']:.4f}", f"{scores['recall@100']:.4f}", style=style)
    return table


def _footer(result: dict) -> str:
    s = result["settings"]
    return (
        f"vector_weight {s['vector_weight']}, rrf_k {s['rrf_k']}, chunk_size {s['chunk_size']}; "
        f"{result['seconds']:.0f} s"
    )


@eval_app.command("retrieval")
def retrieval(
    dataset: Path = typer.Option(..., "--dataset", exists=True, file_okay=False, help="A BEIR-layout directory."),
    split: str = typer.Option("test", "--split", help="Which qrels/<split>.tsv to score."),
    peers: bool = typer.Option(True, "--peers/--no-peers", help="Also run bm25s and LlamaIndex+Chroma."),
    home: Optional[Path] = typer.Option(None, "--home", help="Keep the ingested store here (default: a temp dir)."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Score only the first N queries."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """nDCG@10 and Recall@100 of the keyword lane, the vector lane and the hybrid, with peers."""
    from evals.retrieval import EvalOptions, run_retrieval_eval

    try:
        result = run_retrieval_eval(EvalOptions(dataset, split, peers, home, limit), Console(stderr=True))
    except FileNotFoundError as exc:
        sys.stderr.write(f"error: {exc}\n")
        raise typer.Exit(2) from None
    except RagError as exc:
        sys.stderr.write(f"error: {exc.message}\n")
        raise typer.Exit(3 if isinstance(exc, StoreLocked) else 1) from None
    if as_json:
        typer.echo(json.dumps(result, indent=2))
    else:
        out = Console()
        out.print(_table(result))
        out.print(_footer(result), style="dim")


if __name__ == "__main__":
    eval_app()
