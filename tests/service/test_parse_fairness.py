"""The parse workers are shared fairly between callers (rag/ingest/sandbox.py, issue 49): one
caller's files queued behind the workers never hold back another caller's file, one caller never
holds every worker, an upload's OCR stops at its own budget (smaller than a sync's), and /metrics
shows the queue.

A "hog" is a PNG whose OCR command is a stand-in for tesseract that waits until the test lets it
go (each run writes `started.<pid>` and waits for `go.<pid>`, a minute at most): the order in which
files start and end is asserted, not how fast anything runs."""

from __future__ import annotations

import io
import time
from concurrent.futures import Future
from pathlib import Path

import httpx
import pytest
from PIL import Image, ImageDraw
from prometheus_client.parser import text_string_to_metric_families

from rag.errors import InvalidArgument
from rag.ingest import sandbox
from rag.ingest.formats.ocr import OcrLimits
from rag.ingest.sandbox import Limits, ParsePool
from rag.service import KnowledgeService, Principal
from rag.settings import ParseSettings, Settings

from ..support.api_support import LiveServer

WAIT_S = 30  # how long a file waits for its result at most: half the time a stand-in waits for the test
SMALL = (b"<html><head><title>Small</title></head><body><p>An 84-byte page.</p></body></html>", "page.html")
TSV = ("level\\tpage_num\\tblock_num\\tpar_num\\tline_num\\tword_num\\tleft\\ttop\\twidth\\theight\\tconf\\ttext\\n"
       "5\\t1\\t1\\t1\\t1\\t1\\t0\\t0\\t10\\t10\\t95\\thog\\n")


def scan() -> bytes:
    """A small image with something on it (a blank one is not read at all)."""
    image = Image.new("L", (400, 200), 255)
    ImageDraw.Draw(image).rectangle((50, 50, 350, 150), fill=0)
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


class Gate:
    """A stand-in for tesseract whose runs wait for the test: `started()` counts them, `release()`
    lets every run started so far finish."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.command = root / "fake-tesseract"
        self.command.write_text(
            "#!/bin/sh\ncat > /dev/null\n"
            f"touch '{root}/started.'$$\ni=0\n"
            f"while [ ! -e '{root}/go.'$$ ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done\n"
            f"printf '{TSV}'\n")
        self.command.chmod(0o755)

    def started(self) -> int:
        return len(list(self.root.glob("started.*")))

    def release(self) -> None:
        for started in self.root.glob("started.*"):
            (self.root / f"go.{started.name.split('.', 1)[1]}").touch()

    def wait_started(self, count: int) -> None:
        deadline = time.monotonic() + 60
        while self.started() < count:
            assert time.monotonic() < deadline, f"{count} OCR runs never started (saw {self.started()})"
            time.sleep(0.02)


@pytest.fixture
def gate(tmp_path: Path) -> Gate:
    return Gate(tmp_path)


def limits(gate: Gate, **more) -> Limits:
    return Limits(memory_mib=768, cpu_seconds=60, timeout_seconds=60, ocr=OcrLimits(command=str(gate.command)), **more)


def finish(gate: Gate, futures: list[Future]) -> None:
    """Let every hog go as it starts, until all have ended."""
    deadline = time.monotonic() + 120
    while not all(f.done() for f in futures):
        assert time.monotonic() < deadline, "the hogs never finished"
        gate.release()
        time.sleep(0.05)
    for future in futures:
        assert future.result().ocr == [1]


def test_another_callers_file_is_read_while_one_caller_holds_its_share(gate: Gate) -> None:
    """Two workers; caller A sends three slow scans, then B a small page. A holds one worker (its
    share: all but one), so B's page is read while none of A's scans has ended; a second page of
    B's too, and A still holds one worker."""
    with ParsePool(2, limits(gate)) as pool:
        hogs = [pool.submit(scan(), f"scan-{i}.png", caller="upload:ws1:token:a") for i in range(3)]
        gate.wait_started(1)
        small = pool.submit(*SMALL, caller="upload:ws2:token:b")
        assert small.result(timeout=WAIT_S).title == "Small"
        assert not any(hog.done() for hog in hogs)
        assert pool.submit(*SMALL, caller="upload:ws2:token:b").result(timeout=WAIT_S).title == "Small"
        assert gate.started() == 1 and pool.stats() == {"busy": 1, "capacity": 2, "queued": 2}
        finish(gate, hogs)


