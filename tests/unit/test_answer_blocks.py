"""Code blocks and tables in an extractive answer (rag/synthesize/sentences.py, and
rag/synthesize/extractive/text.py which writes them out), checked as a reader would: a code block is
whole, or visibly cut where a command or a mapping ends, never after a line continued with `\\`; its
language stays on the fence; a table row is shown as a row of its table, under its header, with
its citation counted. No model, no service.
"""

from __future__ import annotations

from markdown_it import MarkdownIt

from rag.retrieve.types import Hit
from rag.synthesize.citations import apply_citations
from rag.synthesize.extractive import Candidate
from rag.synthesize.extractive.text import cited_row, join, with_citation, write
from rag.synthesize.sentences import MAX_ATTACHMENT_CHARS, MAX_ATTACHMENT_LINES, MAX_ROW_CHARS, Sentence, sentences


def lead_in(markdown: str) -> Sentence:
    (found,) = [s for s in sentences(markdown) if s.text.endswith(":")]
    return found


def fenced(attachment: str) -> tuple[str, list[str]]:
    """The opening fence and the lines inside it."""
    lines = attachment.splitlines()
    assert lines[0].startswith("```") and lines[-1] == "```", attachment
    return lines[0], lines[1:-1]


def bounded(code: list[str]) -> bool:
    return len(code) <= MAX_ATTACHMENT_LINES and len("\n".join(code)) <= MAX_ATTACHMENT_CHARS


def block(intro: str, language: str, code: list[str]) -> str:
    return f"## Example\n\n{intro}\n\n```{language}\n" + "\n".join(code) + "\n```\n\nThat is all there is to it.\n"


# ------------------------------------------------------------------------------------ code

RUN = "Run each of the service containers with its own volume and variables:"
DOCKER = [line for i in range(12) for line in (
    f"docker run --detach --name service-{i} \\",
    f"  --volume /srv/data-{i}:/data \\",
    f"  --env SERVICE_ID={i} image:{i}",
)]


def test_a_short_block_is_shown_whole_with_its_language() -> None:
    code = ["[project]", 'name = "demo"', 'version = "0.1.0"', "", "[tool.uv]", "package = false"]
    fence, shown = fenced(lead_in(block("Set the project up in `pyproject.toml` as follows:", "toml", code)).attachment)
    assert fence == "```toml"
    assert shown == code  # whole, blank line included, no marker
    assert not any("…" in line for line in shown)


def test_the_language_is_kept_without_the_fence_attributes() -> None:
    lead = lead_in(block("Create a file called `example.py` with the contents:", 'python title="example.py"',
                         ["print('hi')"]))
    assert fenced(lead.attachment)[0] == "```python"
    lead = lead_in(block("Add the hook to the configuration:", "{ .yaml .annotate }", ["- id: uv-lock"]))
    assert fenced(lead.attachment) == ("```yaml", ["- id: uv-lock"])


def test_a_long_shell_block_is_cut_after_a_whole_command_and_marked() -> None:
    fence, shown = fenced(lead_in(block(RUN, "bash", DOCKER)).attachment)
    assert fence == "```bash"
    assert shown[-1] == "# …"  # a reader sees that more follows
    code = shown[:-1]
    assert code == DOCKER[: len(code)]  # the first lines, as written
    assert not code[-1].endswith("\\")  # not half a command
    # 19 lines would fit, but the 19th continues a command: the cut backs up to the command's end.
    assert len(code) == 18 and len(code) < len(DOCKER)
    assert bounded(shown)


def test_a_shell_line_continued_with_a_pipe_is_not_the_last_either() -> None:
    code = [line for i in range(15) for line in (f"cat input-{i}.txt |", f"  grep pattern-{i} > out-{i}.txt")]
    shown = fenced(lead_in(block(RUN, "sh", code)).attachment)[1]
    assert shown[-1] == "# …" and not shown[-2].endswith("|")


CI = [
    "name: CI",
    "on:",
    "  push:",
    "    branches: [main]",
    "jobs:",
    "  test:",
    "    runs-on: ubuntu-latest",
    "    steps:",
    "      - uses: actions/checkout@v4",
    "      - name: Install uv",
    "        uses: astral-sh/setup-uv@v6",
    "      - run: uv sync --locked",
    "      - run: uv run pytest",
    "permissions:",
    "  contents: read",
    "concurrency:",
    "  group: ci-${{ github.ref }}",
    "  cancel-in-progress: true",
    "env:",
    "  UV_CACHE_DIR: /tmp/.uv-cache",
    "  UV_SYSTEM_PYTHON: 1",
    "defaults:",
    "  run:",
    "    shell: bash",
]


