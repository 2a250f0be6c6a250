"""Binary parsers (PDF, Word, HTML, and any format to come) run in worker processes under bounds.

A parser reads untrusted bytes with libraries that cannot bound themselves: PDFium inflates a
FlateDecode stream as far as it goes (a 2.9 MB PDF took 15 GB, issue 27), python-docx builds the
whole XML tree of any number of paragraphs, and neither can be interrupted from Python. So no
parser runs in the service's own process: each file is parsed by one of a few worker processes
(`ParseSettings.workers`, default the number of cores), and every parse is bounded:

- **memory**: the worker's address space (RLIMIT_AS, `ParseSettings.memory_mib`); PDFium aborts
  when an allocation fails, Python raises MemoryError; either way that file fails, not the service;
- **CPU time**: RLIMIT_CPU, set before each file to what the worker has used plus
  `ParseSettings.cpu_seconds` (the kernel stops it with SIGXCPU);
- **wall-clock time**: the pool kills a worker that has not answered `ParseSettings.timeout_seconds`
  after it was given the file (a parser blocked without using CPU; a new worker's start, loading its
  parsers, is not counted);
- **output**: a body of more than `ParseSettings.max_chars` characters is refused in the worker,
  before it is sent back (the formats' own caps, pages and parts, come first).

A file that exceeds a bound fails alone with FileTooComplex (`file_too_complex`), naming the bound;
a worker that died or was killed is replaced for the next file. A worker is a fresh interpreter
(`python -m rag.ingest.sandbox`, by fork and exec at once: no copy of the service's threaded
process ever runs Python), which loads the parsers once and then parses file after file (`_JOBS_PER_WORKER`): a
file pays only the pipe there and back (see docs/reliability.md for the figures). What a worker
sends back is plain JSON of a bounded length, never a pickle: the service trusts nothing a
process that parsed untrusted bytes says.

The pool is driven by threads of its own (one per worker): a caller waits on a future, so an
async endpoint awaits it without holding a thread (`parse_async`), and a command or directory
ingest waits as before (`parse`).

The workers are shared fairly between callers (issue 49: one token's two OCR uploads held both
workers for a minute while another's 84-byte page waited). Each file is submitted with its
caller's key (`upload:<workspace>:<token>`, `source:<workspace>:<source>`, `ingest:<workspace>:<root>`;
`""` for a caller that names none) and waits in that caller's own queue; a free worker takes the
next file of the caller served longest ago (round robin, a caller new to the queue first), so a
caller with many files waiting makes another's wait for at most the files already running. And one
caller holds at most `caller_workers` workers at once (default: all but one), alone too: a worker
is always left for the next caller, who never waits behind a file that may take minutes. With one
worker no share is possible; the round robin and an upload's OCR budget (below) bound that wait.

An upload's OCR has a budget of its own (`Limits.upload_ocr_seconds`, `RAG_PARSING__UPLOAD_OCR_SECONDS`),
smaller than a sync's (`RAG_PARSING__OCR_SECONDS`): a request waits for it, and a scanned file of
many pages belongs in a source. Each job carries its own bounds to the worker. How many files wait
and how long each waited are metrics (`rag_parse_queue_length`, `rag_parse_wait_seconds`,
rag/telemetry.py). `close` kills every worker at once, and a parse waiting on one
fails with ParsingStopped: a shutdown is never held by a parse (`rag serve` stops parsing on
SIGTERM/SIGINT, rag/api/app.py; any process when it exits). A worker whose service died without
closing it is killed by the kernel (PR_SET_PDEATHSIG), and it stops on its own when the pipe closes.

Text formats (.md, .txt) are parsed in the calling process: their parsing is a few linear passes
over text already bounded by the upload limit, with no decompression and no nesting to expand.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ctypes
import dataclasses
import json
import logging
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections import deque
from importlib import import_module
from concurrent.futures import Future
from multiprocessing.connection import Connection
from dataclasses import dataclass
from typing import Any

from rag.errors import Unavailable
from rag.ingest.formats import BINARY_PARSERS, FileTooComplex, UnreadableFile, parse_here, too_complex
from rag.ingest.formats.ocr import OcrLimits, configure as configure_ocr, may_read
from rag.ingest.parse import ParsedDocument

log = logging.getLogger(__name__)

_SAMPLE_SECONDS = 0.05  # how often a waiting pool notes its worker's memory
_JOBS_PER_WORKER = 200  # a worker is replaced after this many files (what a parser leaks stays bounded)
_START_SECONDS = 120.0  # how long a new worker may take to load its parsers (a loaded machine) before it is given up
_READY = b"ready"
_PR_SET_PDEATHSIG = 1
_CRASH_SIGNALS = {signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGTRAP}


class ParsingStopped(Unavailable):
    """The service is stopping: a file being parsed (or waiting for a worker) was not read."""

    code = "parsing_stopped"


@dataclass(frozen=True)
class Limits:
    """The bounds of one parse (ParseSettings in rag/settings.py documents each)."""

    memory_mib: int = 1536
    cpu_seconds: int = 120
    timeout_seconds: float = 180.0
    max_chars: int = 20_000_000
    ocr: OcrLimits = OcrLimits()  # OCR's own bounds; a file it may read gets its seconds on top
    upload_ocr_seconds: float = 30.0  # an upload's OCR: at most this, a file and a page (its request waits)
    caller_workers: int | None = None  # workers one caller may hold at once; None: all but one

    def for_upload(self) -> Limits:
        """These bounds with an upload's OCR budget: `upload_ocr_seconds` a file, and a page."""
        seconds = min(self.ocr.seconds, self.upload_ocr_seconds)
        ocr = dataclasses.replace(self.ocr, seconds=seconds, page_seconds=min(self.ocr.page_seconds, seconds))
        return dataclasses.replace(self, ocr=ocr)


