"""What `rag eval run --out DIR` writes: summary.json, questions.jsonl, report.md and report.html
(the same tables, with plots of our scores against the baselines and of the latency spread).

The plots are matplotlib figures saved as SVG and written inline, so the page is one file. A
pages-layout run (evals/page_answers.py) writes summary.json, questions.jsonl and report.md.
"""

from __future__ import annotations

import html
import io
import json
from pathlib import Path
from typing import Any, Sequence

from evals.answer_metrics import METRICS

LABELS = {"rag": "rag (ours)", "top1_copy": "top-1 copy", "always_abstain": "always abstain"}
GROUP_TITLES = {"all": "All questions", "yes_no": "Yes/no questions", "other": "Other questions"}
PLOTTED = ("answer_contains", "answer_f1", "citation_precision", "citation_recall", "citation_valid",
           "abstention_accuracy", "retrieval_recall@10", "retrieval_all@10")


def fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float) and value <= 1.0:
        return f"{value:.3f}"
    return str(value)


def table_rows(scores: dict[str, dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of one group's table: a row per metric, a column per system (ours first)."""
    header = ["metric", *(LABELS.get(system, system) for system in scores)]
    return header, [[key, *(fmt(m[key]) for m in scores.values())] for key in METRICS]


def _markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def _preamble(summary: dict[str, Any]) -> list[str]:
    u, s, load = summary["unanswerable"], summary["seconds"], summary["load_average"]
    lines = [
        f"Dataset `{summary['dataset']}`: {summary['questions']} questions over {summary['corpus_records']} "
        f"records (pooled); synthesizer `{summary['synthesizer']}`.",
        f"Unanswerable: {u['questions']} questions (fraction {u['fraction']}, seed {u['seed']}; "
        f"{u['removed_records']} gold records left out).",
        f"Run time {s['total']} s (ingest {s['ingest']} s, questions {s['questions']} s) on {summary['cpus']} CPUs, "
        f"load average {load['start'][0]} at the start, {load['end'][0]} at the end.",
    ]
    support = summary.get("citation_support")
    if support:
        lines.append(
            f"Citation support judged by `{support['judge']}` on {support['answers_judged']} answers: "
            f"recall {fmt(support['support_recall'])}, precision {fmt(support['support_precision'])}."
        )
    return lines


def decline_counts(rows: Sequence[dict[str, Any]], flag: str) -> dict[str, dict[str, int]]:
    """How many declined answers of each question kind gave each reason (rag/synthesize/declines.py);
    `flag` is the row's key that says it declined. An answer that cites nothing without declining
    counts as `no_citation`."""
    counts: dict[str, dict[str, int]] = {}
    for row in rows:
        if row.get(flag):
            reason = row.get("declined_reason") or "no_citation"
            kind = counts.setdefault(str(row.get("kind", "all")), {})
            kind[reason] = kind.get(reason, 0) + 1
    return counts


def declines_markdown(counts: dict[str, dict[str, int]]) -> list[str]:
    """The 'why answers declined' table: a row per reason, a column per question kind."""
    if not counts:
        return []
    kinds = sorted(counts)
    reasons = sorted({r for by in counts.values() for r in by})
    rows = [[reason, *(str(counts[k].get(reason, 0)) for k in kinds)] for reason in reasons]
    return ["", "## Why answers declined", "", _markdown_table(["reason", *kinds], rows)]


def markdown(summary: dict[str, Any]) -> str:
    parts = [f"# Answers and citations: {summary['dataset']}", "", *_preamble(summary)]
    for group, scores in summary["scores"].items():
        parts += ["", f"## {GROUP_TITLES.get(group, group)}", "", _markdown_table(*table_rows(scores))]
    parts += declines_markdown(summary.get("declined_reasons", {}))
    return "\n".join(parts) + "\n"


def _svg(figure: Any) -> str:
    import matplotlib.pyplot as plt

    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    plt.close(figure)
    text = buffer.getvalue()
    return text[text.index("<svg"):]  # drop the XML prolog and doctype: the SVG sits inside HTML


def scores_plot(scores: dict[str, dict[str, Any]]) -> str:
    import matplotlib

    matplotlib.use("Agg")  # no display: files only
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(10, 3.6))
    width = 0.8 / len(scores)
    for i, (system, metrics) in enumerate(scores.items()):
        xs = [x + (i - (len(scores) - 1) / 2) * width for x in range(len(PLOTTED))]
        axes.bar(xs, [metrics[k] or 0.0 for k in PLOTTED], width, label=LABELS.get(system, system))
    axes.set_xticks(range(len(PLOTTED)), PLOTTED, rotation=20, ha="right")
    axes.set_ylim(0, 1.05)
    axes.legend(loc="upper left", bbox_to_anchor=(1, 1))
    axes.set_title("Scores, all questions (a missing bar: not defined for that system)")
    return _svg(figure)


def latency_plot(latencies_ms: Sequence[float], p50: float | None, p95: float | None) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 3))
    axes.hist(latencies_ms, bins=40, color="#4c72b0")
    for value, name in ((p50, "p50"), (p95, "p95")):
        if value is not None:
            axes.axvline(value, color="#c44e52", linestyle="--")
            axes.annotate(f"{name} {value:.0f} ms", (value, axes.get_ylim()[1] * 0.9), xytext=(4, 0),
                          textcoords="offset points")
    axes.set_xlabel("ask latency (ms)")
    axes.set_ylabel("questions")
    axes.set_title("Latency of each ask")
    return _svg(figure)


