"""Sources that keep themselves in sync: what a first sync, a re-sync of nothing changed and a sync
of three changed items cost, for a website and a Git repository of the same 1,000 pages.

The pages are the first `--pages` SciFact abstracts (../shared/datasets/scifact/corpus.jsonl, in
the file's order, so every run reads the same ones). Each kind gets its own fresh RAG_HOME and its
own fresh, EMPTY embedding cache (the site and the repository hold the same texts: a shared cache
would make the second kind's first sync a cache read), so the first sync's embedding is the
model's real work, and the model is loaded and warmed before the clock starts. `--embed-cache`
shares one cache instead (CI and the test, where speed is not the point); the table says how many
texts the model itself computed, so a warm cache shows.

- website: every abstract is a page of /abstracts/ (its title, its text, links to the previous
  page and the next three), named by a sitemap index and its sitemap, served from a thread on
  127.0.0.1 by benchmarks/site_server.py's `SiteServer` (ETags, Last-Modified, 304s); the source
  reads the sitemap and starts at the first page.
- git: the same abstracts as Markdown files `abstracts/<id>.md` (the same links), committed in
  three commits to a work tree and pushed to a bare origin on this disk (benchmarks/gitrepo.py);
  the source reads the bare repository by its path.

For each, through the service (`svc.add_source`, `svc.sync_source`), three syncs are timed:

1. the first: pages/s end to end, and the time per stage from the engine's `SyncReport.timings`
   (listing, fetching, parsing, storing, indexing; fetching and parsing are summed over the
   engine's fetch threads, so their shares may add up past 100%), with embedding (every call of
   the embedder the publisher makes, timed by wrapping it) as the part of indexing it is;
2. a re-sync with nothing changed: its time as a share of the first's (target <= 2%), and the
   texts embedded, chunks indexed and versions written (target: none);
3. after three pages changed on the site / one commit touching three files: how many
   DocumentVersion rows were written and for how many documents (target: exactly 3 and 3).

    python -m benchmarks.sources                          # 1,000 pages, both kinds
    python -m benchmarks.sources --pages 100 --only git --json out.json
"""

from __future__ import annotations

import argparse
import html
import json
import os
import shutil
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from benchmarks import write_json
from benchmarks.fixture100k import DATASETS
from benchmarks.gitrepo import GitRepo
from benchmarks.site_server import TYPES, Resource, SiteServer, sitemaps

CORPUS = DATASETS / "scifact" / "corpus.jsonl"
KINDS = ("website", "git")
CHANGED = 3  # items changed before the third sync
NEXT_LINKS = 3  # each page links to the next few (and to the previous one)
KB = "bench"
RESYNC_TARGET = 0.02


@dataclass(frozen=True)
class Abstract:
    id: str
    title: str
    text: str


def abstracts(count: int, corpus: Path = CORPUS) -> list[Abstract]:
    """The first `count` records of the corpus that have a title and a text."""
    found: list[Abstract] = []
    with corpus.open(encoding="utf-8") as lines:
        for line in lines:
            if len(found) >= count:
                break
            record = json.loads(line)
            if record.get("title") and record.get("text"):
                found.append(Abstract(str(record["_id"]), record["title"].strip(), record["text"].strip()))
    if len(found) < count:
        raise SystemExit(f"{corpus} holds only {len(found)} abstracts with a title and a text")
    return found


def neighbours(records: Sequence[Abstract], index: int) -> list[Abstract]:
    """The pages a page links to: the previous one and the next few."""
    picks = [index - 1] + [index + step for step in range(1, NEXT_LINKS + 1)]
    return [records[i] for i in picks if 0 <= i < len(records)]


def changed_indexes(count: int) -> list[int]:
    """The three items changed before the third sync: the first, the middle and the last."""
    return sorted({0, count // 2, count - 1})


def revised(text: str) -> str:
    return text + " Revised: the authors added a note on the sample size and the follow-up period."


# ----- the website -----

def page_path(record: Abstract) -> str:
    return f"/abstracts/{record.id}.html"


def page_html(records: Sequence[Abstract], index: int, text: str | None = None) -> bytes:
    record = records[index]
    links = "".join(f'<li><a href="{page_path(r)}">{html.escape(r.title)}</a></li>' for r in neighbours(records, index))
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(record.title)}</title>'
            f'</head><body><header><a href="{page_path(records[0])}">SciFact abstracts</a></header>'
            f"<main><article><h1>{html.escape(record.title)}</h1><p>{html.escape(text or record.text)}</p></article>"
            f'</main><nav aria-label="Related"><ul>{links}</ul></nav>'
            f"<footer><p>Abstracts from the SciFact corpus.</p></footer></body></html>").encode()


