"""The knowledge base editor end to end, in headless Chromium (the Debian packages `chromium` and
`chromium-driver`, driven by Selenium): one browser and one served app for the module, as issue 17's
"How to check" lists it. A screenshot of each step is kept under test-artefacts/editor/ (the path is
printed at the end); three of them are in the README (docs/editor-*.png).

Without the browser the module skips, except under CI=1, where it fails: CI installs it
(scripts/install.sh --test)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx
import pytest

from rag.service import KnowledgeService, Principal
from rag.settings import Settings
from rag.synthesize.declines import REASONS, describe

from ..support.api_support import LEAVE_QUESTION, LiveServer, build_home
from ..support.browser import browser_or_skip
from ..support.editor import sync_linked_pages
from ..support.mcp_support import http_session, run

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "test-artefacts" / "editor"
WAIT_S = 60
INERT = ("# Tricky page\n\nBefore the script.\n\n<script>window.__pwned = 1</script>\n\n"
         "<img src=\"x\" onerror=\"window.__pwned = 2\">\n\n[a link](javascript:window.__pwned=3)\n\nAfter the script.\n")
# An answer to CODE_QUESTION quotes this page's code block: the page shows it as code, its script as text.
CODE_PAGE = ("# Package index credentials\n\n## Adding credentials\n\nTo add credentials for a package index, use "
             "the `uv auth login` command:\n\n```\nuv auth login example.com\n"
             "echo \"<script>window.__pwned = 5</script>\" > ~/.netrc\n```\n\n"
             "The credentials are kept in the system keyring.\n")
CODE_QUESTION = "How do I add credentials for a package index?"


class Site:
    def __init__(self, url: str, svc: KnowledgeService, driver: Any) -> None:
        self.url, self.svc, self.driver = url, svc, driver
        self.tokens: dict[str, str] = {}
        self.cafeteria = Path()
        self.ids: dict[str, str] = {}
        self.step = 0

    # ----- the browser -----

    def wait(self, condition: Callable[[Any], Any], what: str) -> Any:
        """Poll `condition(driver)` until it is truthy, for at most WAIT_S."""
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                found = condition(self.driver)
            except Exception:  # noqa: BLE001 - an element not there yet, or replaced meanwhile
                found = None
            if found:
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; the page says: {self.text()[:500]}")
            time.sleep(0.05)

    def css(self, selector: str) -> Any:
        from selenium.webdriver.common.by import By

        return self.wait(lambda d: d.find_element(By.CSS_SELECTOR, selector), selector)

    def all(self, selector: str) -> list[Any]:
        from selenium.webdriver.common.by import By

        return self.driver.find_elements(By.CSS_SELECTOR, selector)

    def link(self, text: str) -> Any:
        from selenium.webdriver.common.by import By

        return self.wait(lambda d: d.find_element(By.LINK_TEXT, text), f"a link {text!r}")

    def text(self) -> str:
        try:
            return self.driver.find_element("tag name", "body").text
        except Exception:  # noqa: BLE001
            return ""

    def open(self, path: str) -> None:
        self.driver.get(self.url + path)

    def shot(self, name: str) -> Path:
        self.step += 1
        path = SHOTS / f"{self.step:02d}-{name}.png"
        self.driver.save_screenshot(str(path))
        return path

    def sign_in(self, who: str) -> None:
        self.driver.delete_all_cookies()
        self.open("/signin")
        self.css("#token").send_keys(self.tokens[who])
        self.css("#signin").click()
        self.wait(lambda d: d.current_url.rstrip("/") == self.url, f"the home page after {who} signs in")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Site]:
    driver = browser_or_skip()
    root = tmp_path_factory.mktemp("editor")
    pages = build_home(root)
    if SHOTS.exists():
        shutil.rmtree(SHOTS)
    SHOTS.mkdir(parents=True)
    try:
        with KnowledgeService(Settings(home=root / "home")) as svc:
            svc.ensure_workspace("default")
            admin = Principal.local_admin("default")
            assert not svc.ingest_directory(admin, pages).failed
            assert not svc.ingest_directory(admin, root / "cafeteria", kb_name="cafeteria").failed
            kb = svc.knowledge_base(admin, "default")
            inert = svc.create_document(admin, kb.root_id, "Tricky page", INERT)
            svc.publish_version(admin, inert.node_id, 1)
            code = svc.create_document(admin, kb.root_id, "Package index credentials", CODE_PAGE)
            svc.publish_version(admin, code.node_id, 1)
            with LiveServer(svc) as server:
                site = Site(server.url, svc, driver)
                site.cafeteria = root / "cafeteria"

                def token(role: str, **kw: Any) -> str:
                    return svc.create_token("default", role, ["knowledge:write"], kw.get("access"),
                                            kw.get("folders", ()), kw.get("agent", False))[0]

                site.tokens = {"admin": token("admin"), "editor": token("editor"),
                               "scoped": token("editor", folders=("travel-and-leave",)),
                               "agent": token("editor", agent=True, access="all")}
                folder = next(n for n in svc.search_nodes_by_name(admin, "travel-and-leave", 100)
                              if n.name == "travel-and-leave")
                leave = next(n for n in svc.list_children(admin, folder.node_id) if n.kind == "document")
                site.ids = {"folder": folder.node_id, "leave": leave.node_id, "leave_name": leave.name,
                            "inert": inert.node_id}
                yield site
                svc.wait_for_publishing(120)
    finally:
        driver.quit()
        capture = request.config.pluginmanager.get_plugin("capturemanager")
        with capture.global_and_fixture_disabled():  # on the terminal although output is captured: CI's log shows it
            print(f"\nscreenshots of the editor's steps: {SHOTS}")


def test_sign_in_with_a_persons_token_only(site: Site) -> None:
    site.driver.delete_all_cookies()
    site.open("/")
    site.wait(lambda d: d.current_url.endswith("/signin"), "the sign-in page")
    site.css("#token").send_keys(site.tokens["agent"])
    site.css("#signin").click()
    assert "the editor is for people" in site.css("#signin-error").text
    site.shot("signin-refuses-an-agent")
    site.sign_in("editor")
    assert site.css("#workspace").text == "default" and site.css("#role").text == "editor"
    assert {"default", "cafeteria"} <= {li.text.split(" · ")[0] for li in site.all("#kbs li")}
    cookie = site.driver.get_cookie("rag_session")
    assert cookie["httpOnly"] is True and cookie["sameSite"] == "Strict"
    assert "rag_session" not in site.driver.execute_script("return document.cookie")
    assert site.tokens["editor"] not in site.driver.page_source
    site.shot("home")


def test_browse_the_tree_to_a_rendered_document(site: Site) -> None:
    site.open("/")
    site.link("📁 travel-and-leave").click()
    assert site.css("#node-name").text == "travel-and-leave"
    site.link(site.ids["leave_name"]).click()
    assert site.css("#doc-body h1").text  # rendered Markdown, not source
    statuses = [cell.text for cell in site.all("[data-status-of]")]
    assert statuses == ["published"]
    assert "ingested" in site.css("#versions tbody").text
    site.shot("document")


def test_an_agents_draft_is_reviewed_compared_and_published(site: Site) -> None:
    before = site.svc.get_document_version(Principal.local_admin("default"), site.ids["leave"], 1).content
    content = before + "\n\n## Zorbleflax days\n\nEvery employee earns two zorbleflax days a year.\n"

    async def write() -> None:
        async with http_session(f"{site.url}/mcp", site.tokens["agent"]) as mcp:
            made = await mcp.ok("update_document", {"node_id": site.ids["leave"], "content": content})
            assert made["version_number"] == 2

    run(write)
    site.sign_in("editor")
    site.open("/drafts")
    first = site.css("#drafts tbody tr")
    assert first.get_attribute("data-node") == site.ids["leave"]  # newest first
    assert "agent" in first.find_element("css selector", ".badge.agent").text
    site.shot("drafts-awaiting-review")
    first.find_element("link text", "compare with published").click()
    added = site.wait(lambda d: [e.text for e in d.find_elements("css selector", "#diff ins")], "added lines")
    assert "+Every employee earns two zorbleflax days a year." in added
    site.shot("compare-draft-with-published")
    site.open(f"/documents/{site.ids['leave']}")
    site.driver.execute_script("window.__samePage = true")
    site.css("#publish-2").click()
    site.wait(lambda d: d.find_element("css selector", '[data-status-of="2"]').text == "published", "published")
    assert site.driver.execute_script("return window.__samePage") is True  # no reload
    assert site.css('[data-status-of="1"]').text == "archived"
    assert not site.css("#publish-2").is_displayed()  # a published version has nothing to publish
    site.shot("published-without-reload")
    found = httpx.post(f"{site.url}/v1/search", json={"query": "zorbleflax days", "limit": 3}, timeout=60,
                       headers={"Authorization": f"Bearer {site.tokens['editor']}"}).json()
    assert "zorbleflax" in found["results"][0]["excerpt"]


def test_rollback_is_refused_for_an_editor_and_done_for_an_admin(site: Site) -> None:
    site.sign_in("editor")
    site.open(f"/documents/{site.ids['leave']}")
    site.css("#rollback-1").click()
    message = site.wait(lambda d: d.find_element("css selector", "#publish-message").text, "the refusal")
    assert message == "this needs the admin role"
    site.shot("rollback-refused-for-an-editor")
    site.sign_in("admin")
    site.open(f"/documents/{site.ids['leave']}")
    site.css("#rollback-1").click()
    site.wait(lambda d: d.find_element("css selector", '[data-status-of="1"]').text == "published", "rolled back")
    assert site.css('[data-status-of="2"]').text == "archived"
    site.shot("rollback-by-an-admin")


def test_a_folder_scoped_person_sees_only_their_folders(site: Site) -> None:
    site.sign_in("scoped")
    tree = site.css("#tree").text
    assert "travel-and-leave" in tree and "tools" not in tree and "Tricky page" not in tree
    assert [li.text.split(" · ")[0] for li in site.all("#kbs li")] == ["default"]
    site.shot("folder-scoped-home")
    site.open(f"/documents/{site.ids['inert']}")  # outside its folder: as if it did not exist
    assert site.css("#refusal").text == "not found"


def test_an_answers_citation_opens_the_highlighted_excerpt(site: Site) -> None:
    site.sign_in("editor")
    site.open("/ask")
    site.css("#query").send_keys(LEAVE_QUESTION)
    site.css("#ask").click()
    site.wait(lambda d: d.find_element("css selector", "#answer").get_attribute("data-done"), "the whole answer")
    cites = site.all("#answer a.cite")
    assert cites and cites[0].text == "[1]"
    sources = site.all("#sources > li")
    assert sources and "score" in sources[0].text and ("vector" in sources[0].text or "text" in sources[0].text)
    site.shot("answer-with-citations")
    cites[0].click()
    mark = site.css("mark#hl")
    assert "hl=" in site.driver.current_url
    excerpt = site.css("#cited-excerpt").text
    assert mark.text and " ".join(mark.text.split())[:20] in " ".join(excerpt.split())
    site.shot("cited-excerpt-highlighted")
    site.open("/ask")
    site.css("#query").send_keys("What is the capital of Mongolia?")
    site.css("#ask").click()
    site.wait(lambda d: d.find_element("css selector", "#answer").get_attribute("data-done"), "the declined answer")
    assert site.css("#declined").is_displayed() and not site.all("#sources > li")
    # The reason is said in words (rag/synthesize/declines.py), not only that it declined.
    assert site.css("#declined-reason").text in {describe(r) for r in REASONS}


def test_a_streamed_answers_code_block_is_code_and_its_excerpt_rendered(site: Site) -> None:
    site.sign_in("editor")
    site.open("/ask")
    site.css("#query").send_keys(CODE_QUESTION)
    site.css("#ask").click()
    site.wait(lambda d: d.find_element("css selector", "#answer").get_attribute("data-done"), "the whole answer")
    answer = site.css("#answer")
    code = site.css("#answer pre > code")
    assert code.text.splitlines() == ["uv auth login example.com", 'echo "<script>window.__pwned = 5</script>" > ~/.netrc']
    assert "```" not in answer.text and site.css("#answer p > code").text == "uv auth login"
    assert [a.text for a in site.all("#answer a.cite")] == ["[1]"]
    assert not site.all("#answer script") and site.driver.execute_script("return window.__pwned === undefined")
    # The script draws what the server draws for the page without script (rag/web/answers.py).
    cookies = {"rag_session": site.driver.get_cookie("rag_session")["value"]}
    form = httpx.get(f"{site.url}/ask", cookies=cookies).text
    csrf = form.split('name="csrf-token" content="', 1)[1].split('"', 1)[0]
    page = httpx.post(f"{site.url}/ask", data={"query": CODE_QUESTION, "csrf": csrf}, cookies=cookies, timeout=60).text
    served = page.split('<div id="answer" class="answer">', 1)[1].split("</div>", 1)[0]
    drawn = answer.get_attribute("innerHTML")
    assert "<pre><code>" in served and drawn == site.driver.execute_script(
        "const t = document.createElement('template'); t.innerHTML = arguments[0]; return t.innerHTML;", served)
    site.shot("answer-with-code")
    site.all("#answer a.cite")[0].click()
    excerpt = site.css("#cited-excerpt")
    assert "```" not in excerpt.text
    assert "uv auth login example.com" in excerpt.find_element("css selector", "pre > code").text
    assert site.css("mark#hl").text
    site.shot("cited-excerpt-with-code")


def test_a_document_holding_a_script_renders_inert(site: Site) -> None:
    site.sign_in("editor")
    site.open(f"/documents/{site.ids['inert']}")
    body = site.css("#doc-body")
    assert "<script>window.__pwned = 1</script>" in body.text  # shown as text
    assert not body.find_elements("css selector", "script, img[onerror], a[href^='javascript']")
    assert "[a link](javascript:window.__pwned=3)" in body.text  # no link is made of a javascript: URL
    assert site.driver.execute_script("return window.__pwned === undefined")
    page = httpx.get(f"{site.url}/documents/{site.ids['inert']}",
                     cookies={"rag_session": site.driver.get_cookie("rag_session")["value"]})
    assert "script-src 'self'" in page.headers["content-security-policy"]
    site.shot("script-renders-inert")


def test_a_write_without_the_csrf_token_is_refused(site: Site) -> None:
    site.sign_in("editor")
    site.open(f"/folders/{site.ids['folder']}")
    site.driver.execute_script(
        "const f = document.querySelector('form[action$=\"/rename\"]'); f.querySelector('[name=csrf]').remove();"
        "f.closest('details').open = true; f.querySelector('[name=name]').value = 'Hijacked';")
    site.css("#rename").click()
    assert "CSRF token is missing or wrong" in site.css("#refusal").text
    site.shot("write-without-csrf-refused")
    assert site.svc.node_info(Principal.local_admin("default"), site.ids["folder"]).name == "travel-and-leave"


def test_usable_by_keyboard_and_at_320_pixels(site: Site) -> None:
    from selenium.webdriver.common.keys import Keys

    site.sign_in("editor")
    site.open(f"/documents/{site.ids['leave']}")
    site.css("body").send_keys(Keys.TAB)
    assert site.driver.execute_script("return document.activeElement.textContent") == "Skip to content"
    site.driver.switch_to.active_element.send_keys(Keys.ENTER)
    site.wait(lambda d: d.current_url.endswith("#main"), "the skip link followed")
    site.driver.set_window_size(320, 900)
    try:
        site.open(f"/documents/{site.ids['leave']}")
        site.css("#doc-body")
        width = site.driver.execute_script("return document.documentElement.scrollWidth")
        assert width <= site.driver.execute_script("return window.innerWidth"), width
        site.shot("document-at-320px")
    finally:
        site.driver.set_window_size(1280, 1000)


def test_sources_page_syncs_now_and_answers_link_to_their_originals(site: Site) -> None:
    """Last in the module: it adds the knowledge base `mirror`, which the tests above do not expect."""
    from selenium.webdriver.support.ui import Select

    admin = Principal.local_admin("default")
    site.svc.add_source(admin, "cafeteria-copy", "folder", {"path": str(site.cafeteria)}, kb_name="mirror")
    sync_linked_pages(site.svc, "mirror", {
        "gym": ("https://intranet.example.org/gym?floor=2&wing=b", "# Gym hours\n\nThe staff gym on the second "
                "floor opens at six in the morning.\n"),
        "trap": ("javascript:window.__pwned=4", "# Bike shed\n\nThe bike shed behind building C locks at ten at "
                 "night.\n"),
    })
    site.sign_in("admin")
    site.link("Sources").click()
    site.css("#sync-cafeteria-copy").click()
    assert site.css(".flash.ok").text.startswith("syncing cafeteria-copy")

    def synced(driver: Any) -> bool:
        driver.get(site.url + "/sources")
        return "ok ·" in driver.find_element("css selector", '[data-source="cafeteria-copy"]').text
    site.wait(synced, "the sync started with Sync now to end ok")
    assert site.css('[data-status-of="cafeteria-copy"]').text == "idle"
    site.shot("sources-after-sync-now")

    def ask(question: str) -> None:
        site.open("/ask")
        Select(site.css("#ask-kb")).select_by_visible_text("mirror")
        site.css("#query").send_keys(question)
        site.css("#ask").click()
        site.wait(lambda d: d.find_element("css selector", "#answer").get_attribute("data-done"), question)

    ask("When does the staff gym open?")  # streamed: the script draws the sources
    link = site.css("#sources a.original")
    assert link.get_attribute("href") == "https://intranet.example.org/gym?floor=2&wing=b"
    assert link.get_attribute("rel") == "noopener noreferrer"
    site.shot("answer-source-links-to-its-original")
    ask("When does the bike shed lock?")
    assert "javascript:window.__pwned=4" in site.css("#sources span.original").text
    assert not site.all("#sources a.original, a[href^='javascript']")
