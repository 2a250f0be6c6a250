"""Documentation markup out of derived and displayed text (issue 14, clean text)."""

from __future__ import annotations

import random

import pytest

from rag.ingest.chunk import Chunker
from rag.ingest.parse import parse_markdown
from rag.retrieve.types import Hit
from rag.synthesize.citations import CLUSTER, GROUP, apply_citations
from rag.synthesize.markup import clean_heading, clean_text, neutral_brackets
from rag.synthesize.prompts import format_excerpts

# --------------------------------------------------------------------------------- clean_heading


@pytest.mark.parametrize(
    "raw, clean",
    [
        ("CORS (Cross-Origin Resource Sharing) { #cors-cross-origin-resource-sharing }", "CORS (Cross-Origin Resource Sharing)"),
        ("Installing uv {#installing}", "Installing uv"),
        ("Settings {: #settings .wide }", "Settings"),
        ('Scripts { #scripts data-search-exclude="true" }', "Scripts"),
        ('<abbr title="JSON Web Tokens">JWT</abbr> tokens', "JWT tokens"),
        ("The `uv tool` interface", "The uv tool interface"),
        ("## is kept? no: **Bold** and _italic_ and ~~old~~", "## is kept? no: Bold and italic and old"),
        ("Transparent x86_64 emulation on aarch64", "Transparent x86_64 emulation on aarch64"),
        ("The `__init__.py` and `[tool.uv]` tables", "The __init__.py and [tool.uv] tables"),
        ("See [the guide](../guide.md#x) and [ref][r]", "See the guide and ref"),
        ("Docs at <https://docs.astral.sh/uv/>", "Docs at https://docs.astral.sh/uv/"),
        ("![badge](https://x/badge.svg) Project", "Project"),
        ("Using <name> &amp; <version>", "Using <name> & <version>"),
        ("  many   spaces\n and lines  ", "many spaces and lines"),
        ("A<br>B", "A B"),
        ("Hidden <!-- note --> title", "Hidden title"),
        ("Escaped \\*star\\*", "Escaped *star*"),
        ("C# and F#", "C# and F#"),
        ("{ #only-anchor }", ""),
        ("Plain title", "Plain title"),
    ],
)
def test_clean_heading(raw: str, clean: str) -> None:
    assert clean_heading(raw) == clean


# ------------------------------------------------------------------------------------ clean_text


def test_clean_text_links_html_and_anchors() -> None:
    text = (
        "# Title { #t }\n"
        "\n"
        "Use [`uv add`](../add.md#x) or see <https://docs.astral.sh/uv/> and [the docs][docs].\n"
        'A <abbr title="JSON Web Tokens">JWT</abbr> is short.<br>Next <!-- hidden --> line.\n'
        "\n"
        "[docs]: https://docs.astral.sh/uv/ \"uv\"\n"
    )
    assert clean_text(text) == (
        "# Title\n"
        "\n"
        "Use `uv add` or see https://docs.astral.sh/uv/ and the docs.\n"
        "A JWT is short. Next line.\n"
    )


def test_clean_text_keeps_code_spans_exactly() -> None:
    text = "Add `[[tool.uv.index]]` then `[tool.uv]` and run `uv python pin` with `--index <name>` or `a[1](b)`."
    assert clean_text(text) == text
    assert clean_text("Set ``a `[x](y)` b`` now") == "Set ``a `[x](y)` b`` now"


def test_clean_text_keeps_fenced_code_exactly() -> None:
    fence = '```toml\n[tool.uv]\n[[tool.uv.index]]\nurl = "https://x" # [docs](u) <br> { #a }\n```'
    text = f"Intro [link](u).\n\n{fence}\n\n~~~\n!!! note\n=== \"x\"\n--8<-- \"f\"\n~~~\nOutro."
    assert clean_text(text) == f"Intro link.\n\n{fence}\n\n~~~\n!!! note\n=== \"x\"\n--8<-- \"f\"\n~~~\nOutro."


def test_clean_text_admonitions() -> None:
    text = (
        "Before.\n"
        "\n"
        "!!! note\n"
        "\n"
        "    uv is fast. Run `uv sync`\n"
        "    to sync.\n"
        "\n"
        '!!! tip "Use scripts"\n'
        "\n"
        "    - one\n"
        "    - two\n"
        "\n"
        "??? warning\n"
        "\n"
        "    ```console\n"
        "    $ uv pip install x\n"
        "    ```\n"
        "\n"
        "After.\n"
    )
    assert clean_text(text) == (
        "Before.\n"
        "\n"
        "Note: uv is fast. Run `uv sync`\n"
        "to sync.\n"
        "\n"
        "Tip: Use scripts\n"
        "\n"
        "- one\n"
        "- two\n"
        "\n"
        "Warning:\n"
        "\n"
        "```console\n"
        "$ uv pip install x\n"
        "```\n"
        "\n"
        "After.\n"
    )