def test_a_long_yaml_block_is_cut_before_a_top_level_key() -> None:
    fence, shown = fenced(lead_in(block("Add the following workflow to `.github/workflows/ci.yml`:", "yaml", CI)).attachment)
    assert fence == "```yaml" and shown[-1] == "# …"
    code = shown[:-1]
    assert code == CI[: len(code)] and len(code) < len(CI)
    assert not CI[len(code)].startswith(" ")  # the next line is a top-level key: no mapping is cut open
    assert not code[-1].endswith(":")  # and the last one shown is no key without its value
    assert bounded(shown)


def test_a_long_toml_block_is_cut_before_a_table() -> None:
    code = ["[project]", 'name = "demo"', "dependencies = [", '  "httpx",', '  "rich",', "]", ""]
    code += [line for i in range(4) for line in ("[[tool.uv.index]]", f'name = "index-{i}"',
                                                  f'url = "https://example.com/{i}/simple"', "")]
    code = code[:-1]
    shown = fenced(lead_in(block("Configure the indexes in `pyproject.toml`:", "toml", code)).attachment)[1]
    assert shown[-1] == "# …"
    kept = shown[:-1]
    assert kept == code[: len(kept)] and kept[-1].strip()
    assert code[len(kept)] == "" or code[len(kept)].startswith("[")  # between tables, not inside one


def test_a_python_block_is_not_cut_inside_an_open_bracket() -> None:
    code = ["import os", ""]
    for i in range(6):
        code += [f"SETTING_{i} = {{", f'    "name": "setting-{i}",', f'    "value": {i},', "}"]
    shown = fenced(lead_in(block("The settings module holds every setting as a dictionary:", "python", code)).attachment)[1]
    assert shown[-1] == "# …"
    assert shown[-2] == "}"  # the last dictionary shown is closed


def test_a_block_is_not_cut_after_a_comment_about_the_next_line() -> None:
    code = []
    for i in range(8):
        code += [f"# Set option {i} for the build", f"ENV OPTION_{i}=value-{i}", f"RUN make step-{i}"]
    shown = fenced(lead_in(block("Update the Dockerfile to set the build options:", "dockerfile", code)).attachment)[1]
    assert shown[-1] == "# …" and not shown[-2].startswith("#")


def test_a_single_line_over_the_bound_is_cut_with_the_marker() -> None:
    line = "uv pip install " + " ".join(f"package-number-{i}" for i in range(120))
    shown = fenced(lead_in(block("Install all of the packages at once with:", "console", [line])).attachment)[1]
    assert len(shown) == 2 and shown[-1] == "# …"
    assert shown[0].endswith(" …") and line.startswith(shown[0].removesuffix(" …"))
    assert bounded(shown)


def test_a_block_without_a_comment_syntax_gets_a_plain_marker() -> None:
    code = [f"line {i} of the output" for i in range(40)]
    shown = fenced(lead_in(block("The command prints something like the following:", "", code)).attachment)[1]
    assert shown[-1] == "…"


def test_a_command_longer_than_the_bounds_is_not_quoted_in_half() -> None:
    code = ["docker run \\"] + [f"  --env VARIABLE_{i}=value-{i} \\" for i in range(30)] + ["  image"]
    found = sentences(block(RUN, "bash", code))
    assert all(not s.text.endswith(":") for s in found)  # the lead-in goes, with nothing to show


def test_a_block_the_excerpt_ends_inside_is_marked_as_cut() -> None:
    found = sentences("## Example\n\nRun the container with its volume mounted:\n\n```bash\n"
                      "docker run \\\n  --volume /data:/data \\\n  image\ndocker run \\\n  --volume")
    shown = fenced(found[0].attachment)[1]
    assert shown == ["docker run \\", "  --volume /data:/data \\", "  image", "# …"]


def test_code_in_a_list_item_is_shown_without_the_item_indent() -> None:
    lead = lead_in("## Steps\n\n1. Install the tool with the command:\n\n    ```console\n    $ uv tool install ruff\n    ```\n")
    assert fenced(lead.attachment)[1] == ["$ uv tool install ruff"]


# ------------------------------------------------------------------------------------ tables

