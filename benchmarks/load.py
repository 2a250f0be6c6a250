"""Mixed load on a real `rag serve`, on both deployments, and search while a large document publishes.

For each deployment (the embedded default: one `rag serve` on a SQLite home; scale-out: `rag serve
--workers 2` on a throwaway PostgreSQL and Chroma server, the tests' own helpers), a fresh home
holding the 18F handbook (embeddings from the shared cache) and a few documents to edit:

1. **mix**: `--clients` clients (threads, one keep-alive connection each) for `--duration` seconds
   over 127.0.0.1, each picking at random: search, ask, chat (/v1/chat/completions), a draft edit
   (PUT …/draft), or a publish of its own last draft. Per operation: count, p50 / p95, errors by
   status. Expected: no 5xx and no 409. Afterwards (once every publish has finished) it counts the
   versions of each edited document: every successful edit must be one version, numbered as its
   answer said.
2. **large**: one document of `--large-lines` lines (100,000: ~1.9 M characters of handbook
   paragraphs, wrapped short and numbered, a new run id in every heading so the model really runs)
   is created and published, while `--large-clients` clients search: search p50 / p95 during the
   publish (target: p95 <= 1 s), beside the same clients' search before it, and how long the
   publish took.

3. **quota** (a deployment of its own, with `RAG_QUOTA__SEARCH_PER_MINUTE=--quota-rate`; the other
   phases run without quotas, as one token drives all their clients): a quiet token searches at a
   steady pace (4 a second, under its quota) for `--quota-seconds`, alone, then again while a noisy
   token's `--noisy-clients` threads search as fast as they can, ignoring every 429, measured from
   the noisy token's first 429 on (its burst, `RAG_QUOTA__BURST_SECONDS` worth of searches, is
   within its quota and spent first; the time it took is reported). The noisy token's answers by
   status, and the quiet token's p50 / p95 idle and under the noise (target: p95 under noise <=
   1.5x idle).

4. **parse-share** (a deployment of its own): a quiet token's small upload (an 84-byte HTML page)
   while a hogging token keeps two OCR uploads in flight (`--hog-pages` scanned pages of NIST SP
   800-63B as an image-only PDF, ~2 s of OCR a page, so each runs until an upload's OCR budget,
   `RAG_PARSING__UPLOAD_OCR_SECONDS`, stops it): the quiet token's upload time alone, then
   `--small-uploads` of them, one every `--small-every` seconds, beside the hogs (target: p95 <= 5 s
   on an otherwise idle machine), and what /metrics says the files waited. `--caller-workers N`
   sets `RAG_PARSING__CALLER_WORKERS` (the worker count: no share, to see what the share buys).

    python -m benchmarks.load [--only embedded|scale-out] [--duration 60] [--clients 32]
                              [--phases mix,large,uploads,quota,parse-share] [--large-lines 100000] [--json out.json]

Loops are bounded in time and count; servers listen on 127.0.0.1 only and are stopped at the end.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import shutil
import tempfile
import textwrap
import threading
import time
import uuid
from collections import Counter, defaultdict
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx

from benchmarks import NO_QUOTAS, write_json
from benchmarks.fixture100k import EMBED_CACHE
from benchmarks.http_latency import HANDBOOK, questions, summary
from benchmarks.scale_out import Serve, rag

OPS = {"search": 40, "ask": 15, "chat": 15, "edit": 20, "publish": 10}  # weights of the mix
EDIT_DOCS = 8  # documents the clients edit: several clients edit one at once
MAX_CALLS_PER_CLIENT = 100_000  # a bound besides the clock
LARGE_TIMEOUT_S = 1800.0


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


# ----- the large document -----

def handbook_paragraphs() -> list[str]:
    """Prose paragraphs of the handbook pages (front matter, headings, tables and HTML left out)."""
    found = []
    for page in sorted(HANDBOOK.rglob("*.md")):
        text = page.read_text(errors="replace")
        if text.startswith("---"):
            end = text.find("\n---", 3)
            text = text[end + 4:] if end > 0 else text
        for para in text.split("\n\n"):
            para = " ".join(para.split())
            if len(para) > 40 and not para.startswith(("#", "<", "{", "|", "!", "[")):
                found.append(para)
    return found


def large_document(lines: int, run_id: str) -> str:
    """`lines` numbered lines of handbook prose wrapped at 15 columns (~19 characters a line, so
    100,000 lines hold ~1.9 M characters), a heading every 1,000 lines naming the run."""
    paragraphs = handbook_paragraphs()
    out: list[str] = []
    k = 0
    while len(out) < lines:
        if len(out) % 1000 == 0:
            out.append(f"## Part {len(out) // 1000 + 1} of handbook digest {run_id}")
            continue
        for piece in textwrap.wrap(paragraphs[k % len(paragraphs)], 15):
            if len(out) >= lines or len(out) % 1000 == 0:
                break
            out.append(f"{len(out) + 1} {piece}")
        k += 1
    return "\n".join(out)


# ----- deployments -----

def handbook_tree(root: Path, pages: int | None) -> Path:
    """The handbook, or a copy of its first `pages` pages (a quicker start on a cold embedding cache)."""
    if pages is None:
        return HANDBOOK
    for page in sorted(HANDBOOK.rglob("*.md"))[:pages]:
        target = root / "pages" / page.relative_to(HANDBOOK)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(page, target)
    return root / "pages"


@contextmanager
def deployment(name: str, root: Path, workers: int, pages: int | None,
               quotas: dict[str, str] | None = None) -> Iterator[Serve]:
    """A fresh home with the handbook and a `rag serve` on it; the servers it needs, stopped after.
    Without `quotas` (RAG_QUOTA__* values), none: one token drives all the clients of a phase."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env = {k: v for k, v in env.items() if not k.startswith("RAG_")}
    env |= {"RAG_HOME": str(root / "home"), "RAG_EMBED_CACHE": str(EMBED_CACHE)}
    env |= quotas if quotas is not None else NO_QUOTAS
    with ExitStack() as stack:
        if name == "scale-out":
            from tests.support.chromaserver import start_chroma, stop_chroma
            from tests.support.pgserver import PgServer

            pg = PgServer().start()
            stack.callback(pg.stop)
            chroma, chroma_url = start_chroma(root / "chroma")
            stack.callback(stop_chroma, chroma)
            env |= {"RAG_DATABASE_URL": pg.new_database(), "RAG_CHROMA_URL": chroma_url}
        else:
            workers = 1
        rag(env, "ingest", str(handbook_tree(root, pages)))
        writer = rag(env, "token", "create", "--workspace", "default", "--role", "editor",
                     "--scope", "knowledge:write", "--name", "load benchmark").strip()
        served = stack.enter_context(Serve(env, workers, root / "serve.log"))
        served.token = writer
        yield served


