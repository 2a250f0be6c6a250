"""Fit the extractive answer's sentence weights and decline thresholds on the development splits.

    python -m evals.fit_answers [--homes DIR] [--passes 2] [--sets a,b] [--limit N] [--write]

Replaces `python -m evals.calibrate_decline`. The sentence score is a weighted sum of declared
features (rag/synthesize/extractive/features.py); the weights named in `FITTED` below and the
decline thresholds are fitted here, by coordinate search on what the answers do end to end, on the
fitting split of every development set only:

| set | fitting split | held back |
| --- | --- | --- |
| handbook fixture (evals/fixtures/handbook_questions.yaml) | odd positions | even positions |
| uv_docs, office_docs (their questions.jsonl) | odd ids | even ids |
| HotpotQA 500 (not yes/no) | odd positions in questions.jsonl | even positions |
| dev questions (evals/fixtures/dev/*.jsonl) | odd ids | even ids |

A question's score: answerable, half for holding an answer key (HotpotQA: the answer string) and
half for citing a gold page (HotpotQA: half citation precision, half recall), 0 when declined; not
answerable, 1 when declined. A set's score is its questions' mean; the objective is the mean of the
sets' scores (each set weighs the same, so HotpotQA's 210 do not drown the rest).

Retrieval runs once per question; then, for each parameter in turn, each of its candidate values is
tried with every other parameter held, and the best is kept when it raises the objective by at
least `--min-gain`, lowers no set's score by more than `--max-loss`, lowers neither fold of the
fitting split (alternate questions of each set; a gain one half of the questions carries alone is
not kept), and answers worse at most `--max-broken` (0.25) as many questions as it answers better
(moves that traded questions for others did not hold on the held-back halves). Ties keep the
current value: the search is deterministic. `--passes` rounds. The held-back splits are scored with the
start and the fitted values and printed beside, never used for a choice.

`--write` stores the fitted values in rag/synthesize/extractive/fitted.json with this command, the
data, the date and the figures; `Tuning` loads them (tuning.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path
from typing import Any, Callable, Sequence

REPO = Path(__file__).resolve().parents[1]
DATASETS = REPO.parent / "shared" / "datasets"
FITTED_FILE = REPO / "rag" / "synthesize" / "extractive" / "fitted.json"

# The parameters fitted, each with how its candidates are made from the current value: weights are
# scaled (x0 turns a feature off), thresholds shifted.
SCALED = ("lexical", "rank_prior", "code_bonus", "howto_bonus", "action_bonus", "type_bonus", "fix_bonus",
          "pointer_penalty", "intro_penalty", "step_penalty", "restates_penalty")
SHIFTED = ("stop_ratio", "min_subject_coverage", "paraphrase_similarity", "unused_word_similarity", "canonical_margin",
           "part_uncovered", "part_held", "fact_held", "fact_share", "restates_share")
FITTED = SCALED + SHIFTED
SCALES = (0.0, 0.5, 1.5, 2.0)
SHIFTS = (-0.1, -0.05, 0.05, 0.1)


@dataclass
class Item:
    """One development question, retrieved once: what scoring its answer needs."""

    id: str
    question: str
    fitting: bool  # the fitting split (else held back)
    answerable: bool
    keys: tuple[str, ...] = ()
    key_rule: str = "substring"
    gold: tuple[str, ...] = ()  # gold page / corpus ids
    need_all: bool = False  # a multi question needs every gold page
    hotpot: bool = False
    query: Any = None
    hits: list = field(default_factory=list)


@dataclass
class DevSet:
    name: str
    items: list[Item]
    service: Any = None
    cited_id: Callable[[str], str] = str


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _pages_items(records: Sequence[dict]) -> list[Item]:
    from evals.pages import ALL, question_from_record, split_of

    items = []
    for r in records:
        q = question_from_record(r)
        items.append(Item(q.id, q.question, split_of(q.id) == "odd", q.answerable, q.answer_keys, q.key_rule,
                          tuple(dict.fromkeys(q.gold_pages)), q.gold_rule == ALL))
    return items


def _handbook_items() -> list[Item]:
    import yaml

    data = yaml.safe_load((REPO / "evals" / "fixtures" / "handbook_questions.yaml").read_text())
    found = []
    for n, q in enumerate(data["answerable"], start=1):
        found.append(Item(q["id"], q["question"], n % 2 == 1, True, tuple(q["facts"]), "substring", tuple(q["pages"])))
    near = [q for q in data["unanswerable"] if q["kind"] == "near-topic"]
    for n, q in enumerate(near, start=1):
        found.append(Item(q["id"], q["question"], n % 2 == 1, False))
    return found


def _hotpot_items(root: Path) -> list[Item]:
    from evals.qa import load_qa

    found = []
    for n, q in enumerate(load_qa(root).questions, start=1):
        if not q.yes_no:
            found.append(Item(q.id, q.question, n % 2 == 1, True, tuple(q.answers), "substring", tuple(q.gold),
                              hotpot=True))
    return found


def dev_sets() -> dict[str, tuple[Path, Callable[[], list[Item]], str]]:
    """Each set: (the folder or dataset ingested, its questions, how it is ingested)."""
    dev = REPO / "evals" / "fixtures" / "dev"
    return {
        "handbook": (DATASETS / "handbook_18f" / "pages", _handbook_items, "folder"),
        "uv_docs": (DATASETS / "uv_docs" / "pages",
                    lambda: _pages_items(_records(DATASETS / "uv_docs" / "questions.jsonl")), "folder"),
        "office_docs": (DATASETS / "office_docs" / "files",
                        lambda: _pages_items(_records(DATASETS / "office_docs" / "questions.jsonl")), "folder"),
        "hotpotqa": (DATASETS / "hotpotqa_dev500", lambda: _hotpot_items(DATASETS / "hotpotqa_dev500"), "records"),
        "dev_handbook": (DATASETS / "handbook_18f" / "pages", lambda: _pages_items(_records(dev / "handbook.jsonl")),
                         "folder"),
        "dev_uv_docs": (DATASETS / "uv_docs" / "pages", lambda: _pages_items(_records(dev / "uv_docs.jsonl")), "folder"),
        "dev_project_docs": (REPO / "docs", lambda: _pages_items(_records(dev / "project_docs.jsonl")), "folder"),
    }


def open_set(name: str, source: Path, items: list[Item], home: Path, limit: int | None) -> DevSet:
    """The set's knowledge ingested into `home` (incremental when it is there already) and each
    question retrieved once, as `rag ask` retrieves it."""
    from evals.qa import load_qa
    from evals.retrieval import corpus_id, eval_settings
    from evals.pages import page_id
    from rag.service import KnowledgeService, Principal
    from rag.synthesize.relevance import relevant_hits

    svc = KnowledgeService(eval_settings(home))
    admin = Principal.local_admin("default")
    svc.ensure_workspace("default")
    kb = name.replace("_", "-")
    if source.name == "hotpotqa_dev500":
        svc.ingest_records(admin, load_qa(source).corpus, kb_name=kb)
        cited_id = corpus_id
    else:
        svc.ingest_directory(admin, source, kb_name=kb)
        cited_id = page_id
    if limit is not None:
        items = [i for i in items if i.fitting][:limit] + [i for i in items if not i.fitting][:limit]
    scope = svc.scope(admin, kb)
    for item in items:
        text = item.question
        item.query = svc.engines.retriever.query(text)
        hits = svc.engines.retriever.retrieve(item.query, scope, svc.settings.answer.excerpts)
        item.hits = relevant_hits(text, hits, svc.settings.answer)
    return DevSet(name, items, svc, cited_id)


def question_score(item: Item, answer: Any, cited_id: Callable[[str], str]) -> float:
    from evals.answer_metrics import answer_contains, citation_precision, citation_recall
    from evals.page_metrics import key_hit

    declined = answer is None or answer.abstained or not answer.sources
    if not item.answerable:
        return float(declined)
    if declined:
        return 0.0
    cited = [cited_id(s.source_id) for s in answer.sources]
    if item.hotpot:
        return (0.5 * float(answer_contains(answer.text, list(item.keys)))
                + 0.25 * citation_precision(cited, list(item.gold)) + 0.25 * citation_recall(cited, list(item.gold)))
    need = all if item.need_all else any
    gold = float(need(g in set(cited) for g in item.gold)) if item.gold else 1.0
    return 0.5 * float(key_hit(answer.text, item.keys, item.key_rule)) + 0.5 * gold


def _extractive_answers(tuning: Any) -> Callable[[DevSet, Item], Any]:
    from rag.synthesize.extractive import ExtractiveSynthesizer

    made: dict[str, Any] = {}

    def answer_of(s: DevSet, item: Item) -> Any:
        if s.name not in made:
            engines = s.service.engines
            made[s.name] = ExtractiveSynthesizer(engines.embedder, s.service.settings.answer,
                                                 engines.retriever.doc_freq, tuning)
        return made[s.name].answer(item.query, item.hits) if item.hits else None

    return answer_of


def item_scores(sets: Sequence[DevSet], tuning: Any, fitting: bool) -> dict[str, list[float]]:
    """Each set's question scores under `tuning`, on one split, in the split's order."""
    answer_of = _extractive_answers(tuning)
    return {s.name: [question_score(item, answer_of(s, item), s.cited_id) for item in s.items if item.fitting == fitting]
            for s in sets}


def _means(scores: dict[str, list[float]], fold: int | None = None) -> dict[str, float]:
    """Each set's mean score; of one of two folds only (alternate questions) where `fold` is given."""
    chosen = {name: values if fold is None else values[fold::2] for name, values in scores.items()}
    return {name: round(sum(values) / len(values), 4) if values else 0.0 for name, values in chosen.items()}