class Website:
    """The site on 127.0.0.1, the source's settings and the change of three pages."""

    kind = "website"

    def __init__(self, records: Sequence[Abstract]) -> None:
        self.records = records
        site = {page_path(r): _resource(page_html(records, i)) for i, r in enumerate(records)}
        self.server = SiteServer(site)

    def __enter__(self) -> Website:
        self.server.start()
        sitemaps(self.server.site, self.server.base, [page_path(r) for r in self.records])
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()

    def config(self) -> dict[str, Any]:
        return {"sitemap": self.server.url("/sitemap.xml"), "start_urls": [self.server.url(page_path(self.records[0]))],
                "max_pages": len(self.records) + 10}

    def change(self) -> None:
        for index in changed_indexes(len(self.records)):
            record = self.records[index]
            self.server.set_page(page_path(record), page_html(self.records, index, revised(record.text)))


def _resource(body: bytes) -> Resource:
    return Resource(body, TYPES[".html"])


# ----- the Git repository -----

def markdown(records: Sequence[Abstract], index: int, text: str | None = None) -> str:
    record = records[index]
    links = "\n".join(f"- [{r.title}]({r.id}.md)" for r in neighbours(records, index))
    return f"# {record.title}\n\n{text or record.text}\n\n## Related\n\n{links}\n"