# ----- the mix -----

@dataclass
class Tally:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    statuses: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    edits: list[tuple[str, int]] = field(default_factory=list)  # (document, version number) of each edit that succeeded
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, op: str, seconds: float, status: int | str) -> None:
        with self.lock:
            self.latencies[op].append(seconds)
            self.statuses[op][status] += 1


def timed(tally: Tally, op: str, call: Callable[..., httpx.Response], *args: Any, **kwargs: Any) -> httpx.Response | None:
    began = time.perf_counter()
    try:
        response = call(*args, **kwargs)
    except httpx.HTTPError as exc:
        tally.add(op, time.perf_counter() - began, type(exc).__name__)
        return None
    tally.add(op, time.perf_counter() - began, response.status_code)
    return response


def mix_client(served: Serve, i: int, docs: list[str], queries: list[str], tally: Tally,
               start: threading.Barrier, deadline: list[float]) -> None:
    rng = random.Random(i)
    names, weights = list(OPS), list(OPS.values())
    paragraphs = handbook_paragraphs()
    last_draft: tuple[str, int] | None = None
    with served.client() as client:
        start.wait()
        for n in range(MAX_CALLS_PER_CLIENT):
            if time.perf_counter() >= deadline[0]:
                break
            op = rng.choices(names, weights)[0]
            query = rng.choice(queries)
            if op == "publish" and last_draft is None:
                op = "edit"
            if op == "search":
                timed(tally, op, client.post, "/v1/search", json={"query": query, "limit": 10})
            elif op == "ask":
                timed(tally, op, client.post, "/v1/ask", json={"query": query})
            elif op == "chat":
                messages = [{"role": "user", "content": rng.choice(queries)},
                            {"role": "assistant", "content": "See the handbook's pages on that."},
                            {"role": "user", "content": query}]
                timed(tally, op, client.post, "/v1/chat/completions", json={"model": "default", "messages": messages})
            elif op == "edit":
                doc = rng.choice(docs)
                body = f"# Load notes {doc}\n\n{rng.choice(paragraphs)}\n\nEdit {i}-{n}.\n"
                response = timed(tally, op, client.put, f"/v1/documents/{doc}/draft", json={"content": body})
                if response is not None and response.status_code == 200:
                    last_draft = (doc, response.json()["version_number"])
                    with tally.lock:
                        tally.edits.append(last_draft)
            else:
                doc, number = last_draft
                last_draft = None
                timed(tally, op, client.post, f"/v1/documents/{doc}/versions/{number}/publish")