def set_scores(sets: Sequence[DevSet], tuning: Any, fitting: bool) -> dict[str, float]:
    """Each set's mean question score under `tuning`, on one split."""
    return _means(item_scores(sets, tuning, fitting))


def decline_rates(sets: Sequence[DevSet], answer_of: Callable[[DevSet, Item], Any]) -> dict[str, dict[str, float]]:
    """Each set's share of questions to decline that were declined and of answerable ones that were
    (wrongly), over both splits, with `answer_of` giving the answer (None: declined before any)."""
    rates = {}
    for s in sets:
        answers = [(item, answer_of(s, item)) for item in s.items]
        declined = [(item, a is None or a.abstained or not a.sources) for item, a in answers]
        near = [d for item, d in declined if not item.answerable]
        answerable = [d for item, d in declined if item.answerable]
        rates[s.name] = {
            "declined": round(sum(near) / len(near), 3) if near else None,
            "wrongly_declined": round(sum(answerable) / len(answerable), 3) if answerable else None,
        }
    return rates


def model_path_rates(sets: Sequence[DevSet]) -> dict[str, dict[str, float]]:
    """The decline rates of the litellm path, against a loopback OpenAI-compatible server whose
    scripted model always answers (citing excerpt 1): what the relevance check in front of it
    declines, with the thresholds in use, and nothing the model would add."""
    from rag.models.llm import ChatModel
    from rag.settings import LLMSettings
    from rag.synthesize.generative import LLMSynthesizer
    from tests.support.llm_server import LLMServer, Text

    with LLMServer() as server:
        model = ChatModel("openai/scripted", LLMSettings(api_base=f"{server.url}/v1", api_key="loopback",
                                                         max_attempts=1, timeout=10))
        synthesizer = LLMSynthesizer(model)

        def answer_of(_: DevSet, item: Item) -> Any:
            if not item.hits:
                return None  # the relevance check declines: no model call
            server.script(Text("The excerpts state it [1]."))
            return synthesizer.answer(item.query, item.hits)

        return decline_rates(sets, answer_of)