# ----- the worker process -----

def _worker_setup() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C in a terminal reaches the whole group: just stop
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:  # killed by the kernel when the service's process (its pool's thread) goes
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the pipe's end and RLIMIT_CPU still end it
        pass
    if os.getppid() == 1:  # the service went before the line above ran
        os._exit(0)


def _cpu_used() -> int:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return int(usage.ru_utime + usage.ru_stime) + 1


def _soft_limit(kind: int, soft: int) -> None:
    """Set a soft limit, below the hard one (which stays, so the next file may have its own)."""
    _, hard = resource.getrlimit(kind)
    resource.setrlimit(kind, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))


def peak_mib() -> float:
    """This process's memory high-water mark (VmHWM, MiB); 0 where /proc does not say."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _parse_one(job: tuple[bytes, str, str | None], limits: Limits) -> tuple[Any, ...]:
    data, filename, title = job
    _soft_limit(resource.RLIMIT_CPU, _cpu_used() + limits.cpu_seconds)
    _soft_limit(resource.RLIMIT_AS, limits.memory_mib << 20)
    configure_ocr(limits.ocr)
    try:
        parsed = parse_here(data, filename, title)
        if len(parsed.body) > limits.max_chars:
            raise too_complex("output", f"more than {limits.max_chars} characters of text")
        return ("ok", dataclasses.asdict(parsed))
    except FileTooComplex as exc:
        return ("complex", exc.bound, str(exc))
    except UnreadableFile as exc:
        return ("unreadable", str(exc))
    except MemoryError:
        return ("complex", "memory", str(too_complex("memory", f"{limits.memory_mib} MiB")))
    except RecursionError:
        return ("complex", "depth", str(too_complex("depth", "nested too deeply")))
    except Exception:  # noqa: BLE001 - a parser's own bug on a strange file: that file fails, logged by the pool
        return ("bug", traceback.format_exc(limit=8))


def _serve(conn: Any) -> None:
    """A worker's loop: a job in, its outcome out, until the pipe closes."""
    _worker_setup()
    for module in BINARY_PARSERS.values():  # loaded once, before the first file
        import_module(module.split(":")[0])
    conn.send_bytes(_READY)  # the pool starts a file's clock only now: a slow start is not the file's time
    while True:
        try:
            job, limits = conn.recv()
        except (EOFError, OSError):
            return
        outcome = _parse_one(job, limits)
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        resource.setrlimit(resource.RLIMIT_AS, (hard, hard))  # the answer is written outside the parse's bound
        try:  # plain JSON back, never a pickle: the service trusts nothing a parser's process says
            answer = json.dumps([*outcome, peak_mib()], ensure_ascii=False).encode()
        except (TypeError, ValueError):  # metadata that is not JSON: a parser's bug
            answer = json.dumps(["bug", traceback.format_exc(limit=8), peak_mib()]).encode()
        conn.send_bytes(answer)
        if outcome[0] == "complex" and outcome[1] == "memory":
            return  # what a failed allocation left behind is not worth keeping: the next file gets a fresh worker