def counted(lock: threading.Lock, times: list[float], statuses: Counter, call: Callable[[], httpx.Response]) -> None:
    """Time one call; count its status (or its transport error's name)."""
    began = time.perf_counter()
    try:
        status: int | str = call().status_code
    except httpx.HTTPError as exc:
        status = type(exc).__name__
    with lock:
        times.append(time.perf_counter() - began)
        statuses[status] += 1


def versions_of(client: httpx.Client, doc: str) -> list[dict]:
    response = client.get(f"/v1/documents/{doc}/versions")
    response.raise_for_status()
    return response.json()


def wait_published(client: httpx.Client, docs: list[str], timeout: float) -> bool:
    """Poll until no version of `docs` is publishing; False on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(v["status"] == "publishing" for doc in docs for v in versions_of(client, doc)):
            return True
        time.sleep(0.5)
    return False


def run_mix(served: Serve, clients: int, duration: float) -> dict[str, Any]:
    queries = questions()
    with served.client() as client:
        docs = []
        for k in range(EDIT_DOCS):
            made = client.post("/v1/documents", json={"name": f"Load notes {k}", "content": f"# Load notes {k}\n\nFirst.\n"})
            made.raise_for_status()
            docs.append(made.json()["node_id"])
    tally = Tally()
    start, deadline = threading.Barrier(clients + 1), [0.0]
    threads = [threading.Thread(target=mix_client, args=(served, i, docs, queries, tally, start, deadline))
               for i in range(clients)]
    for thread in threads:
        thread.start()
    load_before = load_average()
    deadline[0] = time.perf_counter() + duration
    began = time.perf_counter()
    start.wait()
    for thread in threads:
        thread.join(duration + 600)
    elapsed = time.perf_counter() - began
    load_after = load_average()
    with served.client() as client:
        settled = wait_published(client, docs, 600)
        numbers = {doc: sorted(v["version_number"] for v in versions_of(client, doc)) for doc in docs}
    edited: dict[str, list[int]] = defaultdict(list)
    for doc, number in tally.edits:
        edited[doc].append(number)
    consistent = all(numbers[doc] == sorted([1, *edited[doc]]) for doc in docs)
    ops = {}
    for op in OPS:
        times, statuses = tally.latencies.get(op, []), tally.statuses.get(op, Counter())
        ops[op] = {**(summary(times) if times else {"n": 0}), "statuses": {str(k): v for k, v in sorted(
            statuses.items(), key=lambda kv: str(kv[0]))}}
    errors = Counter()
    for statuses in tally.statuses.values():
        for status, count in statuses.items():
            if not (isinstance(status, int) and status < 300):
                errors[str(status)] += count
    return {
        "clients": clients, "duration_s": round(elapsed, 1), "load_before": load_before, "load_after": load_after,
        "operations": ops, "errors": dict(errors),
        "server_errors": sum(c for s, c in errors.items() if s.isdigit() and int(s) >= 500),
        "conflicts": errors.get("409", 0),
        "edits_ok": len(tally.edits), "versions_from_edits": sum(len(n) - 1 for n in numbers.values()),
        "publishes_settled": settled, "every_edit_a_version": consistent,
    }


# ----- the large document -----

def run_large(served: Serve, lines: int, clients: int, baseline_s: float) -> dict[str, Any]:
    queries = questions()
    body = large_document(lines, uuid.uuid4().hex[:8])

    def searchers(until: Callable[[], bool]) -> tuple[list[float], Counter]:
        times: list[float] = []
        statuses: Counter = Counter()
        lock = threading.Lock()

        def work(i: int) -> None:
            with served.client() as client:
                for n in range(MAX_CALLS_PER_CLIENT):
                    if until():
                        return
                    counted(lock, times, statuses, lambda: client.post("/v1/search", json={
                        "query": queries[(i + n * clients) % len(queries)], "limit": 10}))

        threads = [threading.Thread(target=work, args=(i,)) for i in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(LARGE_TIMEOUT_S + 60)
        return times, statuses

    stop_at = time.perf_counter() + baseline_s
    before, before_statuses = searchers(lambda: time.perf_counter() >= stop_at)
    with served.client() as client:
        began = time.perf_counter()
        made = client.post("/v1/documents", json={"name": f"Handbook digest {lines} lines", "content": body})
        made.raise_for_status()
        doc = made.json()["node_id"]
        created_s = time.perf_counter() - began
        began = time.perf_counter()
        client.post(f"/v1/documents/{doc}/versions/1/publish").raise_for_status()
    published = threading.Event()
    status = ["publishing"]

    def poll() -> None:
        with served.client() as client:
            while time.perf_counter() - began < LARGE_TIMEOUT_S:
                status[0] = versions_of(client, doc)[0]["status"]
                if status[0] != "publishing":
                    break
                time.sleep(0.5)
        published.set()

    poller = threading.Thread(target=poll)
    poller.start()
    load_before = load_average()
    during, during_statuses = searchers(published.is_set)
    poller.join(LARGE_TIMEOUT_S + 60)
    publish_s = time.perf_counter() - began
    return {
        "lines": lines, "chars": len(body), "create_s": round(created_s, 1), "publish_s": round(publish_s, 1),
        "final_status": status[0], "clients": clients, "load_before": load_before, "load_after": load_average(),
        "search_before": {**summary(before), "statuses": {str(k): v for k, v in before_statuses.items()}},
        "search_during": {**(summary(during) if during else {"n": 0}),
                          "max_ms": round(max(during, default=0) * 1000, 1),
                          "statuses": {str(k): v for k, v in during_statuses.items()}},
    }


# ----- hostile uploads -----

def run_uploads(served: Serve, uploads: int, tokens: int, readers: int) -> dict[str, Any]:
    from tests import hostile_files

    files = [("long.docx", hostile_files.docx_paragraphs(20_000)), ("bomb.pdf", hostile_files.pdf_flate_bomb(1024))]
    agents = [rag(served.env, "token", "create", "--workspace", "default", "--role", "editor", "--agent", "--access",
                  "all", "--scope", "knowledge:write", "--name", f"uploads {k}").strip() for k in range(tokens)]
    outcomes: Counter = Counter()
    upload_times: list[float] = []
    read_times: list[float] = []
    read_statuses: Counter = Counter()
    lock = threading.Lock()
    done = threading.Event()
    start = threading.Barrier(uploads + readers)

    def upload(i: int) -> None:
        name, data = files[(i % tokens) % len(files)]  # each token sends one kind, so both kinds get parsed
        with httpx.Client(base_url=served.url, timeout=600,
                          headers={"Authorization": f"Bearer {agents[i % tokens]}"}) as client:
            start.wait()
            began = time.perf_counter()
            try:
                response = client.post("/v1/uploads", files={"file": (name, data, "application/octet-stream")},
                                       data={"name": f"Hostile upload {i}"})
                code = response.json()["error"]["code"] if response.status_code >= 400 else "created"
                outcome = f"{name} {response.status_code} {code}"
            except httpx.HTTPError as exc:
                outcome = f"{name} {type(exc).__name__}"
            with lock:
                outcomes[outcome] += 1
                upload_times.append(time.perf_counter() - began)

    def read(i: int) -> None:
        with served.client() as client:
            start.wait()
            for n in range(MAX_CALLS_PER_CLIENT):
                if done.is_set():
                    return
                if (i + n) % 2:
                    counted(lock, read_times, read_statuses, lambda: client.get("/v1/roots"))
                else:
                    counted(lock, read_times, read_statuses,
                            lambda: client.post("/v1/search", json={"query": "annual leave", "limit": 5}))

    senders = [threading.Thread(target=upload, args=(i,)) for i in range(uploads)]
    reading = [threading.Thread(target=read, args=(i,)) for i in range(readers)]
    load_before = load_average()
    began = time.perf_counter()
    for thread in senders + reading:
        thread.start()
    for thread in senders:
        thread.join(LARGE_TIMEOUT_S)
    elapsed = time.perf_counter() - began
    done.set()
    for thread in reading:
        thread.join(120)
    return {
        "uploads": uploads, "tokens": tokens, "readers": readers, "seconds": round(elapsed, 1),
        "load_before": load_before, "load_after": load_average(),
        "reads": {**(summary(read_times) if read_times else {"n": 0}), "max_ms": round(max(read_times, default=0) * 1000, 1),
                  "statuses": {str(k): v for k, v in read_statuses.items()}},
        "upload_s": summary(upload_times) if upload_times else {"n": 0},
        "outcomes": dict(sorted(outcomes.items())),
    }


# ----- a small upload beside another token's OCR hogs -----

SMALL_PAGE = b"<html><head><title>Small</title></head><body><p>An 84-byte page.</p></body></html>"
NIST_PDF = ("datasets", "office_docs", "files", "pdf", "nist-sp-800-63b.pdf")


def ocr_hog(pages: int) -> bytes:
    """An image-only PDF of `pages` dense pages of NIST SP 800-63B (pages 20-29 over again) scanned
    at 300 dpi in black and white, as a fax or scanner writes one (~115 kB a page): OCR reads every
    page (~2 s of CPU each here)."""
    import pypdfium2 as pdfium

    from tests.support.paths import SHARED

    pdf = pdfium.PdfDocument(SHARED.joinpath(*NIST_PDF))
    try:
        scans = [pdf[19 + k % 10].render(scale=300 / 72, grayscale=True).to_pil().convert("1")
                 for k in range(pages)]
    finally:
        pdf.close()
    buffer = io.BytesIO()
    scans[0].save(buffer, "PDF", resolution=300, save_all=True, append_images=scans[1:])
    return buffer.getvalue()


def timed_upload(client: httpx.Client, name: str, data: bytes) -> tuple[float, str]:
    """(seconds, `status code`, and the message of a refusal) of one upload, a document of a new name."""
    began = time.perf_counter()
    try:
        response = client.post("/v1/uploads", files={"file": (name, data, "application/octet-stream")},
                               data={"name": f"{name} {uuid.uuid4().hex[:12]}"})
        error = response.json()["error"] if response.status_code >= 400 else None
        outcome = f"{response.status_code} {error['code']}: {error['message']}" if error else "201 created"
    except httpx.HTTPError as exc:
        outcome = type(exc).__name__
    return time.perf_counter() - began, outcome


def parse_waits(served: Serve) -> dict[str, dict[str, float]]:
    """/metrics' rag_parse_wait_seconds by caller kind (count, sum) and rag_parse_queue_length."""
    from prometheus_client.parser import text_string_to_metric_families

    found: dict[str, dict[str, float]] = defaultdict(dict)
    for family in text_string_to_metric_families(httpx.get(f"{served.url}/metrics", timeout=60).text):
        for sample in family.samples:
            if sample.name in ("rag_parse_wait_seconds_count", "rag_parse_wait_seconds_sum"):
                found[sample.labels["caller"]][sample.name.rsplit("_", 1)[1]] = sample.value
            elif sample.name == "rag_parse_queue_length":
                found["queue"]["length"] = sample.value
    return dict(found)