class GitSource:
    """The repository (three commits, pushed to a bare origin), the source's settings and one commit
    touching three files."""

    kind = "git"

    def __init__(self, records: Sequence[Abstract], root: Path) -> None:
        self.records = records
        self.repo = GitRepo(root)

    def __enter__(self) -> GitSource:
        third = max(1, len(self.records) // 3)
        parts = [range(0, third), range(third, 2 * third), range(2 * third, len(self.records))]
        for number, part in enumerate(parts, start=1):
            for index in part:
                self.repo.write(f"abstracts/{self.records[index].id}.md", markdown(self.records, index))
            self.repo.commit(f"Abstracts, part {number} of {len(parts)}")
        self.repo.push()
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def config(self) -> dict[str, Any]:
        return {"repository": str(self.repo.bare), "branch": "main"}

    def change(self) -> None:
        for index in changed_indexes(len(self.records)):
            record = self.records[index]
            self.repo.write(f"abstracts/{record.id}.md", markdown(self.records, index, revised(record.text)))
        self.repo.commit(f"Revise {CHANGED} abstracts")
        self.repo.push()


# ----- measuring -----

class EmbedMeter:
    """Every call of the embedder the publisher makes: texts asked for, seconds, and (from the
    cache's own counters) how many the model computed."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self.texts = 0
        self.seconds = 0.0
        self._lock = threading.Lock()
        embed_chunks = embedder.embed_chunks

        def counted(texts: Sequence[str], sentences: Sequence[Sequence[Any]], *args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return embed_chunks(texts, sentences, *args, **kwargs)
            finally:
                with self._lock:
                    self.texts += len(texts) + sum(len(s) for s in sentences)  # chunks and their sentences
                    self.seconds += time.perf_counter() - started

        # The instance attribute shadows the method for the publisher's calls (Publisher._embed_with_sentences).
        embedder.embed_chunks = counted

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            return {"texts": self.texts, "seconds": self.seconds,
                    "model_texts": getattr(self.embedder, "misses", self.texts)}


def _versions(svc: Any) -> tuple[int, int]:
    """(DocumentVersion rows, the highest id) of the store."""
    from sqlalchemy import func, select

    from rag.store.models import DocumentVersion

    with svc.db.session() as session:
        count, top = session.execute(select(func.count(DocumentVersion.id), func.max(DocumentVersion.id))).one()
        return int(count), int(top or 0)


def _documents_with_versions_after(svc: Any, top: int) -> int:
    from sqlalchemy import func, select

    from rag.store.models import DocumentVersion

    with svc.db.session() as session:
        return int(session.scalar(select(func.count(func.distinct(DocumentVersion.node_id)))
                                  .where(DocumentVersion.id > top)))


def timed_sync(svc: Any, principal: Any, name: str, meter: EmbedMeter) -> dict[str, Any]:
    """One sync through the service, with its counts, stage times and what it embedded and wrote."""
    versions_before, top = _versions(svc)
    embedded = meter.snapshot()
    started = time.perf_counter()
    _info, report = svc.sync_source(principal, name)
    seconds = time.perf_counter() - started
    after = meter.snapshot()
    versions_after, _ = _versions(svc)
    return {
        "outcome": report.outcome, "seconds": seconds, "added": len(report.added), "updated": len(report.updated),
        "unchanged": len(report.unchanged), "failed": len(report.failed), "skipped": len(report.skipped),
        "failures": [f"{label}: {why}" for label, why in report.failed[:5]], "chunks": report.chunks,
        "timings": {k: round(v, 3) for k, v in report.timings.items()},
        "embed_s": round(after["seconds"] - embedded["seconds"], 3),
        "texts_embedded": after["texts"] - embedded["texts"],
        "model_texts": after["model_texts"] - embedded["model_texts"],
        "new_versions": versions_after - versions_before,
        "documents_with_new_version": _documents_with_versions_after(svc, top),
    }


def _warm(svc: Any) -> float:
    """The model loaded and run once (as a publish runs it), outside every timed sync."""
    from benchmarks.ingest_throughput import WARMUP_TEXT
    from rag.models.embed import bulk_embedding

    started = time.perf_counter()
    inner = getattr(svc.embedder, "inner", svc.embedder)
    with bulk_embedding():
        inner.embed([WARMUP_TEXT] * getattr(inner, "batch_size", 8))
    return time.perf_counter() - started


@contextmanager
def service(home: Path, embed_cache: Path) -> Iterator[Any]:
    from rag.service import KnowledgeService
    from rag.settings import Settings

    # The site is served on 127.0.0.1: the operator's setting allows it (a source's own list cannot).
    with KnowledgeService(Settings(home=home, embed_cache=embed_cache, sources={"allow_hosts": ["127.0.0.1"]})) as svc:
        svc.index.open()
        yield svc


def measure(source: Website | GitSource, home: Path, embed_cache: Path) -> dict[str, Any]:
    """The three syncs of one source, each kind in its own fresh home."""
    from rag.service import Principal

    cache_rows_before = _cache_rows(embed_cache)
    with service(home, embed_cache) as svc:
        principal = Principal.local_admin("default")
        model_load_s = _warm(svc)
        meter = EmbedMeter(svc.embedder)
        svc.add_source(principal, source.kind, source.kind, source.config(), KB, source.kind.capitalize())
        first = timed_sync(svc, principal, source.kind, meter)
        again = timed_sync(svc, principal, source.kind, meter)
        source.change()
        changed = timed_sync(svc, principal, source.kind, meter)
    return {"kind": source.kind, "pages": len(source.records), "model_load_s": round(model_load_s, 2),
            "embed_cache": {"path": str(embed_cache), "rows_before": cache_rows_before,
                            "cold": cache_rows_before == 0},
            "first": first, "resync": again, "changed": changed, "figures": figures(first, again, changed)}


def _cache_rows(path: Path) -> int:
    import sqlite3

    if not path.exists():
        return 0
    connection = sqlite3.connect(str(path))
    try:
        return int(connection.execute("SELECT count(*) FROM embeddings").fetchone()[0])
    except sqlite3.OperationalError:  # no table yet
        return 0
    finally:
        connection.close()


def figures(first: dict[str, Any], again: dict[str, Any], changed: dict[str, Any]) -> dict[str, Any]:
    """The measures the table shows, from the three syncs."""
    total = first["seconds"] or 1e-9
    timings = first["timings"]
    shares = {stage: round(timings.get(stage, 0.0) / total, 3)
              for stage in ("listing", "fetching", "parsing", "storing", "indexing")}
    shares["embedding"] = round(first["embed_s"] / total, 3)
    return {
        "first_seconds": round(total, 2), "pages_synced": first["added"] + first["updated"],
        "pages_per_s": round((first["added"] + first["updated"]) / total, 2), "first_chunks": first["chunks"],
        "first_model_texts": first["model_texts"], "shares": shares,
        "resync_seconds": round(again["seconds"], 3), "resync_share": round(again["seconds"] / total, 4),
        "resync_texts_embedded": again["texts_embedded"], "resync_chunks": again["chunks"],
        "resync_new_versions": again["new_versions"],
        "changed_seconds": round(changed["seconds"], 3), "changed_new_versions": changed["new_versions"],
        "changed_documents": changed["documents_with_new_version"], "changed_updated": changed["updated"],
        "changed_texts_embedded": changed["texts_embedded"],
    }


# ----- the run -----

def run(pages: int = 1000, only: str | None = None, home: Path | None = None,
        embed_cache: Path | None = None) -> dict[str, Any]:
    """Both kinds (or `only` one) at `pages` pages, under `home` (a temporary folder by default,
    removed at the end; a given one is kept). `embed_cache`: one cache shared by both kinds;
    default, a fresh empty one per kind."""
    records = abstracts(pages)
    root = Path(tempfile.mkdtemp(prefix="rag-sources-bench-")) if home is None else home
    result: dict[str, Any] = {"pages": pages, "loadavg_1m_before": round(os.getloadavg()[0], 2),
                              "date": time.strftime("%Y-%m-%d"), "kinds": {}}
    try:
        for kind in (only,) if only else KINDS:
            where = root / kind
            if where.exists() and any(where.iterdir()):
                raise SystemExit(f"{where} is not empty: each run needs a fresh home")
            source = Website(records) if kind == "website" else GitSource(records, where / "repository")
            cache = embed_cache or where / "embeddings.sqlite"
            with source:
                result["kinds"][kind] = measure(source, where / "home", cache)
    finally:
        if home is None:
            shutil.rmtree(root, ignore_errors=True)
    result["loadavg_1m_after"] = round(os.getloadavg()[0], 2)
    return result


ROWS: list[tuple[str, Callable[[dict[str, Any]], str], str]] = [
    ("pages synced (first sync)", lambda f: str(f["pages_synced"]), ""),
    ("first sync: seconds / pages per second", lambda f: f"{f['first_seconds']} / {f['pages_per_s']}", ""),
    ("first sync: chunks / texts the model embedded", lambda f: f"{f['first_chunks']} / {f['first_model_texts']}", ""),
    ("first sync, share: listing / fetching / parsing",
     lambda f: " / ".join(f"{f['shares'][s]:.1%}" for s in ("listing", "fetching", "parsing")), ""),
    ("first sync, share: storing / indexing (embedding)",
     lambda f: f"{f['shares']['storing']:.1%} / {f['shares']['indexing']:.1%} ({f['shares']['embedding']:.1%})", ""),
    ("re-sync, nothing changed: seconds (share of the first)",
     lambda f: f"{f['resync_seconds']} ({f['resync_share']:.2%})", "<= 2%"),
    ("re-sync: texts embedded / chunks / new versions",
     lambda f: f"{f['resync_texts_embedded']} / {f['resync_chunks']} / {f['resync_new_versions']}", "0 / 0 / 0"),
    (f"{CHANGED} items changed: new versions / documents / seconds",
     lambda f: f"{f['changed_new_versions']} / {f['changed_documents']} / {f['changed_seconds']}", "3 / 3"),
]


def print_table(result: dict[str, Any]) -> None:
    kinds = list(result["kinds"])
    print(f"\nSources, {result['pages']} SciFact abstracts ({result['date']}; load "
          f"{result['loadavg_1m_before']} -> {result['loadavg_1m_after']})\n")
    print("| measure | " + " | ".join(kinds) + " | target |")
    print("| --- |" + " ---: |" * len(kinds) + " --- |")
    for label, cell, target in ROWS:
        print(f"| {label} | " + " | ".join(cell(result["kinds"][k]["figures"]) for k in kinds) + f" | {target} |")
    for kind in kinds:
        measured = result["kinds"][kind]
        cache = measured["embed_cache"]
        state = "cold (empty)" if cache["cold"] else f"warm ({cache['rows_before']} vectors before)"
        print(f"\n{kind}: embedding cache {state}; model load {measured['model_load_s']} s (not timed); "
              f"first sync {measured['first']['outcome']}, {measured['first']['failed']} failed, "
              f"{measured['first']['skipped']} skipped")
        for failure in measured["first"]["failures"]:
            print(f"  failed: {failure}")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=1000, help="abstracts, as pages and as files (default 1000)")
    parser.add_argument("--only", choices=KINDS, help="one kind only")
    parser.add_argument("--home", type=Path, help="where the homes, the repository and the caches go "
                        "(default: a temporary folder, removed at the end)")
    parser.add_argument("--embed-cache", type=Path, help="one embedding cache shared by the kinds "
                        "(default: a fresh empty one per kind, so the first sync's embedding is the model's)")
    parser.add_argument("--json", help="write the result here ('-': standard output)")
    args = parser.parse_args(argv)
    if args.pages < 2 * CHANGED:
        parser.error(f"--pages must be at least {2 * CHANGED}")
    result = run(args.pages, args.only, args.home, args.embed_cache)
    print_table(result)
    write_json(result, args.json)
    return result


if __name__ == "__main__":
    main()
