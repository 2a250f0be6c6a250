"""The fitted scorer (evals/fit_answers.py, rag/synthesize/extractive/fitted.json): the committed
file loads into the `Tuning` every answer uses, a broken file is refused by name, and a refit on a
small slice of the development questions is deterministic (the same values and moves twice)."""

from __future__ import annotations

import json
import shutil
from dataclasses import fields
from pathlib import Path

import pytest

from evals import fit_answers
from rag.synthesize.extractive import tuning as tuning_module
from rag.synthesize.extractive.tuning import HAND, FittedFileError, Tuning, load_fitted, provenance

UV_PAGES = fit_answers.DATASETS / "uv_docs" / "pages"


def test_the_committed_fitted_file_is_what_answers_use() -> None:
    record = json.loads(tuning_module.FITTED_FILE.read_text())
    assert record["command"].startswith("python -m evals.fit_answers")
    assert record["date"] and record["sets"]
    assert set(record["values"]) == set(fit_answers.FITTED)
    loaded, _ = load_fitted()
    for name, value in record["values"].items():
        assert getattr(tuning_module.TUNING, name) == getattr(loaded, name) == value, name
    moved = [name for name in record["values"] if record["values"][name] != getattr(HAND, name)]
    said = provenance()
    assert all(said[name].startswith("python -m evals.fit_answers") for name in moved)
    assert set(said) == {f.name for f in fields(Tuning)}


@pytest.mark.parametrize("values, error", [
    ({"no_such_weight": 1.0}, "no_such_weight"),
    ({"lexical": "high"}, "lexical"),
    ({"more_neighbours": 1.5}, "more_neighbours"),
])
def test_a_broken_fitted_file_is_refused_by_name(tmp_path: Path, values: dict, error: str) -> None:
    path = tmp_path / "fitted.json"
    path.write_text(json.dumps({"values": values}))
    with pytest.raises(FittedFileError, match=error):
        load_fitted(path)


def test_no_fitted_file_leaves_the_hand_set_values(tmp_path: Path) -> None:
    assert load_fitted(tmp_path / "absent.json") == (HAND, {})


@pytest.mark.skipif(not UV_PAGES.is_dir(), reason="the shared uv_docs pages are not here")
def test_a_refit_on_a_small_slice_is_deterministic(tmp_path: Path) -> None:
    records = fit_answers._records(fit_answers.REPO / "evals" / "fixtures" / "dev" / "uv_docs.jsonl")
    items = fit_answers._pages_items(records)
    chosen = [i for i in items if i.fitting][:5] + [i for i in items if not i.fitting][:3]
    pages = tmp_path / "pages"
    for item in chosen:
        for page in item.gold:
            (pages / page).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(UV_PAGES / page, pages / page)
    dev = fit_answers.open_set("dev_uv_docs", pages, chosen, tmp_path / "home", None)
    try:
        assert all(item.query is not None for item in dev.items)
        names = ("lexical", "stop_ratio", "type_bonus")
        runs = [fit_answers.fit([dev], HAND, 1, 0.0, 1.0, names, log=lambda _: None) for _ in range(2)]
        assert runs[0][1] == runs[1][1]
        assert all(getattr(runs[0][0], n) == getattr(runs[1][0], n) for n in names)
        scores = fit_answers.set_scores([dev], runs[0][0], True)
        assert 0.0 <= scores["dev_uv_docs"] <= 1.0
        assert fit_answers.objective(scores) >= fit_answers.objective(fit_answers.set_scores([dev], HAND, True))
        # The same questions on the litellm path (a scripted loopback model that always answers): only
        # the relevance check declines, so nothing answerable there is declined that it lets through.
        model = fit_answers.model_path_rates([dev])["dev_uv_docs"]
        assert set(model) == {"declined", "wrongly_declined"}
        with_hits = [i for i in dev.items if i.answerable and i.hits]
        answerable = [i for i in dev.items if i.answerable]
        assert model["wrongly_declined"] == round(1 - len(with_hits) / len(answerable), 3)
    finally:
        dev.service.close()