def _html_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def html_page(summary: dict[str, Any], latencies_ms: Sequence[float]) -> str:
    ours = summary["scores"]["all"]["rag"]
    try:
        plots = [scores_plot(summary["scores"]["all"]),
                 latency_plot(latencies_ms, ours["latency_p50_ms"], ours["latency_p95_ms"])]
    except ImportError:  # matplotlib comes with the dev extras; the tables do without it
        plots = ["<p>(plots need matplotlib: pip install -e '.[dev]')</p>"] * 2
    sections = [f"<p>{html.escape(line)}</p>" for line in _preamble(summary)]
    sections.append(plots[0])
    for group, scores in summary["scores"].items():
        sections += [f"<h2>{html.escape(GROUP_TITLES.get(group, group))}</h2>", _html_table(*table_rows(scores))]
    sections += ["<h2>Latency</h2>", plots[1]]
    title = html.escape(f"Answers and citations: {summary['dataset']}")
    style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}td:first-child{text-align:left}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title><style>{style}</style>"
            f"</head><body><h1>{title}</h1>{''.join(sections)}</body></html>\n")


def _write_files(out: Path, summary: dict[str, Any], rows: Sequence[dict[str, Any]], report: str) -> None:
    """summary.json, questions.jsonl (a row per question) and report.md."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    with (out / "questions.jsonl").open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    (out / "report.md").write_text(report)


def write_run(out: Path, summary: dict[str, Any], rows: Sequence[dict[str, Any]]) -> None:
    _write_files(out, summary, rows, markdown(summary))
    (out / "report.html").write_text(html_page(summary, [r["latency_ms"] for r in rows]))


# ----- a pages-plus-questions run (evals/page_answers.py): a row per metric, a column per question kind -----

PAGE_LABELS = {
    "questions": "questions", "answerable": "answerable", "retrieval@5": "retrieval@5",
    "gold_found@5": "gold found@5 (multi)", "gold_cited": "gold cited",
    "text_found": "support in stored text", "page_cited": "PDF page cited", "key_hit": "key hit",
    "wrongly_declined": "wrongly declined", "declined": "declined (no answer)",
    "latency_p50_ms": "latency p50 ms", "latency_p95_ms": "latency p95 ms",
}


def pages_table_rows(summary: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """A row per metric, a column per group: the question kinds, all, and the odd (calibration) and
    even (held-out) splits when the run took both."""
    scores = summary["scores"]
    header = ["metric", *scores]
    return header, [[label, *(fmt(scores[g]["rag"][key]) for g in scores)] for key, label in PAGE_LABELS.items()]


def pages_markdown(summary: dict[str, Any]) -> str:
    s, load, ingest = summary["seconds"], summary["load_average"], summary["ingest"]
    lines = [
        f"# Answers and citations: {summary['dataset']}", "",
        f"{summary['questions']} questions (split `{summary['split']}`, of {summary['dataset_questions']}) over "
        f"{ingest['pages']} pages ({ingest['chunks']} chunks; {len(ingest['skipped'])} skipped, "
        f"{len(ingest['failed'])} failed); synthesizer `{summary['synthesizer']}`.",
        f"Run time {s['total']} s (ingest {s['ingest']} s, questions {s['questions']} s) on {summary['cpus']} CPUs, "
        f"load average {load['start'][0]} at the start, {load['end'][0]} at the end.",
    ]
    if ingest["questions_missing_gold_pages"]:
        lines.append(f"Questions whose gold pages were not ingested: {', '.join(ingest['questions_missing_gold_pages'])}.")
    support = summary.get("citation_support")
    if support:
        lines.append(f"Citation support judged by `{support['judge']}` on {support['answers_judged']} answers: "
                     f"recall {fmt(support['support_recall'])}, precision {fmt(support['support_precision'])}.")
    return "\n".join([*lines, "", _markdown_table(*pages_table_rows(summary)),
                      *declines_markdown(summary.get("declined_reasons", {}))]) + "\n"


def write_pages_run(out: Path, summary: dict[str, Any], rows: Sequence[dict[str, Any]]) -> None:
    _write_files(out, summary, rows, pages_markdown(summary))