# ----- the pool -----

class _Slot:
    """One worker process, started when first needed and replaced when it dies or is killed."""

    def __init__(self) -> None:
        self.process: subprocess.Popen | None = None
        self.conn: Connection | None = None
        self.jobs = 0
        self.peak_mib = 0.0  # the last file's worker's memory high-water mark
        self.lock = threading.Lock()

    def start(self) -> None:
        ours, theirs = socket.socketpair()
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "rag.ingest.sandbox", str(theirs.fileno())], pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, close_fds=True)  # stdout may be a protocol (rag mcp)
        finally:
            theirs.close()
        self.conn, self.jobs, self.peak_mib = Connection(ours.detach()), 0, 0.0

    def alive(self) -> bool:
        return self.process is not None and self.process.returncode is None and self.reap(0) is None \
            and self.jobs < _JOBS_PER_WORKER

    def sample(self) -> None:
        """Note the running worker's memory high-water mark (VmHWM in /proc) in `peak_mib`. Not the
        kernel's account at its end (wait4's ru_maxrss): that keeps the high-water mark of the
        service's own memory, which a child has before its exec, so it says the service's size."""
        if self.process is None:
            return
        try:
            with open(f"/proc/{self.process.pid}/status") as status:
                for line in status:
                    if line.startswith("VmHWM:"):
                        self.peak_mib = max(self.peak_mib, int(line.split()[1]) / 1024)
                        return
        except (OSError, ValueError):  # gone, or a system without /proc
            pass

    def reap(self, seconds: float = 5.0) -> int | None:
        """Wait (up to `seconds`) for the worker to end: its exit code (negative: the signal)."""
        process = self.process
        if process is None or process.returncode is not None:
            return None if process is None else process.returncode
        deadline = time.monotonic() + seconds
        while True:
            try:
                pid, status = os.waitpid(process.pid, os.WNOHANG)
            except ChildProcessError:  # reaped already
                return process.poll()
            if pid:
                process.returncode = os.waitstatus_to_exitcode(status)
                return process.returncode
            if time.monotonic() > deadline:
                return None
            time.sleep(0.01)

    def kill(self) -> None:
        """Kill the worker and close its connection. Its driving thread and the pool's close() may
        both call this: under the lock the second finds it done, so the connection is closed once (a
        second close of the same descriptor fails, or closes whatever file reused its number)."""
        with self.lock:
            process, conn = self.process, self.conn
            if process is not None and process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                self.reap()
            self.process = self.conn = None
            if conn is not None:
                conn.close()


def _queued(change: int) -> None:
    """Files waiting for a worker, in this process (`rag_parse_queue_length`). Kept whether
    telemetry is on or not, so that turning it on or off between a file's queueing and its turn
    leaves no file counted for ever. Imported here, not at the top: a worker (this module run as a
    program) keeps no metrics."""
    from rag import telemetry

    if change:
        telemetry.PARSE_QUEUED.inc(change)


def _waited(job: _Job) -> None:
    from rag import telemetry

    if telemetry.enabled:
        telemetry.PARSE_WAIT_SECONDS.labels(caller_kind(job.caller)).observe(time.monotonic() - job.queued)


@dataclass
class _Job:
    """A file waiting for a worker: whose it is, its bounds, since when it waits."""

    future: Future
    work: tuple[bytes, str, str | None]
    limits: Limits
    caller: str
    queued: float = dataclasses.field(default_factory=time.monotonic)


