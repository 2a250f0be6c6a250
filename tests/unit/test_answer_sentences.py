"""The quotable sentences of an excerpt (rag/synthesize/sentences.py), on small MkDocs-style pages.

Pure functions, no model: each test feeds a few lines of Markdown, like the uv documentation's, and
checks what a user of an extractive answer would see -- the sentence, its heading and what it shows
after it (a code block or a short list).
"""

from __future__ import annotations


import pytest

from rag.synthesize.citations import CLUSTER
from rag.synthesize.extractive.question import question_parts
from rag.synthesize.sentences import MAX_ATTACHMENT_CHARS, MAX_ATTACHMENT_LINES, MAX_LIST_ITEMS, Sentence, sentences


def texts(found: list[Sentence]) -> list[str]:
    return [s.text for s in found]


def by_text(found: list[Sentence], text: str) -> Sentence:
    matches = [s for s in found if s.text == text]
    assert len(matches) == 1, f"{text!r} in {texts(found)}"
    return matches[0]


def code_lines(attachment: str) -> list[str]:
    """The lines inside the fenced block of an attachment (fences and a tab's label left out)."""
    lines = attachment.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("```"))  # with its language
    end = len(lines) - 1 - lines[::-1].index("```")
    assert start < end, attachment
    return lines[start + 1 : end]


# ------------------------------------------------------------------------------------ prose


PINNING = """\
# Python versions

## Pinning a version

uv can pin a Python version for the project. Run `uv python pin` in the project
directory to write a `.python-version` file. See the [Python discovery](../concepts/python.md#discovery)
docs for how the interpreter is found. The <abbr title="command-line interface">CLI</abbr> prints
the <b>pinned</b> version when it starts.
"""


def test_wrapped_paragraph_is_joined_and_split_into_sentences() -> None:
    found = sentences(PINNING)
    assert texts(found) == [
        "uv can pin a Python version for the project.",
        "Run `uv python pin` in the project directory to write a `.python-version` file.",
        "See the Python discovery docs for how the interpreter is found.",
        "The CLI prints the pinned version when it starts.",
    ]
    assert all(s.heading == "Pinning a version" and s.attachment == "" for s in found)


def test_inline_code_keeps_its_backticks() -> None:
    found = sentences(PINNING)
    assert any("`uv python pin`" in s.text for s in found)
    assert any("`.python-version`" in s.text for s in found)


def test_link_target_is_gone_and_its_text_kept() -> None:
    joined = " ".join(texts(sentences(PINNING)))
    assert "Python discovery" in joined
    assert "python.md" not in joined and "#discovery" not in joined and "](" not in joined


def test_html_tags_are_gone_and_their_words_kept() -> None:
    found = sentences(
        "## Stopping\n\nPress <kbd>Ctrl</kbd>+<kbd>C</kbd> to stop the <span class=\"x\">running</span> "
        "server process.\n"
    )
    assert texts(found) == ["Press Ctrl+C to stop the running server process."]


def test_placeholders_in_inline_code_are_not_taken_for_html() -> None:
    found = sentences("## Adding\n\nUse `uv add <package>` to add a dependency to the project.\n")
    assert texts(found) == ["Use `uv add <package>` to add a dependency to the project."]


def test_short_fragments_are_not_sentences() -> None:
    found = sentences("## Notes\n\nYes. It works well. The resolver reads the metadata of every package.\n")
    assert texts(found) == ["The resolver reads the metadata of every package."]


def test_inline_code_is_kept_exactly_with_dunder_and_double_star() -> None:
    found = sentences(
        "## Packages\n\nAdd an `__init__.py` file to make the directory a package. "
        "Pass the options with `**kwargs` to the build hook.\n"
    )
    assert texts(found) == [
        "Add an `__init__.py` file to make the directory a package.",
        "Pass the options with `**kwargs` to the build hook.",
    ]


def test_bold_markers_are_taken_out_of_prose() -> None:
    found = sentences("## Support\n\nThe resolver **never** installs a yanked version of a package.\n")
    assert texts(found) == ["The resolver never installs a yanked version of a package."]


def test_pipes_in_inline_code_do_not_make_a_table() -> None:
    found = sentences(
        "## Installing\n\nTo install, run `curl -LsSf https://astral.sh/uv/install.sh | sh | tee log` in your\n"
        "shell. Then restart the shell so that the new path is picked up.\n"
    )
    assert texts(found) == [
        "To install, run `curl -LsSf https://astral.sh/uv/install.sh | sh | tee log` in your shell.",
        "Then restart the shell so that the new path is picked up.",
    ]


# ------------------------------------------------------------------------ colon lead-ins


