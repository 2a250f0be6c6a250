"""The editor in Firefox: sign in, ask (a streamed answer whose [1] opens the highlighted excerpt),
publish a draft without a reload, and a document's script stays inert. A manual check beside the
Chromium tests (tests/e2e/test_editor_browser.py): Firefox has no WebDriver on Debian's registry, so
this drives Firefox ESR over its own Marionette protocol.

    apt-get install firefox-esr && .venv/bin/pip install marionette_driver
    .venv/bin/python scripts/editor_firefox_check.py http://127.0.0.1:8000 "$RAG_TOKEN" "a question the KB answers"

Screenshots go to test-artefacts/editor-firefox/. Exits 1 on the first check that fails."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
from marionette_driver.by import By
from marionette_driver.marionette import Marionette

SHOTS = Path(__file__).resolve().parents[1] / "test-artefacts" / "editor-firefox"


def wait(condition, what: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            found = condition()
        except Exception:  # noqa: BLE001 - not on the page yet
            found = None
        if found:
            return found
        time.sleep(0.1)
    raise SystemExit(f"FAILED: timed out waiting for {what}")


def check(ok: bool, what: str) -> None:
    print(("ok      " if ok else "FAILED  ") + what)
    if not ok:
        raise SystemExit(1)


def main(url: str, token: str, question: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    firefox = subprocess.Popen(["firefox-esr", "--headless", "--marionette", "--no-remote",
                                "--profile", tempfile.mkdtemp()], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        m = wait(lambda: Marionette(host="127.0.0.1", port=2828, startup_timeout=5), "Firefox's Marionette port")
        m.start_session()
        print(f"{m.session_capabilities['browserName']} {m.session_capabilities['browserVersion']}")
        m.set_window_rect(width=1280, height=1000)

        def shot(name: str) -> None:
            (SHOTS / f"{name}.png").write_bytes(m.screenshot(format="binary"))

        def page(script: str):  # in the page's own window, not Marionette's sandbox
            return m.execute_script(script, sandbox=None)

        m.navigate(url + "/signin")
        m.find_element(By.CSS_SELECTOR, "#token").send_keys(token)
        m.find_element(By.CSS_SELECTOR, "#signin").click()
        wait(lambda: m.get_url().rstrip("/") == url.rstrip("/"), "the home page after signing in")
        check("Sign out" in m.find_element(By.TAG_NAME, "body").text, "signed in with a person's token")
        shot("1-home")

        m.navigate(url + "/ask")
        m.find_element(By.CSS_SELECTOR, "#query").send_keys(question)
        m.find_element(By.CSS_SELECTOR, "#ask").click()
        wait(lambda: m.find_element(By.CSS_SELECTOR, "#answer").get_attribute("data-done"), "the whole answer")
        cites = m.find_elements(By.CSS_SELECTOR, "#answer a.cite")
        check(bool(cites) and cites[0].text == "[1]", "the streamed answer's [1] is a link")
        check(bool(m.find_elements(By.CSS_SELECTOR, "#sources > li")), "sources listed")
        shot("2-answer")
        cites[0].click()
        mark = wait(lambda: m.find_element(By.CSS_SELECTOR, "mark#hl"), "the highlighted excerpt")
        check(bool(mark.text) and "hl=" in m.get_url(), "the citation opens its excerpt, highlighted")
        shot("3-highlighted")

        headers = {"Authorization": f"Bearer {token}"}
        name = f"Firefox check {uuid.uuid4().hex[:8]}"
        made = httpx.post(url + "/v1/documents", headers=headers, timeout=60,
                          json={"name": name, "content": f"# {name}\n\nQuokka rota on Tuesdays.\n"}).json()
        m.navigate(f"{url}/documents/{made['node_id']}")
        page("window.__samePage = true")
        m.find_element(By.CSS_SELECTOR, "#publish-1").click()
        wait(lambda: m.find_element(By.CSS_SELECTOR, '[data-status-of="1"]').text == "published", "published")
        check(page("return window.__samePage") is True, "published without a reload")
        shot("4-published")

        tricky = httpx.post(url + "/v1/documents", headers=headers, timeout=60, json={
            "name": f"Tricky {uuid.uuid4().hex[:8]}",
            "content": "# Tricky\n\nBefore.\n\n<script>window.__pwned = 1</script>\n\n"
                       "<img src=\"x\" onerror=\"window.__pwned = 2\">\n\nAfter.\n"}).json()
        m.navigate(f"{url}/documents/{tricky['node_id']}")
        wait(lambda: "After." in m.find_element(By.TAG_NAME, "body").text, "the tricky document")
        page("window.__probe = 1")
        time.sleep(1)  # an onerror handler would have run by now
        check(page("return window.__probe") == 1 and page("return window.__pwned || null") is None,
              "a document's script and event handler stay inert")
        m.delete_session()
        print(f"screenshots: {SHOTS}")
    finally:
        firefox.kill()


if __name__ == "__main__":
    main(*sys.argv[1:4])
