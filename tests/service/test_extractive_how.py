"""A how-to answer quotes the sentence that says how beside the one that says what happens
(rag/synthesize/extractive/steps.py, `with_neighbours`): on the uv documentation, "If the lockfile is not
up-to-date, uv will raise an error" was quoted without the `--locked` option the paragraph before
it shows. By hand (the real sentence reader, no model), and once through `rag ask`'s pipeline."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rag.retrieve.types import Hit
from rag.service import KnowledgeService, Principal
from rag.settings import Settings
from rag.synthesize.extractive import Candidate
from rag.synthesize.extractive.question import Question
from rag.synthesize.extractive.steps import find_sentences, select, with_neighbours

HOW = Question("How do I keep the lockfile as it is?", howto=True)


def with_how(chosen: list[Candidate], found: list[Candidate]) -> list[Candidate]:
    return with_neighbours(chosen, found, HOW)

SYNC = """\
# Locking and syncing

## Automatic lock and sync

Locking and syncing are _automatic_ in uv. For example, when `uv run` is used, the project is locked
and synced before invoking the requested command. This ensures the project environment is always
up-to-date.

To disable automatic locking, use the `--locked` option:

```console
$ uv run --locked ...
```

If the lockfile is not up-to-date, uv will raise an error instead of updating the lockfile.

To use the lockfile without checking if it is up-to-date, use the `--frozen` option:

```console
$ uv run --frozen ...
```

## Checking the lockfile

When considering if the lockfile is up-to-date, uv checks that it matches the project metadata.
Tools that read the lockfile see the same versions on every machine.
"""


def pool(text: str = SYNC) -> list[Candidate]:
    hit = Hit(0, 0.0, ["text"], "sync", "kb", "corpus:w:kb:sync", "Locking and syncing", None, 1,
              ["Locking and syncing"], text, 0, len(text))
    return find_sentences([hit])


def one(found: list[Candidate], start: str) -> Candidate:
    (match,) = [c for c in found if c.text.startswith(start)]
    return match


def test_what_happens_is_joined_by_the_code_before_it() -> None:
    found = pool()
    error = one(found, "If the lockfile is not up-to-date")
    chosen = with_how([error], found)
    assert [c.text for c in chosen] == [error.text, "To disable automatic locking, use the `--locked` option:"]
    assert "uv run --locked" in chosen[1].attachment


def test_a_sentence_that_says_how_is_left_alone() -> None:
    found = pool()
    frozen = one(found, "To use the lockfile without checking")
    assert with_how([frozen], found) == [frozen]


def test_no_neighbour_that_says_how_adds_nothing() -> None:
    found = pool()
    metadata = one(found, "When considering if the lockfile")
    assert with_how([metadata], found) == [metadata]


def test_a_neighbour_under_another_heading_is_not_taken() -> None:
    found = pool(SYNC.replace("If the lockfile is not", "## Errors\n\nIf the lockfile is not"))
    error = one(found, "If the lockfile is not up-to-date")
    texts = [c.text for c in with_how([error], found)]
    # The code before it is under the other heading; the option after it, under its own, is taken.
    assert not any("--locked" in text for text in texts)
    assert texts[:1] == [error.text] and all("--frozen" in text for text in texts[1:])


def test_the_asked_answer_shows_the_option(tmp_path: Path) -> None:
    pages = tmp_path / "pages"
    pages.mkdir()
    (pages / "sync.md").write_text(SYNC)
    (pages / "cache.md").write_text("# Caching\n\nuv keeps a cache of downloaded wheels so installs are fast.\n")
    with KnowledgeService(Settings(home=tmp_path / "home")) as svc:
        svc.ensure_workspace("default")
        admin = Principal.local_admin("default")
        svc.ingest_directory(admin, pages)
        answer = svc.ask(admin, "How do I make CI fail when uv.lock is out of date instead of having uv update it?")
    assert not answer.abstained
    assert "uv run --locked" in answer.text
    assert "raise an error" in answer.text
    assert [s.title for s in answer.sources] == ["Locking and syncing"]


def test_see_as_what_the_reader_does_is_not_a_pointer_elsewhere() -> None:
    from rag.synthesize.extractive.features import kind_score

    def score(text: str) -> float:
        return kind_score(Candidate(1, text), {"howto"}, {"zoom", "limit"}, 0.5)

    assert score("You can check your Zoom profile to see your user type and meeting capacity.") >= 0
    for pointer in ("See the Zoom guide for the limits.", "Meeting limits differ (see below).",
                    "For the limits, see the account types documentation."):
        assert score(pointer) < 0, pointer


def _ranked(*rows: tuple[str, str, float]) -> list[Candidate]:
    found = []
    for n, (document, text, score) in enumerate(rows):
        vector = np.zeros(8)
        vector[n] = 1.0  # every sentence says something different
        found.append(Candidate(n + 1, text, document, vector=vector, score=score))
    return found


def test_a_how_to_answer_takes_another_pages_sentence_that_says_how() -> None:
    # The uv docs' question "How do I add a library from a folder next to my app so my edits show
    # up?": the best page (the pip interface) says what editables are; another page holds the option.
    ranked = _ranked(
        ("pip", "Editable packages do not need to be reinstalled for changes to be active.", 0.60),
        ("pip", "Editable installations add a link to the project within the virtual environment.", 0.55),
        ("deps", "To add an editable dependency, use the `--editable` flag.", 0.51),
    )
    texts = [c.text for c in select(ranked, 4, howto=True)]
    assert texts[-1] == "To add an editable dependency, use the `--editable` flag."
    assert len(select(ranked, 4, howto=False)) == 2  # another page's sentence needs a reason
    ranked[2].score = 0.40  # far below the best: not taken
    assert len(select(ranked, 4, howto=True)) == 2
    ranked[2].score, ranked[2].text = 0.51, "Editable dependencies are useful for local development."
    assert len(select(ranked, 4, howto=True)) == 2  # says nothing of how