LOCKING = """\
## Locking

To lock the project's dependencies, run the following command:

```console
$ uv lock
```

The lock file is written next to the project's `pyproject.toml` file.
"""


def test_lead_in_carries_the_code_block_after_it() -> None:
    found = sentences(LOCKING)
    lead = by_text(found, "To lock the project's dependencies, run the following command:")
    assert lead.attachment == "```console\n$ uv lock\n```"  # whole, its language kept
    assert lead.heading == "Locking"
    # The code itself is no sentence; the prose after it is.
    assert texts(found) == [
        "To lock the project's dependencies, run the following command:",
        "The lock file is written next to the project's `pyproject.toml` file.",
    ]
    assert found[1].attachment == ""


def test_code_attachment_is_bounded_in_lines() -> None:
    lines = [f"$ uv pip install package-{i}" for i in range(1, 31)]
    intro = "Install the packages one at a time with these commands:"
    text = f"## Many\n\n{intro}\n\n```console\n" + "\n".join(lines) + "\n```\n"
    (lead,) = sentences(text)
    assert lead.text == intro
    kept = code_lines(lead.attachment)
    assert len(kept) == MAX_ATTACHMENT_LINES <= 20
    assert kept[:-1] == lines[: MAX_ATTACHMENT_LINES - 1]  # the first lines, in order
    assert kept[-1] == "# …"  # and a line saying that more follows
    assert lead.attachment.startswith("```console\n") and lead.attachment.endswith("\n```")


def test_code_attachment_is_bounded_in_characters() -> None:
    lines = [f"$ uv pip compile {c * 140}" for c in "abcdefghij"]
    intro = "Compile the requirements with the following long commands:"
    text = f"## Long\n\n{intro}\n\n```console\n" + "\n".join(lines) + "\n```\n"
    (lead,) = sentences(text)
    assert lead.text == intro
    kept = code_lines(lead.attachment)
    assert 1 <= len(kept) - 1 < len(lines)
    assert kept[:-1] == lines[: len(kept) - 1] and kept[-1] == "# …"
    assert len("\n".join(kept)) <= MAX_ATTACHMENT_CHARS <= 1000


def test_lead_in_with_nothing_quotable_after_it_is_dropped() -> None:
    found = sentences(
        "## Options\n\nThe resolver reads the options in the following order:\n\n"
        "## Next steps\n\nRead the guide on projects to learn about the workflow.\n"
    )
    assert texts(found) == ["Read the guide on projects to learn about the workflow."]
    assert not any(s.text.endswith(":") for s in found)


def test_lead_in_at_the_end_of_the_excerpt_is_dropped() -> None:
    found = sentences("## Export\n\nThe lock file can be exported to another format. Use the command below:\n")
    assert texts(found) == ["The lock file can be exported to another format."]


FORMATS = """\
## Exporting

uv can export the lock file to the following formats:

- `requirements.txt` files used by pip and other tools
- `pylock.toml` files as described by PEP 751
- **CycloneDX** SBOM documents for supply chain audits

The export is deterministic for a given lock file.
"""


def test_short_list_after_lead_in_is_attached_and_each_item_is_a_sentence() -> None:
    found = sentences(FORMATS)
    lead = by_text(found, "uv can export the lock file to the following formats:")
    assert lead.attachment == (
        "- `requirements.txt` files used by pip and other tools\n"
        "- `pylock.toml` files as described by PEP 751\n"
        "- CycloneDX SBOM documents for supply chain audits"
    )
    assert texts(found) == [
        "uv can export the lock file to the following formats:",
        "`requirements.txt` files used by pip and other tools",
        "`pylock.toml` files as described by PEP 751",
        "CycloneDX SBOM documents for supply chain audits",
        "The export is deterministic for a given lock file.",
    ]
    assert all(s.attachment == "" for s in found[1:])
    assert all(s.heading == "Exporting" for s in found)


def test_numbered_list_is_attached_too() -> None:
    found = sentences(
        "## Strategy\n\nThe resolver supports two resolution strategies:\n\n"
        "1. `--resolution lowest` picks the lowest compatible versions\n"
        "2. `--resolution highest` picks the highest compatible versions\n"
    )
    lead = by_text(found, "The resolver supports two resolution strategies:")
    assert lead.attachment.splitlines() == [
        "- `--resolution lowest` picks the lowest compatible versions",
        "- `--resolution highest` picks the highest compatible versions",
    ]


