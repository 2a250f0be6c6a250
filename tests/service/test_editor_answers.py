"""What a person sees of an answer on the editor's ask page, without a browser: the extractive
answer's fenced code block as code (no literal backticks), a `<script>` quoted from a document's code
shown as text, the citations still links, and the cited-excerpt panel rendered like the document.
tests/e2e/test_editor_browser.py checks the same of the streamed answer, drawn by the page's script."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Iterator

import pytest
from fastapi.testclient import TestClient

from rag.service import KnowledgeService, Principal
from rag.settings import Settings
from rag.web.answers import render_answer
from rag.web.markdown import render_excerpt
from tests.support.editor import page_csrf, signed_in

CREDENTIALS = """# Package index credentials

## Adding credentials

To add credentials for a package index, use the `uv auth login` command:

```
uv auth login example.com
echo "<script>window.__pwned = 1</script>" > ~/.netrc
```

The credentials are kept in the system keyring.
"""
QUESTION = "How do I add credentials for a package index?"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    base: Path = tmp_path_factory.mktemp("editor-answers")
    pages = base / "pages"
    pages.mkdir()
    (pages / "credentials.md").write_text(CREDENTIALS)
    (pages / "cafeteria.md").write_text("# Cafeteria\n\nThe cafeteria opens at eight and closes at three.\n")
    with KnowledgeService(Settings(home=base / "home")) as svc:
        svc.ensure_workspace("default")
        assert not svc.ingest_directory(Principal.local_admin("default"), pages).failed
        token = svc.create_token("default", "editor", ["knowledge:write"], None, (), False)[0]
        with signed_in(svc, token) as client:
            yield client


def answer_html(page: str) -> str:
    return re.search(r'<div id="answer" class="answer">(.*?)</div>', page, re.S).group(1)


def test_an_answers_code_block_is_shown_as_code_and_its_citations_as_links(client: TestClient) -> None:
    page = client.post("/ask", data={"query": QUESTION, "csrf": page_csrf(client, "/ask")})
    answer = answer_html(page.text)
    assert "```" not in answer
    code = re.search(r"<pre><code>(.*?)</code></pre>", answer, re.S)
    assert code, answer
    assert html.unescape(code.group(1)).splitlines() == [
        "uv auth login example.com", 'echo "<script>window.__pwned = 1</script>" > ~/.netrc']
    assert "<script" not in answer and "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in answer
    assert re.match(r'<p>To add credentials for a package index, use the <code>uv auth login</code> command '
                    r'<a href="/documents/[^"]+#hl" class="cite">\[1\]</a>:</p><pre>', answer), answer


def test_the_cited_excerpt_is_rendered_with_its_code_as_code(client: TestClient) -> None:
    page = client.post("/ask", data={"query": QUESTION, "csrf": page_csrf(client, "/ask")})
    link = html.unescape(re.search(r'<a href="([^"]+)" class="cite">\[1\]</a>', page.text).group(1))
    document = client.get(link).text
    excerpt = re.search(r'<blockquote id="cited-excerpt">(.*?)</blockquote>', document, re.S).group(1)
    assert "```" not in excerpt and "<pre><code>uv auth login example.com\n" in excerpt
    assert "<script" not in excerpt and "&lt;script&gt;" in excerpt
    assert '<mark id="hl">' in re.search(r'<article class="doc" id="doc-body">(.*?)</article>', document, re.S).group(1)


SOURCES = [{"number": 1, "link": "/documents/a?version=1&hl=0-9#hl"}, {"number": 2, "link": "/documents/b"}]


def test_the_answers_blocks_and_inline_code_with_markers_in_code_kept_as_text() -> None:
    text = ('Run it [1]:\n```toml\nkey = "[1]" <b>\n```\n\nThen `[2]` and [2], not [9].\n'
            "- one [1]\n  more\n- `two`\n\n```\"><img src=x onerror=alert(1)>\nstill open")
    assert render_answer(text, SOURCES) == (
        '<p>Run it <a href="/documents/a?version=1&amp;hl=0-9#hl" class="cite">[1]</a>:</p>'
        '<pre><code class="language-toml">key = &#34;[1]&#34; &lt;b&gt;</code></pre>'
        '<p>Then <code>[2]</code> and <a href="/documents/b" class="cite">[2]</a>, not [9].</p>'
        '<ul><li>one <a href="/documents/a?version=1&amp;hl=0-9#hl" class="cite">[1]</a>\nmore</li>'
        "<li><code>two</code></li></ul>"
        "<pre><code>still open</code></pre>")  # a fence still open (streaming) runs to the end
    assert render_answer("a ``x ` y`` b ` c", []) == "<p>a <code>x ` y</code> b ` c</p>"
    assert render_answer("```x```", []) == "<p><code>x</code></p>"  # a fence's info holds no backtick


def test_an_excerpt_cut_inside_a_code_block_is_still_code() -> None:
    body = "# T\n\nIntro.\n\n```sh\nline one\nline two\n```\n\nAfter.\n"
    inside = render_excerpt(body, (body.index("line two"), len(body)))
    assert '<pre><code class="language-sh">line two\n</code></pre>' in inside and "<p>After.</p>" in inside
    at_close = render_excerpt(body, (body.index("```\n\nAfter"), len(body)))
    assert "<pre>" not in at_close and "<p>After.</p>" in at_close
    assert render_excerpt(body, (0, body.index("line"))) == '<h1>T</h1>\n<p>Intro.</p>\n<pre><code class="language-sh"></code></pre>\n'
