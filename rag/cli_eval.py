"""`rag eval …`: evaluation commands. mounted by rag.cli as `eval_app`.

The harness lives in the repository's `evals` package (not shipped in the wheel); from a source
checkout it is found next to the `rag` package.
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


def _import_evals() -> None:
    try:
        import evals  # noqa: F401
    except ImportError:
        checkout = Path(__file__).resolve().parents[1]
        if not (checkout / "evals" / "__init__.py").is_file():
            raise typer.BadParameter("the evals package is not installed (run from a source checkout)") from None
        sys.path.insert(0, str(checkout))


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
    s = result["settings"]
    table.caption = (
        f"vector_weight {s['vector_weight']}, rrf_k {s['rrf_k']}, chunk_size {s['chunk_size']}; "
        f"{result['seconds']:.0f} s"
    )
    return table


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
    _import_evals()
    from evals.retrieval import EvalOptions, run_retrieval_eval

    try:
        result = run_retrieval_eval(EvalOptions(dataset, split, peers, home, limit), Console(stderr=True))
    except FileNotFoundError as exc:
        raise typer.BadParameter(str(exc), param_hint="--dataset") from None
    except RagError as exc:
        Console(stderr=True).print(f"[red]error:[/red] {exc.message}")
        raise typer.Exit(3 if isinstance(exc, StoreLocked) else 1) from None
    if as_json:
        typer.echo(json.dumps(result, indent=2))
    else:
        Console().print(_table(result))


if __name__ == "__main__":
    eval_app()