def test_a_callers_queued_files_wait_for_another_callers_turn(gate: Gate) -> None:
    """One worker (no share to keep): A's first scan runs, its second waits; B's page, sent after
    both, is read next, before A's second scan starts."""
    with ParsePool(1, limits(gate)) as pool:
        first = pool.submit(scan(), "scan-1.png", caller="source:ws1:s1")
        second = pool.submit(scan(), "scan-2.png", caller="source:ws1:s1")
        gate.wait_started(1)
        small = pool.submit(*SMALL, caller="upload:ws2:token:b")
        started_when_read: list[int] = []
        small.add_done_callback(lambda _: started_when_read.append(gate.started()))
        gate.release()  # the first scan ends; the worker takes the next file
        assert small.result(timeout=WAIT_S).title == "Small"
        assert first.result(timeout=WAIT_S).ocr == [1]
        deadline = time.monotonic() + WAIT_S  # a future's callbacks run just after its waiters wake
        while not started_when_read and time.monotonic() < deadline:
            time.sleep(0.01)
        assert started_when_read == [1]  # the second scan had not started when B's page was read
        finish(gate, [second])


def test_a_callers_share_is_its_setting_and_alone_it_keeps_a_worker_free(gate: Gate) -> None:
    with ParsePool(3, limits(gate)) as pool:
        assert pool.share() == 2
        hogs = [pool.submit(scan(), f"scan-{i}.png", caller="ingest:ws1:/srv") for i in range(3)]
        gate.wait_started(2)
        assert pool.submit(*SMALL).result(timeout=WAIT_S).title == "Small"  # the third worker was free
        assert gate.started() == 2 and pool.stats()["queued"] == 1
        finish(gate, hogs)
    assert ParsePool(3, limits(gate, caller_workers=3)).share() == 3
    assert ParsePool(1, limits(gate)).share() == 1


# ----- an upload's OCR budget, and the metrics, through the service -----

@pytest.fixture
def served(tmp_path: Path, gate: Gate):
    stuck = tmp_path / "never-ends"  # OCR that never answers: what stops it is the budget
    stuck.write_text("#!/bin/sh\ncat > /dev/null\nsleep 60\n")
    stuck.chmod(0o755)
    settings = Settings(home=tmp_path / "home", telemetry={"metrics_token": "scrape-secret"},
                        parsing=ParseSettings(workers=1, ocr_command=str(stuck), ocr_seconds=3,
                                              upload_ocr_seconds=0.5))
    try:
        with KnowledgeService(settings) as svc:
            svc.ensure_workspace("default")
            with LiveServer(svc) as server:
                yield svc, server
    finally:
        sandbox.configure_from(Settings(home=tmp_path / "home").parsing)


def test_an_uploads_ocr_stops_at_its_own_budget_a_syncs_at_the_larger_one(served, tmp_path: Path) -> None:
    svc, _ = served
    admin = Principal.local_admin("default")
    with pytest.raises(InvalidArgument) as refused:
        svc.upload_document(admin, "scan.png", scan())
    assert str(refused.value) == ("scan.png: the file is too complex to read within this service's limits "
                                  "(time: more than 0.5 s of OCR)")
    folder = tmp_path / "scans"
    folder.mkdir()
    (folder / "scan.png").write_bytes(scan())
    report = svc.ingest_directory(admin, folder)
    assert [message for _, message in report.failed] == [
        "the file is too complex to read within this service's limits (time: more than 3 s of OCR)"]


def metric(text: str, name: str, **labels: str) -> float:
    return next((s.value for family in text_string_to_metric_families(text) for s in family.samples
                 if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())), 0.0)


def test_metrics_show_the_files_waiting_and_how_long_they_waited(served, gate: Gate) -> None:
    _, server = served

    def scrape() -> str:
        response = httpx.get(f"{server.url}/metrics", headers={"Authorization": "Bearer scrape-secret"})
        assert response.status_code == 200
        return response.text

    before = scrape()
    waited = metric(before, "rag_parse_wait_seconds_count", caller="upload")
    with ParsePool(1, limits(gate)) as pool:
        hog = pool.submit(scan(), "scan.png", caller="upload:ws1:token:a")
        gate.wait_started(1)
        queued = [pool.submit(*SMALL, caller=f"upload:ws{i}:token:b") for i in range(2)]
        during = scrape()
        assert metric(during, "rag_parse_queue_length") == metric(before, "rag_parse_queue_length") + 2
        finish(gate, [hog])
        for future in queued:
            assert future.result(timeout=WAIT_S).title == "Small"
    after = scrape()
    assert metric(after, "rag_parse_queue_length") == metric(before, "rag_parse_queue_length")
    assert metric(after, "rag_parse_wait_seconds_count", caller="upload") == waited + 3
    assert "token" not in "".join(line for line in after.splitlines() if line.startswith("rag_parse"))