def test_attached_list_is_bounded_but_every_item_stays_a_sentence() -> None:
    commands = ["add", "remove", "sync", "lock", "run", "tree", "version", "build"]
    items = [f"`uv {c}` is one of the project commands of uv" for c in commands]
    text = "## Commands\n\nThe following commands are available in the project interface:\n\n"
    text += "".join(f"- {i}\n" for i in items)
    found = sentences(text)
    lead = by_text(found, "The following commands are available in the project interface:")
    assert lead.attachment.splitlines() == [f"- {i}" for i in items[:MAX_LIST_ITEMS]]
    assert MAX_LIST_ITEMS <= 6
    assert texts(found)[1:] == items


def test_loose_list_after_lead_in_is_attached_whole() -> None:
    found = sentences(
        "## Formats\n\nuv can export the lock file to the following formats:\n\n"
        "- `requirements.txt` files used by pip and other tools\n\n"
        "- `pylock.toml` files as described by PEP 751\n\n"
        "- CycloneDX SBOM documents for supply chain audits\n"
    )
    lead = by_text(found, "uv can export the lock file to the following formats:")
    assert len(lead.attachment.splitlines()) == 3


# ------------------------------------------------------------------------------ content tabs


INSTALLER = """\
# Installing uv

## Installation methods

### Standalone installer

Install uv with our official standalone installer:

=== "macOS and Linux"

    ```console
    $ curl -LsSf https://astral.sh/uv/install.sh | sh
    ```

=== "Windows"

    ```pwsh-session
    PS> powershell -ExecutionPolicy ByPass -c "irm https://astral.sh/uv/install.ps1 | iex"
    ```
"""


def test_content_tabs_give_one_sentence_per_tab() -> None:
    found = sentences(INSTALLER)
    lead = "Install uv with our official standalone installer:"
    assert texts(found) == [lead, lead]
    mac, windows = found
    assert "macOS and Linux" in mac.heading and "Standalone installer" in mac.heading
    assert "Windows" in windows.heading and "Standalone installer" in windows.heading
    assert mac.attachment.startswith("macOS and Linux")
    assert windows.attachment.startswith("Windows")
    assert code_lines(mac.attachment) == ["$ curl -LsSf https://astral.sh/uv/install.sh | sh"]
    assert code_lines(windows.attachment) == [
        'PS> powershell -ExecutionPolicy ByPass -c "irm https://astral.sh/uv/install.ps1 | iex"'
    ]
    # Each tab's own code only.
    assert "install.ps1" not in mac.attachment and "install.sh" not in windows.attachment


def test_tab_labels_are_not_sentences_of_their_own() -> None:
    found = sentences(INSTALLER)
    assert not any(s.text in ("macOS and Linux:", "Windows:") for s in found)


def test_tab_labels_are_not_sentences_without_a_heading_either() -> None:
    found = sentences(INSTALLER.split("### Standalone installer\n", 1)[1])
    assert texts(found) == ["Install uv with our official standalone installer:"] * 2


def test_short_lead_in_is_not_taken_for_a_tab_label() -> None:
    found = sentences(
        "## Hooks\n\nTo keep a `requirements.txt` file in sync with your `uv.lock` file:\n\n"
        "```yaml\n- id: uv-export\n```\n\nTo compile requirements files:\n\n```yaml\n- id: pip-compile\n```\n"
    )
    keep = [s for s in found if s.text.startswith("To keep")]
    assert [s.attachment for s in keep] == ["```yaml\n- id: uv-export\n```"]


# ---------------------------------------------------------------------- code under a heading


TOOLS = """\
# Tools

Tools are Python packages that provide command-line interfaces.

## Basic usage

```console
$ uvx ruff check
```

## Guide

### Running

```console
$ uv tool run black .
```
"""


def test_code_right_under_a_heading_is_introduced_by_the_heading_path() -> None:
    found = sentences(TOOLS)
    assert texts(found) == [
        "Tools are Python packages that provide command-line interfaces.",
        "Tools > Basic usage:",
        "Guide > Running:",
    ]
    basic, running = found[1], found[2]
    assert basic.heading == "Basic usage" and code_lines(basic.attachment) == ["$ uvx ruff check"]
    assert running.heading == "Running" and code_lines(running.attachment) == ["$ uv tool run black ."]


def test_code_under_a_top_heading_alone() -> None:
    (found,) = sentences("# Version\n\n```console\n$ uv --version\n```\n")
    assert found == Sentence("Version:", "Version", "```console\n$ uv --version\n```")


def test_code_after_prose_without_lead_in_is_not_quoted() -> None:
    found = sentences(
        "## Caching\n\nThe cache is shared by every project on the machine.\n\n```console\n$ uv cache clean\n```\n"
    )
    assert texts(found) == ["The cache is shared by every project on the machine."]
    assert found[0].attachment == ""


