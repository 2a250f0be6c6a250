"""The development questions by behaviour (evals/fixtures/dev/) say what their pages say: every gold
page exists, every answer key and support text is in a gold page, a fact-absent question expects a
decline, and each behaviour has questions on both splits (odd: fitting, even: held back)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEV = REPO / "evals" / "fixtures" / "dev"
CORPORA = {
    "handbook": REPO.parent / "shared" / "datasets" / "handbook_18f" / "pages",
    "uv_docs": REPO.parent / "shared" / "datasets" / "uv_docs" / "pages",
    "project_docs": REPO / "docs",
}
BEHAVIOURS = {"paraphrase", "two_part", "value", "fact_absent", "problem_fix", "plain"}


def records(name: str) -> list[dict]:
    return [json.loads(line) for line in (DEV / f"{name}.jsonl").read_text().splitlines() if line.strip()]


def folded(text: str) -> str:
    return " ".join(text.split()).lower()


@pytest.mark.parametrize("name", sorted(CORPORA))
def test_every_key_and_support_is_in_its_gold_pages(name: str) -> None:
    root = CORPORA[name]
    if not root.is_dir():
        pytest.skip(f"{root} is not here")
    rows = records(name)
    assert len({r["_id"] for r in rows}) == len(rows)
    for r in rows:
        assert r["behaviour"] in BEHAVIOURS, r["_id"]
        assert re.search(r"\d+$", r["_id"]), r["_id"]
        if r["behaviour"] == "fact_absent":
            assert r["kind"] == "near_topic" and not r["gold_pages"] and not r["answer_keys"], r["_id"]
            continue
        texts = [folded((root / page).read_text(encoding="utf-8")) for page in r["gold_pages"]]
        assert r["answer_keys"], r["_id"]
        for key in r["answer_keys"]:
            assert any(folded(key) in text for text in texts), (r["_id"], key)
        for piece in (p for p in r["support"].split("||") if p.strip()):
            assert any(folded(piece) in text for text in texts), (r["_id"], piece[:60])


@pytest.mark.parametrize("name", sorted(CORPORA))
def test_each_behaviour_is_on_both_splits(name: str) -> None:
    by: dict[str, set[str]] = {}
    for r in records(name):
        number = int(re.search(r"(\d+)$", r["_id"]).group(1))
        by.setdefault(r["behaviour"], set()).add("odd" if number % 2 else "even")
    assert all(splits == {"odd", "even"} for splits in by.values()), by