def caller_kind(caller: str) -> str:
    """What kind of caller a key names, the only part of it a metric's label shows."""
    kind = caller.split(":", 1)[0]
    return kind if kind in ("upload", "source", "ingest") else "other"


class ParsePool:
    """Worker processes parsing files under `limits`, at most `workers` at once; the rest queue,
    one queue per caller, served in turn (see the module's text)."""

    def __init__(self, workers: int, limits: Limits | None = None) -> None:
        self.workers = max(1, workers)
        self.limits = limits or Limits()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # a file queued, a worker freed, the pool closed
        self._waiting: dict[str, deque[_Job]] = {}  # each caller's files, in the order it sent them
        self._held: dict[str, int] = {}  # the workers each caller holds now
        self._served: dict[str, int] = {}  # the turn each caller with files here was last served in
        self._turn = 0
        self._threads: list[threading.Thread] = []
        self._slots: list[_Slot] = []
        self._closed = False
        self._running: dict[Future, _Slot] = {}
        self.last_peak_mib = 0.0  # the memory high-water mark of the worker of the last file parsed (tests)

    # -- callers --

    def submit(self, data: bytes, filename: str, fallback_title: str | None = None, *, caller: str = "",
               upload: bool = False) -> Future:
        """Queue the file as `caller`'s; `upload`: under an upload's OCR budget."""
        future: Future = Future()
        limits = self.limits.for_upload() if upload else self.limits
        with self._lock:
            if self._closed:
                raise ParsingStopped("the service is stopping; the file was not read")
            if not self._threads:
                self._start_threads()
            self._waiting.setdefault(caller, deque()).append(_Job(future, (data, filename, fallback_title),
                                                                  limits, caller))
            _queued(1)
            self._changed.notify()
        future.add_done_callback(self._dropped)
        return future

    def parse(self, data: bytes, filename: str, fallback_title: str | None = None, *, caller: str = "",
              upload: bool = False) -> ParsedDocument:
        """Parse in a worker and wait. Raises UnreadableFile (FileTooComplex for a bound) or ParsingStopped."""
        return self.submit(data, filename, fallback_title, caller=caller, upload=upload).result()

    async def parse_async(self, data: bytes, filename: str, fallback_title: str | None = None, *,
                          caller: str = "", upload: bool = False) -> ParsedDocument:
        """As parse, awaited: the caller's thread is free meanwhile (a file still waiting for a
        worker is dropped from the queue when the caller is cancelled)."""
        future = self.submit(data, filename, fallback_title, caller=caller, upload=upload)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            if not future.cancel():  # a worker has it: nobody waits for it any more, stop it
                slot = self._running.get(future)
                if slot is not None and slot.process is not None:
                    with contextlib.suppress(ProcessLookupError):
                        slot.process.kill()  # its thread sees the pipe close, reaps and replaces it
            raise

    def share(self) -> int:
        """The workers one caller may hold at once: `caller_workers`, else all but one (at least one)."""
        wanted = self.limits.caller_workers
        return max(1, min(self.workers, wanted if wanted is not None else self.workers - 1))

    def stats(self) -> dict[str, int]:
        """busy: files being parsed now; capacity: the workers; queued: files waiting for one."""
        with self._lock:
            return {"busy": sum(self._held.values()), "capacity": self.workers,
                    "queued": sum(map(len, self._waiting.values()))}

    def close(self) -> None:
        """Kill every worker now; parses in flight and queued fail with ParsingStopped."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            waiting = [job for jobs in self._waiting.values() for job in jobs]
            self._waiting.clear()
            _queued(-len(waiting))
            self._changed.notify_all()
        for slot in list(self._slots):
            slot.kill()
        for job in waiting:
            if job.future.set_running_or_notify_cancel():
                job.future.set_exception(ParsingStopped("the service is stopping; the file was not read"))

    def __enter__(self) -> ParsePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the fair queue --

    def _take(self) -> _Job | None:
        """The next file a free worker parses (None: the pool is closed): the first file of the
        caller served longest ago among those under their share. Waits until there is one."""
        with self._changed:
            while not self._closed:
                share = self.share()
                ready = [c for c in self._waiting if self._held.get(c, 0) < share]
                if ready:
                    caller = min(ready, key=lambda c: self._served.get(c, 0))
                    jobs = self._waiting[caller]
                    job = jobs.popleft()
                    if not jobs:
                        del self._waiting[caller]
                    self._turn += 1
                    self._served[caller] = self._turn
                    self._held[caller] = self._held.get(caller, 0) + 1
                    _queued(-1)
                    _waited(job)
                    return job
                self._changed.wait()
            return None

    def _release(self, caller: str) -> None:
        with self._changed:
            left = self._held.pop(caller, 0) - 1
            if left > 0:
                self._held[caller] = left
            elif caller not in self._waiting:
                self._served.pop(caller, None)  # nothing here any more: it comes back as new
            self._changed.notify_all()

    def _dropped(self, future: Future) -> None:
        """A file cancelled while it waited leaves its caller's queue (a done callback)."""
        if not future.cancelled():
            return
        with self._lock:
            for caller, jobs in list(self._waiting.items()):
                for job in jobs:
                    if job.future is future:
                        jobs.remove(job)
                        _queued(-1)
                        if not jobs:
                            del self._waiting[caller]
                            if not self._held.get(caller):
                                self._served.pop(caller, None)
                        return

    # -- the threads that drive the workers --

    def _start_threads(self) -> None:
        for i in range(self.workers):
            slot = _Slot()
            self._slots.append(slot)
            thread = threading.Thread(target=self._drive, args=(slot,), name=f"rag-parse-{i}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def _drive(self, slot: _Slot) -> None:
        while True:
            job = self._take()
            if job is None:
                slot.kill()
                return
            future = job.future
            try:
                if not future.set_running_or_notify_cancel():
                    continue
                with self._lock:
                    self._running[future] = slot
                try:
                    future.set_result(self._run(slot, job.work, job.limits))
                except BaseException as exc:  # noqa: BLE001 - the caller gets whatever it was
                    future.set_exception(exc)
                finally:
                    with self._lock:
                        del self._running[future]
            finally:
                self._release(job.caller)

    def _run(self, slot: _Slot, job: tuple[bytes, str, str | None], limits: Limits) -> ParsedDocument:
        try:
            if not slot.alive():
                self._restart(slot)
            slot.jobs += 1
            slot.conn.send((job, limits))
            # OCR bounds its own time in the worker (ocr.py); this stays the backstop, later by as much.
            seconds = limits.timeout_seconds + (limits.ocr.seconds if may_read(job[1], limits.ocr) else 0)
            if not self._answered(slot, seconds):
                slot.kill()
                self.last_peak_mib = slot.peak_mib
                log.warning("parsing %s: stopped after %g s (peak %.0f MiB)", job[1], seconds, slot.peak_mib)
                raise too_complex("time", f"more than {seconds:g} s")
            # At most what a body of max_chars can take as JSON (6 bytes a character escaped), and room around it.
            raw = slot.conn.recv_bytes(maxlength=limits.max_chars * 6 + (1 << 20))
        except (EOFError, OSError):
            raise self._died(slot, job[1], limits) from None
        try:
            answer = json.loads(raw)
        except ValueError:  # not what a worker writes: it is not trusted with another file
            slot.kill()
            raise UnreadableFile("the file could not be read (damaged, or not what its extension says)") from None
        self.last_peak_mib = answer[-1]
        return self._outcome(answer, job[1])

    def _restart(self, slot: _Slot) -> None:
        """A fresh worker in `slot`, returned once it has loaded its parsers. Its start is not
        counted against the file it is given next: on a loaded machine it can take seconds."""
        slot.kill()
        slot.start()
        if not slot.conn.poll(_START_SECONDS) or slot.conn.recv_bytes(maxlength=64) != _READY:
            raise EOFError  # it ended, hung or said something else: _died names what stopped it
        if self._closed:  # closed while this one started
            slot.kill()
            raise ParsingStopped("the service is stopping; the file was not read")

    @staticmethod
    def _answered(slot: _Slot, seconds: float) -> bool:
        """Wait for the worker's answer (or its end) up to `seconds`, sampling its memory meanwhile."""
        deadline = time.monotonic() + seconds
        while True:
            slot.sample()
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if slot.conn.poll(min(left, _SAMPLE_SECONDS)):
                return True

    def _died(self, slot: _Slot, filename: str, limits: Limits) -> Exception:
        """The worker died before it answered: which bound stopped it, from how it ended."""
        code = slot.reap()
        slot.kill()
        self.last_peak_mib = slot.peak_mib
        if self._closed:
            return ParsingStopped("the service is stopping; the file was not read")
        log.warning("parsing %s: the worker ended with %s", filename, code)
        if code == -signal.SIGXCPU:
            return too_complex("time", f"more than {limits.cpu_seconds} s of CPU")
        if code is not None and -code in _CRASH_SIGNALS:  # PDFium aborts when an allocation fails
            return too_complex("memory", f"{limits.memory_mib} MiB")
        return UnreadableFile("the file could not be read (damaged, or not what its extension says)")

    def _outcome(self, answer: tuple[Any, ...], filename: str) -> ParsedDocument:
        kind = answer[0]
        if kind == "ok":
            fields = answer[1]
            spans = {key: [tuple(span) for span in fields[key]] for key in ("pages", "rows")}
            names = {int(n): name for n, name in fields["names"].items()}  # JSON made the numbers strings
            return ParsedDocument(**{**fields, **spans, "names": names})
        if kind == "complex":
            log.warning("parsing %s: %s (peak %.0f MiB)", filename, answer[2], answer[-1])
            raise FileTooComplex(answer[1], answer[2])
        if kind == "unreadable":
            raise UnreadableFile(answer[1])
        log.error("parsing %s failed in its worker:\n%s", filename, answer[1])
        raise UnreadableFile("the file could not be read (damaged, or not what its extension says)")


# ----- the process's pool -----

_shared: ParsePool | None = None
_stopping = False
_shared_lock = threading.Lock()
_configured: tuple[int, Limits] = (os.cpu_count() or 1, Limits())


def configure(workers: int, limits: Limits) -> None:
    """The process's pool takes these from now on (KnowledgeService, from its settings)."""
    global _configured
    with _shared_lock:
        _configured = (max(1, workers), limits)
        if _shared is not None:
            _shared.limits = limits
            _shared.workers = _shared.workers if _shared._threads else max(1, workers)


def configure_from(parsing: Any) -> None:
    """configure() from a ParseSettings (rag/settings.py)."""
    configure(parsing.worker_count, Limits(parsing.memory_mib, parsing.cpu_seconds, parsing.timeout_seconds,
                                           parsing.max_chars, OcrLimits(
                                               parsing.ocr_command, parsing.ocr_languages, parsing.ocr_max_pages,
                                               parsing.ocr_page_seconds, parsing.ocr_seconds),
                                           parsing.upload_ocr_seconds, parsing.caller_workers))


def shared_pool() -> ParsePool:
    """The process's pool (its workers start on first use). Once the process is stopping, a
    parse is refused with ParsingStopped rather than starting new workers."""
    global _shared
    with _shared_lock:
        if _stopping:
            raise ParsingStopped("the service is stopping; the file was not read")
        if _shared is None:
            _shared = ParsePool(*_configured)
        return _shared


def shared_stats() -> dict[str, int]:
    """The process's pool's saturation, without starting it."""
    pool = _shared
    if pool is None or pool._closed:
        return {"busy": 0, "capacity": _configured[0], "queued": 0}
    return pool.stats()


def stop_parsing() -> None:
    """Kill the process's workers: the process is stopping (a signal, or its exit)."""
    global _stopping
    _stopping = True
    pool = _shared
    if pool is not None:
        pool.close()


atexit.register(stop_parsing)


if __name__ == "__main__":  # a worker: python -m rag.ingest.sandbox FD (the pool starts it)
    _serve(Connection(int(sys.argv[1])))