# ------------------------------------------------------------------------------------ tables


def test_table_gives_one_sentence_per_body_row() -> None:
    found = sentences(
        "## Platform support\n\n"
        "| Platform | Tier | Notes |\n"
        "| -------- | :--: | ----- |\n"
        "| Linux x86_64 | Tier 1 | Fully tested in CI |\n"
        "| macOS arm64 | Tier 1 | Apple Silicon |\n"
    )
    assert texts(found) == [
        "Platform: Linux x86_64; Tier: Tier 1; Notes: Fully tested in CI",
        "Platform: macOS arm64; Tier: Tier 1; Notes: Apple Silicon",
    ]
    assert all(s.heading == "Platform support" and s.attachment == "" for s in found)


def test_empty_cells_are_left_out_of_a_row() -> None:
    found = sentences(
        "## Settings\n\n| Setting | Default | Notes |\n| --- | --- | --- |\n| `cache-dir` | | Where the cache lives |\n"
    )
    assert texts(found) == ["Setting: `cache-dir`; Notes: Where the cache lives"]


# -------------------------------------------------------------------------- bracketed numbers


BRACKETS = """\
## Step [2] of the guide

The resolver follows PEP 440 [2] and the markers of PEP 508 [1-8] when it reads metadata.
See the references [1], [3, 4] and [5–6] for all the details of the specification.

Index the arrays with the following expression:

```python
value = xs[1] + ys[2]
```

- The first element is `xs[0]` in Python code [7]
"""


def test_bracketed_numbers_are_neutralised() -> None:
    found = sentences(BRACKETS)
    assert len(found) >= 4
    for s in found:
        for part in (s.text, s.attachment, s.heading):
            assert CLUSTER.search(part) is None, part
            assert "[2]" not in part and "[1-8]" not in part
    # The numbers stay, readable.
    assert found[0].text == (
        "The resolver follows PEP 440 ［2］ and the markers of PEP 508 ［1-8］ when it reads metadata."
    )
    lead = by_text(found, "Index the arrays with the following expression:")
    assert code_lines(lead.attachment) == ["value = xs［1］ + ys［2］"]


# ----------------------------------------------------------------------------------- headings


def test_heading_is_the_last_heading_above() -> None:
    found = sentences(
        "Intro text of the excerpt is written before any heading.\n\n"
        "# Projects { #projects }\n\nA project is a directory with a `pyproject.toml` file.\n\n"
        "## Scripts\n\nA script is a single Python file with inline metadata.\n\n"
        "### Running\n\nRun a script with the run command of uv.\n\n"
        "## Caching\n\nThe cache is shared by every project on the machine.\n"
    )
    assert [(s.text, s.heading) for s in found] == [
        ("Intro text of the excerpt is written before any heading.", ""),
        ("A project is a directory with a `pyproject.toml` file.", "Projects"),
        ("A script is a single Python file with inline metadata.", "Scripts"),
        ("Run a script with the run command of uv.", "Running"),
        ("The cache is shared by every project on the machine.", "Caching"),
    ]


def test_heading_inside_code_is_not_a_heading() -> None:
    found = sentences(
        "## Scripts\n\nDeclare the dependencies of a script like this:\n\n"
        "```python\n# /// script\n# dependencies = [\"requests\"]\n# ///\n```\n\n"
        "The metadata block must be at the top of the file.\n"
    )
    assert [s.heading for s in found] == ["Scripts", "Scripts"]
    assert code_lines(found[0].attachment)[0] == "# /// script"


def test_empty_text() -> None:
    assert sentences("") == []
    assert sentences("# Only a heading\n") == []


# ------------------------------------------------------------------------------ question parts


@pytest.mark.parametrize(
    "question, parts",
    [
        ("How do I pin a Python version for my project?", ["How do I pin a Python version for my project?"]),
        # a sentence that only sets the scene goes with the question after it
        ("I have an old requirements.txt. How do I pull those dependencies into my new uv project?",
         ["I have an old requirements.txt. How do I pull those dependencies into my new uv project?"]),
        # a clause that asks something else is a part of its own; a short one joins the part before
        ("I want uv to ignore releases less than a week old. How do I set that up, and what do I change in "
         "Dependabot so it stops opening pull requests?",
         ["I want uv to ignore releases less than a week old. How do I set that up",
          "what do I change in Dependabot so it stops opening pull requests?"]),
        ("How do I turn my uv.lock into a requirements.txt and then install it into another virtualenv?",
         ["How do I turn my uv.lock into a requirements.txt", "install it into another virtualenv?"]),
        # initials and abbreviations do not end a sentence; a lone question word does not make a part
        ("Are both Elko Regional Airport and Gerald R. Ford International Airport located in Michigan?",
         ["Are both Elko Regional Airport and Gerald R. Ford International Airport located in Michigan?"]),
        ("When and where is this year's holiday party?", ["When and where is this year's holiday party?"]),
    ],
)
def test_question_parts(question: str, parts: list[str]) -> None:
    assert question_parts(question) == parts