SETTINGS = """\
# Environment

## Cache settings

| Setting | Default | Meaning |
| :------ | :-----: | ------- |
| `UV_CACHE_DIR` | platform cache | The directory uv keeps its cache in |
| `UV_NO_CACHE` | unset | When set, uv reads and writes no cache at all |
| `UV_LINK_MODE` | clone | How packages are linked from the cache: `copy \\| hardlink` |
"""


def hit(body: str) -> Hit:
    return Hit(0, 0.0, ["text"], "env", "kb", "corpus:w:kb:env", "Environment", None, 1, ["Environment"], body, 0, len(body))


def render(markdown: str) -> str:
    return MarkdownIt("commonmark").enable("table").render(markdown)


def test_a_table_row_is_still_one_sentence_for_scoring() -> None:
    found = sentences(SETTINGS)
    assert [s.text for s in found] == [
        "Setting: `UV_CACHE_DIR`; Default: platform cache; Meaning: The directory uv keeps its cache in",
        "Setting: `UV_NO_CACHE`; Default: unset; Meaning: When set, uv reads and writes no cache at all",
        "Setting: `UV_LINK_MODE`; Default: clone; Meaning: How packages are linked from the cache: `copy | hardlink`",
    ]
    assert found[0].table.splitlines() == [
        "| Setting | Default | Meaning |",
        "| :--- | :---: | --- |",  # the columns' alignment kept
        "| `UV_CACHE_DIR` | platform cache | The directory uv keeps its cache in |",
    ]
    assert found[2].table.splitlines()[-1].count(" | ") == 2  # an escaped pipe stays inside its cell


def test_a_chosen_row_is_written_as_a_table_with_its_header_and_citation() -> None:
    (first, *_) = sentences(SETTINGS)
    written = write([Candidate(1, first.text, "env", table=first.table)], [hit(SETTINGS)], "")
    assert written.splitlines() == [
        "| Setting | Default | Meaning |",
        "| :--- | :---: | --- |",
        "| `UV_CACHE_DIR` | platform cache | The directory uv keeps its cache in [1] |",
    ]
    text, sources = apply_citations(written, [hit(SETTINGS)])
    assert len(sources) == 1 and text.endswith("in [1] |")  # the parser reads the citation inside the cell
    html = render(text)
    assert "<th" in html and "<td>The directory uv keeps its cache in [1]</td>" in html


def test_rows_of_one_table_share_its_header_and_prose_stands_apart() -> None:
    found = sentences(SETTINGS)
    chosen = [Candidate(1, found[0].text, "env", table=found[0].table),
              Candidate(1, found[1].text, "env", position=1, table=found[1].table),
              Candidate(1, "The cache can be cleared with `uv cache clean` at any time.", "env", position=5)]
    written = write(chosen, [hit(SETTINGS)], "")
    lines = written.splitlines()
    assert lines[0] == "| Setting | Default | Meaning |" and lines.count("| Setting | Default | Meaning |") == 1
    assert lines[2].startswith("| `UV_CACHE_DIR`") and lines[3].startswith("| `UV_NO_CACHE`")
    assert lines[3].endswith("[1] |")
    assert lines[4:] == ["", "The cache can be cleared with `uv cache clean` at any time [1]."]
    assert render(written).count("<tr>") == 3  # one table: the header and two rows


def test_a_row_shown_with_the_page_it_is_about_keeps_the_table_valid() -> None:
    table = "| A | B |\n| --- | --- |\n| one cell | two cell |"
    written = cited_row(table, 2, "Environment: ")
    assert written.splitlines() == ["Environment:", "", "| A | B |", "| --- | --- |", "| one cell | two cell [2] |"]
    assert "<td>two cell [2]</td>" in render(written)


def test_long_cells_are_clipped_so_each_line_of_the_table_is_bounded() -> None:
    long = " ".join(["word"] * 150)
    (row,) = sentences(f"## T\n\n| Name | Description |\n| --- | --- |\n| `short` | {long} |\n")
    assert len(row.text) <= MAX_ROW_CHARS
    assert all(len(line) <= MAX_ROW_CHARS for line in row.table.splitlines())
    assert row.table.splitlines()[-1].startswith("| `short` | word word") and row.table.endswith("… |")


def test_code_and_lists_are_written_as_before() -> None:
    assert with_citation("Run the command:", 3, "```console\n$ uv lock\n```") == "Run the command [3]:\n```console\n$ uv lock\n```"
    assert join(["First sentence [1].", "Second sentence [1]."]) == "First sentence [1]. Second sentence [1]."