def test_clean_text_content_tabs() -> None:
    text = (
        '=== "macOS and Linux"\n'
        "\n"
        "    Use `curl`:\n"
        "\n"
        "    ```console\n"
        "    $ curl -LsSf https://astral.sh/uv/install.sh | sh\n"
        "    ```\n"
        "\n"
        '=== "Windows"\n'
        "\n"
        "    Use `irm`.\n"
    )
    assert clean_text(text) == (
        "macOS and Linux:\n"
        "\n"
        "Use `curl`:\n"
        "\n"
        "```console\n"
        "$ curl -LsSf https://astral.sh/uv/install.sh | sh\n"
        "```\n"
        "\n"
        "Windows:\n"
        "\n"
        "Use `irm`.\n"
    )


def test_clean_text_drops_snippets_front_matter_and_details_tags() -> None:
    text = (
        "---\ntitle: Features\ndescription: x\n---\n"
        "Intro.\n"
        '--8<-- "docs/reference/.preview-features.md"\n'
        "--8<--\nCONTRIBUTING.md\nREADME.md\n--8<--\n"
        "<details>\n<summary>More</summary>\n"
        "Body with <version> and `<package>`.\n"
        "</details>\n"
        "\n"
        "*[HTML]: Hyper Text Markup Language\n"
        "End."
    )
    # a line of block tags alone is a paragraph break
    assert clean_text(text) == "Intro.\n\nMore\nBody with <version> and `<package>`.\n\nEnd."


def test_clean_text_keeps_placeholders_comparisons_and_citation_like_text() -> None:
    text = "Pass `--upgrade-package <name>`, e.g. <name>==<version>; 1 < 2 > 0. See [2] and [tool.uv]."
    assert clean_text(text) == text
    assert clean_text("") == ""


def test_clean_text_on_the_uv_docs_corpus_keeps_code_and_removes_markup() -> None:
    from pathlib import Path

    pages = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "uv_docs" / "pages"
    files = sorted(pages.rglob("*.md"))
    if not files:
        pytest.skip("uv_docs corpus not available")
    for path in files:
        raw = path.read_text(encoding="utf-8")
        cleaned = clean_text(raw)
        for marker in ("!!! note", '=== "', "--8<--", "<!--", "<abbr", "<details", "](http", "{ #"):
            outside_code = [
                line for line in _prose_lines(cleaned) if marker in line and "`" not in line
            ]
            assert not outside_code, (path, marker, outside_code[:3])
        # Every inline code span of the page survives, byte for byte.
        for span in _code_spans(raw):
            assert span in cleaned, (path, span)


def _prose_lines(text: str) -> list[str]:
    lines, fence = [], False
    for line in text.split("\n"):
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        elif not fence:
            lines.append(line)
    return lines


def _code_spans(text: str) -> list[str]:
    import re

    prose = re.sub(r"<!--.*?-->", "", "\n".join(_prose_lines(text)), flags=re.DOTALL)  # comments go
    return [m.group(0) for m in re.finditer(r"(?<!`)`[^`\n]+`(?!`)", prose)]


# ------------------------------------------------------------------------------ neutral_brackets


def _hit(n: int, title: str, text: str, heading_path: list[str]) -> Hit:
    return Hit(chunk_id=n, score=1.0, retrievers=["text"], node_id=f"n{n}", kb_id="kb", source_id=f"s{n}",
               title=title, source=None, version=1, heading_path=heading_path, text=text,
               char_start=0, char_end=len(text))


@pytest.mark.parametrize(
    "raw, neutral",
    [
        ("See [2].", "See ［2］."),
        ("Refs [1-8], [1, 3], [12–14] and [ 4 ].", "Refs ［1-8］, ［1, 3］, ［12–14］ and ［ 4 ］."),
        ("Adjacent [1][2] [3]", "Adjacent ［1］［2］ ［3］"),
        ("Out of range [0] and odd [1-2-3]", "Out of range ［0］ and odd ［1-2-3］"),
        ("Code `xs[1]` and\n```py\nys[0] = [1, 2][0]\n```", "Code `xs［1］` and\n```py\nys［0］ = ［1, 2］［0］\n```"),
        ("Nested [[1]] and a\n[\n2\n]", "Nested [［1］] and a\n［\n2\n］"),
        ("Arabic-Indic digits [١]", "Arabic-Indic digits ［١］"),
        ("Not numbers: [a] [tool.uv] [[tool.uv.index]] [1:] [0-9a] [^1]", "Not numbers: [a] [tool.uv] [[tool.uv.index]] [1:] [0-9a] [^1]"),
        ("No brackets", "No brackets"),
    ],
)
def test_neutral_brackets(raw: str, neutral: str) -> None:
    assert neutral_brackets(raw) == neutral
    assert neutral_brackets(neutral) == neutral  # idempotent


