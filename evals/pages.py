"""Reading a pages-plus-questions dataset: a folder of documents and gold questions about them.

The layout is a directory holding `questions.jsonl` beside `pages/` (uv_docs) or `files/`
(office_docs). A page's id is its path relative to that folder. Both spellings of a question are
normalised to one `PageQuestion`:

- uv_docs: `{"_id", "question", "kind", "gold_pages", "answer_keys", "support"}`. `kind` is howto,
  fact, multi or near_topic; a multi question needs all its gold pages, the others any one; answer
  keys match as case-insensitive substrings.
- office_docs: `{"_id", "question", "file", "page", "answer_keys", "support"}`. `file` is one path
  or null, `page` the 1-based physical PDF page or null; answer keys match case-insensitively as
  whole words, never inside a longer word or number ("73" is not in "737"). Its kind is the file's
  format (pdf, html, docx), `bad_file` for a file that cannot be read (no keys), and `no_answer`
  when no file answers it.

A question with no answer keys expects the system to decline. What gets ingested is decided by the
service (`KnowledgeService.ingest_directory` over the whole folder): Markdown, text, PDF, HTML and
Word. A file it refuses (office_docs' encrypted and image-only PDFs) is listed as failed with its
reason, and the questions about it as missing their gold pages. A PDF question's `page` is scored
against the pages of the excerpts the answer cites (`page_cited`, evals/page_metrics.py).

Any record may add `behaviour` (what general behaviour of an answer it tests: paraphrase,
two_part, value, fact_absent, problem_fix, plain; evals/fixtures/dev/README.md); the report then
has a column per behaviour beside the kinds. `--questions FILE` reads the questions from FILE
instead of the dataset's questions.jsonl; the folder ingested is then DIR/pages, DIR/files, or DIR
itself (`rag eval run --dataset docs --questions evals/fixtures/dev/project_docs.jsonl`).

`--split odd|even` keeps the questions whose id ends in an odd (uv001, uv003, …: the calibration
split, for tuning) or even number (uv002, …: the held-out split that figures are reported on).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evals.beir import _jsonl

PAGE_FOLDERS = ("pages", "files")
SUBSTRING, WORD = "substring", "word"  # how answer keys are matched
ANY, ALL = "any", "all"  # how many gold pages a question needs
SPLITS = ("all", "odd", "even")
_NUMBER = re.compile(r"(\d+)$")


@dataclass(frozen=True)
class PageQuestion:
    id: str
    question: str
    kind: str
    gold_pages: tuple[str, ...]  # page ids (paths relative to the page folder)
    gold_page_number: int | None  # the 1-based physical page of a PDF that holds the answer
    answer_keys: tuple[str, ...]  # empty: no answer expected, the system should decline
    key_rule: str = SUBSTRING
    gold_rule: str = ANY
    support: str = ""
    behaviour: str = ""  # the general behaviour it tests (dev questions), empty otherwise

    @property
    def answerable(self) -> bool:
        return bool(self.answer_keys)


@dataclass
class PagesDataset:
    path: Path  # the dataset directory
    root: Path  # the folder of pages that is ingested
    questions: list[PageQuestion]
    split: str = "all"
    total_questions: int = 0  # in the questions file, before the split and the limit
    questions_file: Path | None = None  # where the questions came from, when not DIR/questions.jsonl

    @property
    def name(self) -> str:
        return self.path.name


def page_folder(path: str | Path, questions: str | Path | None = None) -> Path | None:
    """The folder of pages of a pages-layout dataset (`pages/` or `files/`), else None. With a
    questions file of its own, any folder is one: its `pages/` or `files/`, else itself."""
    root = Path(path)
    if questions is None and not (root / "questions.jsonl").is_file():
        return None
    folder = next((root / name for name in PAGE_FOLDERS if (root / name).is_dir()), None)
    return folder if folder is not None or questions is None else (root if root.is_dir() else None)


def is_pages_layout(path: str | Path) -> bool:
    return page_folder(path) is not None


def split_of(question_id: str) -> str:
    """'odd' or 'even', by the number the id ends with."""
    found = _NUMBER.search(question_id)
    if found is None:
        raise ValueError(f"question id {question_id!r} does not end with a number: it has no odd/even split")
    return "odd" if int(found.group(1)) % 2 else "even"


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value or ())


def question_from_record(record: dict[str, Any]) -> PageQuestion:
    """One line of questions.jsonl, in either spelling, normalised."""
    qid, text = str(record["_id"]), str(record["question"])
    keys = _strings(record.get("answer_keys"))
    support = str(record.get("support") or "")
    behaviour = str(record.get("behaviour") or "")
    if "gold_pages" in record:  # uv_docs
        kind = str(record.get("kind") or ("answerable" if keys else "no_answer"))
        return PageQuestion(qid, text, kind, _strings(record["gold_pages"]), None, keys, SUBSTRING,
                            ALL if kind == "multi" else ANY, support, behaviour)
    if "file" in record:  # office_docs
        file = record.get("file")
        page = record.get("page")
        if file is None:
            kind = "no_answer"
        elif not keys:
            kind = "bad_file"
        else:
            kind = Path(str(file)).suffix.lstrip(".").lower() or "file"
        return PageQuestion(qid, text, kind, _strings([file] if file else []), int(page) if page is not None else None,
                            keys, WORD, ANY, support, behaviour)
    raise ValueError(f"question {qid}: neither `gold_pages` nor `file` (not a pages-layout question)")


def load_pages(path: str | Path, split: str = "all", limit: int | None = None,
               questions_file: str | Path | None = None) -> PagesDataset:
    """The questions of `split` (all, odd or even), the first `limit` of them; from
    `questions_file` when given, else the dataset's questions.jsonl."""
    if split not in SPLITS:
        raise ValueError(f"--split must be one of {', '.join(SPLITS)}")
    root = Path(path).expanduser().resolve()
    source = Path(questions_file).expanduser().resolve() if questions_file is not None else None
    if source is not None and not source.is_file():
        raise FileNotFoundError(f"{source}: no such questions file")
    folder = page_folder(root, source)
    if folder is None:
        raise FileNotFoundError(f"{root}: expected questions.jsonl beside a pages/ or files/ folder")
    questions = [question_from_record(r) for r in _jsonl(source or root / "questions.jsonl")]
    total = len(questions)
    if split != "all":
        questions = [q for q in questions if split_of(q.id) == split]
    if limit is not None:
        questions = questions[:limit]
    return PagesDataset(root, folder, questions, split, total, source)


def page_id(source_id: str) -> str:
    """The page a directory-ingested document came from: its source_id is `fs:<workspace>:<kb>:<path>`."""
    parts = source_id.split(":", 3)
    return parts[3] if len(parts) == 4 else source_id