def objective(scores: dict[str, float]) -> float:
    return round(sum(scores.values()) / len(scores), 4) if scores else 0.0


def candidates(name: str, value: float) -> list[float]:
    if name in SCALED:
        return [round(value * k, 4) for k in SCALES]
    return [round(min(1.0, max(0.0, value + d)), 4) for d in SHIFTS]


def _changed(before: dict[str, list[float]], after: dict[str, list[float]]) -> tuple[int, int]:
    """How many questions a move answers better, and how many worse."""
    pairs = [(a, b) for name in before for a, b in zip(before[name], after[name])]
    return sum(b > a + 1e-9 for a, b in pairs), sum(b < a - 1e-9 for a, b in pairs)


def fit(sets: Sequence[DevSet], start: Any, passes: int, min_gain: float, max_loss: float,
        names: Sequence[str] = FITTED, log: Callable[[str], None] = print,
        max_broken: float = 0.25) -> tuple[Any, list[dict]]:
    """Coordinate search from `start` (a Tuning); the fitted Tuning and each accepted move. A move
    must raise the objective by `min_gain`, lower no set by more than `max_loss`, lower the
    objective of neither fold of the fitting split (alternate questions of each set: a gain one
    half of the questions carries alone is not kept), and answer worse at most `max_broken` as many
    questions as it answers better (a move that trades questions for others is not a gain that
    holds)."""
    current = start
    base_items = item_scores(sets, current, True)
    moves = []
    for round_ in range(1, passes + 1):
        moved = False
        for name in names:
            value = getattr(current, name)
            base, best_value, best_items = _means(base_items), value, base_items
            for candidate in candidates(name, value):
                if candidate == value:
                    continue
                tried = item_scores(sets, replace(current, **{name: candidate}), True)
                scores = _means(tried)
                gain = objective(scores) - objective(_means(best_items))
                worst = min(scores[k] - base[k] for k in scores)
                steady = all(objective(_means(tried, f)) >= objective(_means(base_items, f)) for f in (0, 1))
                better, worse = _changed(base_items, tried)
                if gain >= min_gain and worst >= -max_loss and steady and worse <= max_broken * better:
                    best_value, best_items = candidate, tried
            if best_value != value:
                log(f"pass {round_}: {name} {value} -> {best_value}: objective {objective(base)} -> "
                    f"{objective(_means(best_items))}")
                moves.append({"pass": round_, "name": name, "from": value, "to": best_value,
                              "objective": objective(_means(best_items))})
                current, base_items, moved = replace(current, **{name: best_value}), best_items, True
        if not moved:
            break
    return current, moves


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--homes", type=Path, help="a RAG_HOME per set under this folder (kept; default: temporary)")
    parser.add_argument("--sets", help="comma-separated sets (default: all): " + ", ".join(dev_sets()))
    parser.add_argument("--params", help="comma-separated parameters to fit (default: all): " + ", ".join(FITTED))
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--limit", type=int, help="at most N questions of each split of each set (a slice)")
    # One question of a 15-question split moves its set's score by 1/15 and the objective (7 sets) by
    # about 0.0095: a smaller gain is one question's noise, and moves that small did not hold on the
    # held-back halves (docs/benchmarks.md).
    parser.add_argument("--min-gain", type=float, default=0.01, help="least objective gain that moves a value")
    parser.add_argument("--max-loss", type=float, default=0.0, help="most a set's score may fall for a move")
    # Moves that fixed 9 fitting questions and broke 3 (lexical 0.25 -> 0.375), or 14 and 8 (-> 0.5),
    # lost on the held-back halves of the handbook, uv_docs and office_docs; one that fixed 3 and broke
    # none (min_subject_coverage 0.5 -> 0.4) held (docs/benchmarks.md). Chosen after those runs, so the
    # held-back halves are no longer blind to this one number.
    parser.add_argument("--max-broken", type=float, default=0.25,
                        help="most questions a move may answer worse, per question it answers better")
    parser.add_argument("--from-hand", action="store_true", help="start from the hand-set values, not fitted.json")
    parser.add_argument("--write", action="store_true", help="store the fitted values in " + str(FITTED_FILE.relative_to(REPO)))
    parser.add_argument("--json", type=Path, help="write the run's result here")
    parser.add_argument("--model-path", action="store_true",
                        help="also report the decline rates of the litellm path (a scripted loopback server)")
    args = parser.parse_args(argv)
    import rag  # noqa: F401  (process defaults first)
    from rag.synthesize.extractive.tuning import HAND, TUNING

    chosen = args.sets.split(",") if args.sets else list(dev_sets())
    names = args.params.split(",") if args.params else list(FITTED)
    unknown = [n for n in chosen if n not in dev_sets()] + [n for n in names if n not in FITTED]
    if unknown:
        parser.error(f"unknown set or parameter: {', '.join(unknown)}")
    start = HAND if args.from_hand else TUNING
    started = time.perf_counter()
    with ExitStack() as stack:
        homes = args.homes or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rag-fit-")))
        sets = []
        for name in chosen:
            source, items_of, _ = dev_sets()[name]
            items = items_of()
            print(f"{name}: ingesting {source} and retrieving {len(items)} questions …", file=sys.stderr)
            dev = open_set(name, source, items, homes / name, args.limit)
            stack.callback(dev.service.close)
            sets.append(dev)
        retrieved = time.perf_counter()
        before = {"fitting": set_scores(sets, start, True), "held_back": set_scores(sets, start, False)}
        fitted, moves = fit(sets, start, args.passes, args.min_gain, args.max_loss, names,
                            log=lambda line: print(line, file=sys.stderr), max_broken=args.max_broken)
        after = {"fitting": set_scores(sets, fitted, True), "held_back": set_scores(sets, fitted, False)}
        counts = {s.name: {"fitting": sum(i.fitting for i in s.items), "held_back": sum(not i.fitting for i in s.items)}
                  for s in sets}
        extractive = _extractive_answers(fitted)
        declines = {"extractive": decline_rates(sets, extractive)}
        if args.model_path:
            declines["model"] = model_path_rates(sets)
    result = {
        "command": "python -m evals.fit_answers" + (" " + " ".join(argv if argv is not None else sys.argv[1:])).rstrip(),
        "date": date.today().isoformat(), "sets": counts,
        "values": {n: getattr(fitted, n) for n in FITTED},
        "start": {n: getattr(start, n) for n in FITTED}, "moves": moves,
        "scores": {"start": before, "fitted": after},
        "declines": declines,
        "seconds": {"retrieve": round(retrieved - started, 1), "fit": round(time.perf_counter() - retrieved, 1)},
    }
    print("| set | questions (fit / held back) | fitting: start | fitting: fitted | held back: start | held back: fitted |")
    print("| --- | --- | --- | --- | --- | --- |")
    for s in counts:
        print(f"| {s} | {counts[s]['fitting']} / {counts[s]['held_back']} | {before['fitting'][s]:.3f} | "
              f"{after['fitting'][s]:.3f} | {before['held_back'][s]:.3f} | {after['held_back'][s]:.3f} |")
    print(f"| objective | | {objective(before['fitting']):.3f} | {objective(after['fitting']):.3f} | "
          f"{objective(before['held_back']):.3f} | {objective(after['held_back']):.3f} |")
    print("\n| set | extractive: to decline, declined | extractive: answerable, wrongly declined |"
          + (" model path: declined | model path: wrongly declined |" if "model" in declines else ""))
    print("| --- | --- | --- |" + (" --- | --- |" if "model" in declines else ""))
    for name in counts:
        row = declines["extractive"][name]
        line = f"| {name} | {row['declined']} | {row['wrongly_declined']} |"
        if "model" in declines:
            line += f" {declines['model'][name]['declined']} | {declines['model'][name]['wrongly_declined']} |"
        print(line)
    changed = {n: (result["start"][n], v) for n, v in result["values"].items() if result["start"][n] != v}
    print("\nchanged:", ", ".join(f"{n} {a} -> {b}" for n, (a, b) in changed.items()) or "nothing")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    if args.write:
        FITTED_FILE.write_text(json.dumps(result, indent=2) + "\n")
        print(f"written: {FITTED_FILE.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
