"""Which moves the fit keeps (evals/fit_answers.py `fit`): one that raises the objective, lowers
no set, lowers neither fold of the fitting questions, and breaks at most `max_broken` questions per
question it fixes. The answers are stood in for by per-question scores that depend on the values
tried, so each rule is seen on its own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from evals import fit_answers
from rag.synthesize.extractive.tuning import HAND

BASE = [0, 0, 0, 1, 0, 0, 0, 0]  # one set of 8 fitting questions; folds are alternate questions
MOVES = {
    ("lexical", 0.375): [1, 1, 1, 0, 0, 0, 0, 0],  # fixes 3, breaks 1: a trade
    ("type_bonus", 0.12): [1, 0, 1, 0, 1, 0, 1, 0],  # fixes 4 in one fold, breaks 1 in the other
    ("stop_ratio", 0.8): [1, 0, 1, 1, 0, 0, 0, 0],  # fixes 2, breaks none
}


@dataclass
class _Set:
    name: str = "dev"


@pytest.fixture
def scored(monkeypatch: pytest.MonkeyPatch) -> None:
    def item_scores(sets: Any, tuning: Any, fitting: bool) -> dict[str, list[float]]:
        for (name, value), scores in MOVES.items():
            if getattr(tuning, name) == value:
                return {"dev": [float(s) for s in scores]}
        return {"dev": [float(s) for s in BASE]}

    monkeypatch.setattr(fit_answers, "item_scores", item_scores)


def _fit(names: tuple[str, ...], max_broken: float = 0.25) -> list[tuple[str, float]]:
    _, moves = fit_answers.fit([_Set()], HAND, 1, 0.01, 0.0, names, log=lambda _: None, max_broken=max_broken)
    return [(m["name"], m["to"]) for m in moves]


def test_a_move_that_only_fixes_is_kept(scored: None) -> None:
    assert _fit(("stop_ratio",)) == [("stop_ratio", 0.8)]


def test_a_move_that_trades_questions_is_not_kept(scored: None) -> None:
    assert _fit(("lexical",)) == []
    assert _fit(("lexical",), max_broken=0.5) == [("lexical", 0.375)]  # one broken per three fixed allowed


def test_a_move_that_lowers_one_fold_is_not_kept(scored: None) -> None:
    assert _fit(("type_bonus",), max_broken=1.0) == []