def test_neutral_brackets_leaves_nothing_the_citation_parser_reads() -> None:
    rng = random.Random(14)
    alphabet = "[]123 ,-–\n`x٣"
    excerpts = [_hit(i, "T", "t", []) for i in range(1, 4)]
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 24)))
        neutral = neutral_brackets(text)
        assert not GROUP.search(neutral)
        assert all(not match.group(2) for match in CLUSTER.finditer(neutral))
        rewritten, sources = apply_citations("Answer " + neutral, excerpts)
        assert sources == []
        assert rewritten == ("Answer " + neutral).strip()


# ------------------------------------------------------------------------------ ingestion, prompts


def test_titles_and_heading_paths_are_clean_but_the_body_is_not() -> None:
    raw = (
        '# <abbr title="JSON Web Tokens">JWT</abbr> tokens\n\n'
        "Intro text about tokens.\n\n"
        "## CORS (Cross-Origin Resource Sharing) { #cors }\n\n"
        + "CORS lets a browser call another origin. " * 3
        + "\n\n### The `uv tool` interface {: #tool .x }\n\n"
        + "Tools are installed in isolated environments. " * 3
        + "\n"
    )
    doc = parse_markdown(raw, "fallback")
    assert doc.title == "JWT tokens"
    assert doc.body.startswith('# <abbr title="JSON Web Tokens">JWT</abbr> tokens\n\nIntro text')
    assert doc.body.count("JWT</abbr> tokens") == 1  # the title heading is not added a second time
    chunks = Chunker(chunk_size=256, chunk_overlap=32, min_section_tokens=1).chunk(doc.body)
    paths = {chunk.heading_path for chunk in chunks}
    assert ("JWT tokens", "CORS (Cross-Origin Resource Sharing)") in paths
    assert ("JWT tokens", "CORS (Cross-Origin Resource Sharing)", "The uv tool interface") in paths
    for chunk in chunks:
        assert doc.body[chunk.char_start:chunk.char_end] == chunk.text
    cors = next(c for c in chunks if c.heading_path[-1] == "CORS (Cross-Origin Resource Sharing)")
    # the chunk opens with its own (raw) heading, so the path is not repeated before it
    assert cors.indexed_text() == "JWT tokens\n\n" + cors.text


def test_front_matter_title_is_cleaned() -> None:
    doc = parse_markdown("---\ntitle: Using `uv` {#using}\n---\n\nText.\n", "fallback")
    assert doc.title == "Using uv"
    assert doc.body.startswith("# Using uv\n\nText.")
    assert parse_markdown("# { #only-anchor }\n\nText.", "File name").title == "File name"


def test_format_excerpts_neutralises_numbers_and_cleans_attributes() -> None:
    hit = _hit(1, '<abbr title="x">JWT</abbr> "tokens"', "As shown in [2], use `xs[1]`. </excerpt> [tool.uv]",
               ["CORS { #cors }", "Setup [1]"])
    prompt = format_excerpts([hit])
    assert prompt.startswith("<excerpt n=\"1\" document=\"JWT 'tokens'\" section=\"CORS > Setup ［1］\">\n")
    assert "As shown in ［2］, use `xs［1］`. ‹/excerpt> [tool.uv]" in prompt
    assert not GROUP.search(prompt.split("\n", 1)[1].rsplit("\n", 1)[0])


def test_placeholders_that_are_also_html_names_stay_unless_used_as_html() -> None:
    assert clean_text("Run `x` with <table> and <path> or <source>.") == "Run `x` with <table> and <path> or <source>."
    assert clean_text('A <code>uv</code> and <source src="a.mp4"> <table><tr><td>cell</td></tr></table>') == "A uv and cell"
    assert clean_heading("Copy <path> to <name>") == "Copy <path> to <name>"


def test_reference_definition_with_its_destination_on_the_next_line_is_dropped() -> None:
    text = (
        "Configure a personal access token.\n\n[PAT]:\n  https://docs.github.com/en/authentication/tokens\n"
        "[repository secret]:\n  https://docs.github.com/en/actions#secrets\n\n## Publishing\n\nNext part.\n"
    )
    assert clean_text(text) == "Configure a personal access token.\n\n## Publishing\n\nNext part.\n"


def test_a_label_and_colon_followed_by_prose_stays() -> None:
    assert clean_text("[Beta]:\nThis feature may change.\n") == "[Beta]:\nThis feature may change.\n"


def test_an_escaped_bracket_before_a_link_goes_with_the_link() -> None:
    assert clean_text("TTS uses many \\[hiring authorities](/hiring-authorities/) available.") == (
        "TTS uses many hiring authorities available."
    )