# ------------------------------------------------------------------------------------ lead-ins without a colon


def test_lead_in_without_its_colon_carries_the_code_after_it() -> None:
    found = sentences(
        "## Using a shebang\n\nA shebang can be added to make a script executable without using `uv run`.\n\n"
        "For example, create a file called `greet` with the following contents\n\n"
        "```python title=\"greet\"\n#!/usr/bin/env -S uv run --script\n\nprint(\"Hello, world!\")\n```\n"
    )
    lead = by_text(found, "For example, create a file called `greet` with the following contents:")
    assert lead.attachment.startswith("```python\n")  # the language, not the title
    assert code_lines(lead.attachment) == ["#!/usr/bin/env -S uv run --script", "", 'print("Hello, world!")']


def test_a_setting_line_before_code_is_not_a_lead_in() -> None:
    # An excerpt cut inside a code block: its tail reads as text, its closing fence as an opening one.
    found = sentences('url = "https://download.pytorch.org/whl/cu130"\nexplicit = true\n```\n\n'
                      "Similarly, the following configuration uses the AMD builds on Linux.\n")
    assert all(s.attachment == "" for s in found)


def test_a_finished_sentence_before_code_is_not_a_lead_in() -> None:
    found = sentences("## Caching\n\nThe cache is shared by every project.\n\n```console\n$ uv cache clean\n```\n")
    assert [s.attachment for s in found] == [""]


def test_an_excerpt_cut_inside_a_code_block_does_not_read_the_code_as_prose() -> None:
    found = sentences(
        '[[tool.uv.index]]\nname = "pytorch-cu130"\nurl = "https://download.pytorch.org/whl/cu130"\n'
        "explicit = true\n```\n\nSimilarly, the following configuration would use the AMD builds on Linux:\n\n"
        "```toml\n[project]\nname = \"project\"\n```\n"
    )
    assert texts(found) == ["Similarly, the following configuration would use the AMD builds on Linux:"]
    assert code_lines(found[0].attachment) == ["[project]", 'name = "project"']


def test_a_sentence_starts_where_bold_opens_not_where_it_closes() -> None:
    found = sentences(
        "These steps also apply to employees who remain in other GSA offices.\n"
        "**Begin this process at least two weeks before your last day of work.**\n"
        "Your last day at TTS cannot be a federal holiday.\n"
        "- **Change the phone's passcode.** It must be longer than 14 characters.\n"
    )
    assert texts(found) == [
        "These steps also apply to employees who remain in other GSA offices.",
        "Begin this process at least two weeks before your last day of work. "
        "Your last day at TTS cannot be a federal holiday.",
        "Change the phone's passcode. It must be longer than 14 characters.",
    ]


def test_an_attached_list_item_keeps_its_wrapped_lines() -> None:
    (lead, *_) = sentences(
        "If you receive a suspicious email, follow these steps:\n\n- Do not click any links in the email.\n"
        "- Follow the [Cofense Report](https://example.gov/video) video on the Phishing\n  Emails and Scams page.\n"
    )
    assert lead.attachment.splitlines() == [
        "- Do not click any links in the email.",
        "- Follow the Cofense Report video on the Phishing Emails and Scams page.",
    ]


def test_an_excerpt_that_begins_inside_a_link_or_code_span_drops_that_tail() -> None:
    # Chunks overlap and the splitter may cut after a period inside a URL or a file name: the
    # excerpt then starts with the end of a sentence that began in the excerpt before.
    cut_in_link = sentences(
        "md#using-the-python-version-file-input)\noption to use the pinned version for the project:\n\n"
        "```yaml\nsteps:\n  - uses: actions/setup-python@v5\n```\n\n"
        "The action then installs the version the file names for every job.\n"
    )
    assert texts(cut_in_link) == ["The action then installs the version the file names for every job."]
    cut_in_code_span = sentences(
        "toml` file to ignore the pin and use the newest version. Set the variable in the workflow instead.\n"
    )
    assert texts(cut_in_code_span) == ["Set the variable in the workflow instead."]
    # A sentence that begins with a name written in lower case is a whole sentence.
    whole = sentences("uv run executes the command in the project environment. It syncs the lockfile first.\n")
    assert texts(whole) == ["uv run executes the command in the project environment.", "It syncs the lockfile first."]