def run_parse_share(served: Serve, hog_pages: int, smalls: int, every: float) -> dict[str, Any]:
    """The parse-share phase (see the module's docstring)."""
    hog = ocr_hog(hog_pages)
    hogger, quiet = (rag(served.env, "token", "create", "--workspace", "default", "--role", "editor", "--scope",
                         "knowledge:write", "--name", name).strip() for name in ("hogs", "quiet"))

    def client(secret: str) -> httpx.Client:
        return httpx.Client(base_url=served.url, timeout=900, headers={"Authorization": f"Bearer {secret}"})

    with client(quiet) as mine:
        alone = [timed_upload(mine, "page.html", SMALL_PAGE) for _ in range(5)]
    stop = threading.Event()
    lock = threading.Lock()
    hog_outcomes: Counter = Counter()
    hog_times: list[float] = []

    def hogs() -> None:
        with client(hogger) as theirs:
            for _ in range(MAX_CALLS_PER_CLIENT):
                if stop.is_set():
                    return
                seconds, outcome = timed_upload(theirs, "scan.pdf", hog)
                with lock:
                    hog_outcomes[outcome] += 1
                    hog_times.append(seconds)

    senders = [threading.Thread(target=hogs) for _ in range(2)]  # RAG_UPLOADS__PER_TOKEN (2) in flight
    for thread in senders:
        thread.start()
    deadline = time.monotonic() + 120
    while httpx.get(f"{served.url}/healthz", timeout=60).json()["parsing"]["busy"] < 1:
        if time.monotonic() > deadline:
            raise RuntimeError("the hogs never started parsing")
        time.sleep(0.1)
    time.sleep(1)
    waits_before = parse_waits(served)
    load_before = load_average()
    during: list[tuple[float, str]] = []
    with client(quiet) as mine:
        for _ in range(smalls):
            seconds, outcome = timed_upload(mine, "page.html", SMALL_PAGE)
            during.append((seconds, outcome))
            time.sleep(max(0.0, every - seconds))
    load_during = load_average()
    stop.set()
    for thread in senders:
        thread.join(LARGE_TIMEOUT_S)
    return {
        "hog_bytes": len(hog), "hog_pages": hog_pages, "small_uploads": smalls, "every_s": every,
        "load_before": load_before, "load_during": load_during,
        "alone": summary([t for t, _ in alone]) | {"outcomes": dict(Counter(o for _, o in alone))},
        "beside_hogs": summary([t for t, _ in during]) | {"max_ms": round(max(t for t, _ in during) * 1000, 1),
                                                          "outcomes": dict(Counter(o for _, o in during))},
        "hogs": summary(hog_times) | {"outcomes": dict(sorted(hog_outcomes.items()))} if hog_times else {"n": 0},
        "waits_before": waits_before, "waits_after": parse_waits(served),
    }


