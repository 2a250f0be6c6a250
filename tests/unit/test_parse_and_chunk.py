from __future__ import annotations

from rag.ingest.chunk import Chunker
from rag.ingest.parse import parse_markdown, parse_record, parse_text

from ..support.paths import HANDBOOK


def test_front_matter_becomes_metadata_and_title_heading():
    doc = parse_markdown("---\ntitle: Leave types\nkeywords: a, b\n---\n\nSome text.\n", "leave")
    assert doc.title == "Leave types"
    assert doc.metadata == {"title": "Leave types", "keywords": "a, b"}
    assert doc.body.startswith("# Leave types\n\nSome text.")


def test_template_tags_are_stripped():
    doc = parse_markdown(
        '{% alert %}\nRead [this]({% page "travel/" %}) first.\n{% endalert %}\n{{ site.x }}{# note #}Body', "x"
    )
    assert "{%" not in doc.body and "{{" not in doc.body and "{#" not in doc.body
    assert "Read [this]() first." in doc.body and "Body" in doc.body


def test_title_falls_back_to_first_heading_then_file_name():
    assert parse_markdown("# Real title\n\ntext", "file name").title == "Real title"
    assert parse_markdown("# Real title\n\ntext", "file name").body.count("# Real title") == 1
    assert parse_markdown("just text", "File name").body.startswith("# File name\n")
    assert parse_text("plain", "Notes").body == "# Notes\n\nplain\n"
    assert parse_record("A study", "Abstract.", "42").body == "# A study\n\nAbstract.\n"


def test_bad_front_matter_keeps_the_body_and_warns():
    doc = parse_markdown("---\ntitle: [unclosed\n---\nBody here\n", "fallback")
    assert "Body here" in doc.body and doc.warnings


def test_chunks_point_at_their_exact_span_and_heading_path():
    text = (HANDBOOK / "travel-and-leave/leave.md").read_text()
    doc = parse_markdown(text, "leave")
    chunks = Chunker(chunk_size=256, chunk_overlap=32).chunk(doc.body)
    assert len(chunks) > 10
    for chunk in chunks:
        assert doc.body[chunk.char_start:chunk.char_end] == chunk.text
        assert chunk.heading_path[0] == "Leave types"
    annual = [c for c in chunks if c.heading_path[-1] == "Annual leave"]
    assert annual and "Annual leave accrues" in annual[0].text
    # the indexed text carries the heading path as context, the excerpt does not
    assert annual[0].indexed_text().startswith("Leave types > Types of leave")


def test_chunks_respect_the_size_setting():
    text = (HANDBOOK / "travel-and-leave/leave.md").read_text()
    body = parse_markdown(text, "leave").body
    chunker = Chunker(chunk_size=128, chunk_overlap=16)
    chunks = chunker.chunk(body)
    assert max(chunker.tokens(c.text) for c in chunks) <= 128
    assert len(chunks) > len(Chunker(chunk_size=512, chunk_overlap=32).chunk(body))