def print_parse_share(label: str, r: dict[str, Any]) -> None:
    print(f"\n{label}: a quiet token's 84-byte HTML upload, alone, then {r['small_uploads']} (one every "
          f"{r['every_s']:g} s) while another token keeps two {r['hog_pages']}-page OCR uploads "
          f"({r['hog_bytes']:,} bytes) in flight, on {os.cpu_count()} CPUs; load average before "
          f"{r['load_before']}, during {r['load_during']}\n")
    print("| uploads | n | p50 ms | p95 ms | max ms | answers |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for name, title in (("alone", "small, alone"), ("beside_hogs", "small, beside the hogs"), ("hogs", "the hogs")):
        q = r[name]
        print(f"| {title} | {q['n']} | {q.get('p50_ms', '-')} | {q.get('p95_ms', '-')} | {q.get('max_ms', '-')} | "
              f"{q.get('outcomes', {})} |")
    print(f"\n/metrics rag_parse_wait_seconds (count, sum) before the small uploads: {r['waits_before']}; "
          f"after: {r['waits_after']}", flush=True)


QUIET_EVERY_S = 0.25  # the quiet token's pace: 240 searches a minute


def wait_for_refusal(statuses: Counter, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while not statuses.get("429"):
        if time.monotonic() > deadline:
            raise RuntimeError("the noisy token was never refused: is RAG_QUOTA__SEARCH_PER_MINUTE set?")
        time.sleep(0.05)


def run_quota(served: Serve, seconds: float, noisy_clients: int, rate: int) -> dict[str, Any]:
    """The quota phase (see the module's docstring)."""
    queries = questions()
    noisy_token = rag(served.env, "token", "create", "--workspace", "default", "--role", "viewer",
                      "--name", "noisy").strip()

    def quiet_searches(stop: threading.Event) -> tuple[list[float], Counter]:
        times: list[float] = []
        statuses: Counter = Counter()
        with served.client() as client:
            for n in range(MAX_CALLS_PER_CLIENT):
                if stop.is_set():
                    break
                began = time.perf_counter()
                counted(threading.Lock(), times, statuses,
                        lambda: client.post("/v1/search", json={"query": queries[n % len(queries)], "limit": 10}))
                time.sleep(max(0.0, QUIET_EVERY_S - (time.perf_counter() - began)))
        return times, statuses

    def for_seconds(work: Callable[[threading.Event], Any]) -> Any:
        stop = threading.Event()
        timer = threading.Timer(seconds, stop.set)
        timer.start()
        try:
            return work(stop)
        finally:
            timer.cancel()

    idle_times, idle_statuses = for_seconds(quiet_searches)
    noisy_statuses: Counter = Counter()
    lock = threading.Lock()
    noise_stop = threading.Event()

    def noise(i: int) -> None:
        with httpx.Client(base_url=served.url, timeout=120, headers={"Authorization": f"Bearer {noisy_token}"}) as client:
            for n in range(MAX_CALLS_PER_CLIENT):
                if noise_stop.is_set():
                    return
                try:
                    status = client.post("/v1/search", json={"query": queries[(i + n) % len(queries)],
                                                              "limit": 10}).status_code
                except httpx.HTTPError as exc:
                    status = type(exc).__name__
                with lock:
                    noisy_statuses[str(status)] += 1

    noisy = [threading.Thread(target=noise, args=(i,)) for i in range(noisy_clients)]
    noise_began = time.perf_counter()
    for thread in noisy:
        thread.start()
    wait_for_refusal(noisy_statuses)  # its burst spent: it is being limited from now on
    burst_s = time.perf_counter() - noise_began
    time.sleep(1)
    load_before = load_average()
    loaded_times, loaded_statuses = for_seconds(quiet_searches)
    noise_stop.set()
    for thread in noisy:
        thread.join(120)
    idle, loaded = summary(idle_times), summary(loaded_times)
    return {
        "rate_per_minute": rate, "seconds": seconds, "noisy_clients": noisy_clients, "load_during": load_before,
        "idle": idle | {"statuses": {str(k): v for k, v in idle_statuses.items()}},
        "loaded": loaded | {"statuses": {str(k): v for k, v in loaded_statuses.items()}},
        "p95_ratio": round(loaded["p95_ms"] / idle["p95_ms"], 2), "burst_spent_s": round(burst_s, 1),
        "noisy": dict(sorted(noisy_statuses.items())),
    }


def print_quota(label: str, r: dict[str, Any]) -> None:
    print(f"\n{label}: quota {r['rate_per_minute']} searches a minute per token; a quiet token searching 4 a second "
          f"for {r['seconds']:g} s alone, then beside a noisy token's {r['noisy_clients']} clients on "
          f"{os.cpu_count()} CPUs (load average {r['load_during']})\n")
    print("| quiet token | n | p50 ms | p95 ms | answers |")
    print("| --- | ---: | ---: | ---: | --- |")
    for name in ("idle", "loaded"):
        q = r[name]
        print(f"| {'alone' if name == 'idle' else 'beside the noisy token'} | {q['n']} | {q['p50_ms']} | {q['p95_ms']} | "
              f"{q['statuses']} |")
    print(f"\np95 beside the noise / alone: **{r['p95_ratio']}x** (target <= 1.5x); the noisy token's answers: "
          f"{r['noisy']}; its burst was spent in {r['burst_spent_s']} s, before the measure", flush=True)


def print_uploads(label: str, r: dict[str, Any]) -> None:
    reads, sent = r["reads"], r["upload_s"]
    print(f"\n{label}: {r['uploads']} hostile uploads by {r['tokens']} agent tokens, {r['readers']} readers, "
          f"{r['seconds']} s on {os.cpu_count()} CPUs; load average before {r['load_before']}, after {r['load_after']}\n")
    print("| calls | n | p50 ms | p95 ms | max ms | answers |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    print(f"| reads (roots, search) | {reads['n']} | {reads.get('p50_ms', '-')} | {reads.get('p95_ms', '-')} | "
          f"{reads['max_ms']} | {reads['statuses']} |")
    print(f"| uploads | {sent['n']} | {sent.get('p50_ms', '-')} | {sent.get('p95_ms', '-')} | - | "
          f"{'; '.join(f'{k}: {v}' for k, v in r['outcomes'].items())} |", flush=True)


# ----- output -----

def print_mix(label: str, r: dict[str, Any]) -> None:
    print(f"\n{label}: {r['clients']} clients for {r['duration_s']} s on {os.cpu_count()} CPUs; "
          f"load average before {r['load_before']}, after {r['load_after']}\n")
    print("| operation | calls | p50 ms | p95 ms | answers by status |")
    print("| --- | ---: | ---: | ---: | --- |")
    for op, o in r["operations"].items():
        statuses = ", ".join(f"{k}: {v}" for k, v in o["statuses"].items())
        print(f"| {op} | {o['n']} | {o.get('p50_ms', '-')} | {o.get('p95_ms', '-')} | {statuses} |")
    print(f"\n5xx: {r['server_errors']}, 409: {r['conflicts']}, other errors: "
          f"{ {k: v for k, v in r['errors'].items() if k != '409' and not k.startswith('5')} }")
    print(f"edits that succeeded: {r['edits_ok']}; versions they made: {r['versions_from_edits']}; "
          f"every edit a version, numbered as answered: {'yes' if r['every_edit_a_version'] else 'NO'}"
          f"{'' if r['publishes_settled'] else ' (publishes still running at the deadline)'}", flush=True)


def print_large(label: str, r: dict[str, Any]) -> None:
    b, d = r["search_before"], r["search_during"]
    print(f"\n{label}: a {r['lines']:,}-line document ({r['chars']:,} characters) created in {r['create_s']} s, "
          f"published in {r['publish_s']} s ({r['final_status']}); {r['clients']} search clients; load average "
          f"before {r['load_before']}, after {r['load_after']}\n")
    print("| search | calls | p50 ms | p95 ms | max ms | answers by status |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    print(f"| before the publish | {b['n']} | {b['p50_ms']} | {b['p95_ms']} | - | {b['statuses']} |")
    print(f"| during the publish | {d['n']} | {d.get('p50_ms', '-')} | {d.get('p95_ms', '-')} | {d['max_ms']} | "
          f"{d['statuses']} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=("embedded", "scale-out"), default=None)
    parser.add_argument("--phases", default="mix,large,uploads,quota",
                        help="Comma-separated: mix, large, uploads, quota, parse-share.")
    parser.add_argument("--quota-rate", type=int, default=600, help="Searches a minute per token (quota phase).")
    parser.add_argument("--quota-seconds", type=float, default=30.0, help="Seconds the quiet token measures, twice.")
    parser.add_argument("--noisy-clients", type=int, default=8, help="The noisy token's clients (quota phase).")
    parser.add_argument("--duration", type=float, default=60.0, help="Seconds of the mix.")
    parser.add_argument("--clients", type=int, default=32, help="Clients of the mix.")
    parser.add_argument("--workers", type=int, default=2, help="rag serve workers on the scale-out deployment.")
    parser.add_argument("--large-lines", type=int, default=100_000)
    parser.add_argument("--large-clients", type=int, default=4, help="Search clients during the large publish.")
    parser.add_argument("--large-baseline", type=float, default=10.0, help="Seconds of search before it.")
    parser.add_argument("--uploads", type=int, default=44, help="Hostile uploads sent at once (uploads phase).")
    parser.add_argument("--upload-tokens", type=int, default=11, help="Agent tokens that send them.")
    parser.add_argument("--upload-readers", type=int, default=4, help="Readers meanwhile.")
    parser.add_argument("--hog-pages", type=int, default=20, help="Scanned pages of each OCR hog (parse-share).")
    parser.add_argument("--small-uploads", type=int, default=20, help="The quiet token's uploads beside the hogs.")
    parser.add_argument("--small-every", type=float, default=3.0, help="Seconds between the quiet token's uploads.")
    parser.add_argument("--caller-workers", type=int, default=None,
                        help="RAG_PARSING__CALLER_WORKERS of the parse-share deployment (default: the setting's).")
    parser.add_argument("--pages", type=int, default=None, help="Serve only the handbook's first N pages.")
    parser.add_argument("--json", default=None, help="Write the result here ('-': standard output).")
    args = parser.parse_args()
    phases = {p.strip() for p in args.phases.split(",") if p.strip()}
    report: dict[str, Any] = {}
    for name in ("embedded", "scale-out"):
        if args.only not in (None, name):
            continue
        label = "embedded, 1 process" if name == "embedded" else f"PostgreSQL + Chroma server, {args.workers} workers"
        report[name] = {}
        if phases - {"quota", "parse-share"}:
            run_phases(name, label, phases, args, report[name])
        if "parse-share" in phases:
            env = NO_QUOTAS | ({} if args.caller_workers is None else
                               {"RAG_PARSING__CALLER_WORKERS": str(args.caller_workers)})
            with tempfile.TemporaryDirectory(prefix="rag-load-") as tmp, \
                    deployment(name, Path(tmp), args.workers, args.pages, env) as served:
                report[name]["parse_share"] = run_parse_share(served, args.hog_pages, args.small_uploads,
                                                              args.small_every)
                print_parse_share(label, report[name]["parse_share"])
        if "quota" in phases:
            quotas = {"RAG_QUOTA__SEARCH_PER_MINUTE": str(args.quota_rate)}
            with tempfile.TemporaryDirectory(prefix="rag-load-") as tmp, \
                    deployment(name, Path(tmp), args.workers, args.pages, quotas) as served:
                report[name]["quota"] = run_quota(served, args.quota_seconds, args.noisy_clients, args.quota_rate)
                print_quota(label, report[name]["quota"])
    write_json(report, args.json)


def run_phases(name: str, label: str, phases: set[str], args: argparse.Namespace, report: dict[str, Any]) -> None:
    """The phases that share one deployment without quotas: mix, large, uploads."""
    with tempfile.TemporaryDirectory(prefix="rag-load-") as tmp, deployment(name, Path(tmp), args.workers, args.pages) as served:
        if "mix" in phases:
            report["mix"] = run_mix(served, args.clients, args.duration)
            print_mix(label, report["mix"])
        if "large" in phases:
            report["large"] = run_large(served, args.large_lines, args.large_clients, args.large_baseline)
            print_large(label, report["large"])
        if "uploads" in phases:
            report["uploads"] = run_uploads(served, args.uploads, args.upload_tokens, args.upload_readers)
            print_uploads(label, report["uploads"])


if __name__ == "__main__":
    main()
