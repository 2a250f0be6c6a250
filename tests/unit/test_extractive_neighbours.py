"""What completes a chosen sentence, and when an answer on the topic still declines
(rag/synthesize/extractive/steps.py: `with_neighbours`, `check_fact`): the value a question asks
for stated in the next sentence, the step that resolves a failure, and a question asking for a
maximum that no sentence states. The real sentence reader, no model."""

from __future__ import annotations

from rag.retrieve.types import Hit
from rag.synthesize import declines
from rag.synthesize.extractive import Candidate, Draft
from rag.synthesize.extractive.kinds import asks_for, counted
from rag.synthesize.extractive.question import Question
from rag.synthesize.extractive.steps import Env, check_fact, find_sentences, with_neighbours

SERVER = """\
# Running the server

## Listening address

The server listens on the loopback interface unless you tell it otherwise at start-up.
By default it binds port 8000 on 127.0.0.1 and serves the API under /v1.

## Errors at start-up

If another program already uses the port, the server fails to start with an address-in-use error.
To fix this, pass `--port 8001` or stop the other program first.

## Uploads

Uploads larger than the configured size are refused with a clear message to the caller.
"""


def pool(text: str = SERVER) -> list[Candidate]:
    hit = Hit(0, 0.0, ["text"], "server", "kb", "corpus:w:kb:server", "Running the server", None, 1,
              ["Running the server"], text, 0, len(text))
    return find_sentences([hit])


def one(found: list[Candidate], start: str) -> Candidate:
    (match,) = [c for c in found if c.text.startswith(start)]
    return match


def question(text: str) -> Question:
    from rag.synthesize.extractive.kinds import FAILURE, is_howto

    return Question(text, asks=asks_for(text), howto=is_howto(text), problem=bool(FAILURE.search(text)), unit=counted(text))


def test_the_asked_value_in_the_next_sentence_joins_the_answer() -> None:
    found = pool()
    topic = one(found, "The server listens on the loopback")
    q = question("Which port does the server listen on by default?")
    assert "value" in q.asks
    chosen = with_neighbours([topic], found, q)
    assert [c.text for c in chosen] == [topic.text, one(found, "By default it binds port 8000").text]


def test_a_sentence_holding_the_value_needs_no_neighbour() -> None:
    found = pool()
    value = one(found, "By default it binds port 8000")
    assert with_neighbours([value], found, question("Which port does the server listen on by default?")) == [value]


def test_a_question_asking_no_value_takes_no_neighbour() -> None:
    found = pool()
    topic = one(found, "The server listens on the loopback")
    assert with_neighbours([topic], found, question("Does the server listen on the loopback interface?")) == [topic]


def test_a_failure_is_followed_by_the_step_that_resolves_it() -> None:
    found = pool()
    failure = one(found, "If another program already uses the port")
    q = question("The server won't start and says the address is in use. What should I do?")
    assert q.problem
    chosen = with_neighbours([failure], found, q)
    assert chosen[-1].text.startswith("To fix this, pass `--port 8001`")


ACCOUNT = """\
# Video calls

## Meetings longer than 40 minutes

You can check your profile to see your user type and meeting capacity.
Submit a service request to be upgraded to a licensed user.
Email the service desk when nobody answers the request you submitted.

## Recording

Recordings are kept in the cloud for thirty days and then deleted for good.
"""


def test_a_how_to_answer_that_says_only_what_is_possible_takes_the_step_after_it() -> None:
    found = pool(ACCOUNT)
    possible = one(found, "You can check your profile")
    q = question("My calls keep getting cut off at 40 minutes. How do I get that limit removed?")
    assert q.howto
    chosen = with_neighbours([possible], found, q)
    assert [c.text for c in chosen] == [possible.text, "Submit a service request to be upgraded to a licensed user."]
    # A step is not added to a step (the one after is a step too), nor where the question does not ask how.
    step = one(found, "Submit a service request")
    assert with_neighbours([step], found, q) == [step]
    assert with_neighbours([possible], found, question("What does my profile show?")) == [possible]


def test_a_neighbour_under_another_heading_completes_nothing() -> None:
    found = pool()
    failure = one(found, "If another program already uses the port")
    # The sentence before it is the listening address's: another heading.
    q = question("Which port does the server fail on?")
    assert all(c.context == failure.context for c in with_neighbours([failure], found, q))


def test_at_most_more_neighbours_are_added() -> None:
    from rag.synthesize.extractive.tuning import Tuning

    found = pool()
    chosen = [one(found, "The server listens on the loopback"), one(found, "If another program already uses")]
    q = question("Which port does the server use, and why does it fail with an error?")
    assert len(with_neighbours(chosen, found, q, Tuning(more_neighbours=1))) == 3
    assert len(with_neighbours(chosen, found, q, Tuning(more_neighbours=0))) == 2


def _checked(text: str, chosen: list[Candidate]) -> Draft:
    draft = Draft(question(text), [])
    draft.chosen = chosen
    return check_fact(draft, Env(embedder=None, settings=None))  # type: ignore[arg-type]


def test_a_maximum_no_sentence_states_declines_as_fact_not_stated() -> None:
    found = pool()
    refused = one(found, "Uploads larger than the configured size")
    draft = _checked("What is the maximum upload size?", [refused])
    assert draft.declined == declines.FACT_NOT_STATED
    assert declines.describe(draft.declined)


def test_a_sentence_stating_the_number_answers() -> None:
    found = pool()
    assert _checked("How many ports does the server bind by default?", [one(found, "By default it binds")]).declined is None


def test_a_question_asking_no_value_is_not_checked() -> None:
    found = pool()
    assert _checked("Why are large uploads refused?", [one(found, "Uploads larger than")]).declined is None


def _hit(n: int, title: str) -> Hit:
    return Hit(0, 0.0, ["text"], f"p{n}", "kb", f"corpus:w:kb:p{n}", title, None, 1, [title], "", 0, 0)


def _said(excerpt: int, document: str, text: str, vector: list[float]) -> Candidate:
    import numpy as np

    v = np.array(vector, dtype=float)
    return Candidate(excerpt, text, document, vector=v / np.linalg.norm(v))


def test_the_topics_own_page_is_cited_for_what_a_sibling_repeats() -> None:
    from rag.retrieve.text import stems
    from rag.synthesize.extractive.steps import canonical

    hits = [_hit(1, "Getting started"), _hit(2, "Creating a library")]
    guide = _said(1, "corpus:w:kb:p1", "Pass `--lib` to create a library.", [1.0, 0.05])
    reference = _said(2, "corpus:w:kb:p2", "The `--lib` flag creates a library.", [1.0, 0.0])
    weights = {stem: 1.0 for stem in stems("create library")}
    assert canonical([guide], [guide, reference], hits, weights) == [reference]
    # The other way round, the page whose title names less of the question gives nothing.
    assert canonical([reference], [reference, guide], hits, weights) == [reference]
    # A sentence of the sibling that says something else is no repeat.
    other = _said(2, "corpus:w:kb:p2", "Libraries are built with a build backend.", [0.0, 1.0])
    assert canonical([guide], [guide, other], hits, weights) == [guide]


def test_a_version_number_in_code_states_no_maximum() -> None:
    text = "# Workspaces\n\nDefine each package as its own project with path dependencies:\n\n" \
           "```toml\n[project]\nversion = \"0.1.0\"\nrequires-python = \">=3.12\"\n```\n"
    found = pool(text)
    (lead,) = [c for c in found if c.attachment]
    assert _checked("What's the maximum number of members a workspace can have?", [lead]).declined == declines.FACT_NOT_STATED
    # A value (a setting, a flag) may well be in the code.
    assert _checked("Which setting gives the project's version?", [lead]).declined is None


def test_the_largest_size_asks_for_a_number() -> None:
    assert "number" in asks_for("What's the largest file size I can upload?")


def test_no_sentence_is_shown_twice() -> None:
    from rag.synthesize.extractive.steps import once, repeats

    text = ("# Changing your name\n\nFollow these steps if your name does not match your documents:\n\n"
            "- Log in to HR Links and open your profile.\n"
            "- Wait up to 5 business days for the changes to take effect.\n\n"
            "Wait up to 5 business days for the changes to take effect.\n")
    found = pool(text)
    lead = next(c for c in found if c.attachment)
    again = next(c for c in found if c.text.startswith("Wait up to 5") and not c.attachment)
    assert repeats(again, [lead]) and repeats(lead, [again])
    assert once([lead, again]) == [lead] and once([again, lead]) == [lead]
    assert once([again, again]) == [again]


def test_a_fix_that_does_not_fit_takes_the_room_of_later_sentences() -> None:
    from rag.synthesize.extractive.tuning import Tuning

    found = pool()
    failure = one(found, "If another program already uses the port")
    later = one(found, "Uploads larger than the configured size")
    fix = one(found, "To fix this")
    q = question("The server won't start and says the address is in use. What should I do?")
    room = failure.size + fix.size + 5
    assert with_neighbours([failure, later], found, q, Tuning(max_answer_chars=room)) == [failure, fix]
    # No room even without the later sentence: nothing is dropped for nothing.
    tight = Tuning(max_answer_chars=failure.size + 5)
    assert with_neighbours([failure, later], found, q, tight) == [failure, later]


def test_a_retrieved_sentence_stating_the_value_joins_the_answer() -> None:
    from types import SimpleNamespace

    found = pool()
    topic = one(found, "The server listens on the loopback")
    value = one(found, "By default it binds port 8000")
    topic.score, value.score = 1.0, 0.9
    draft = Draft(question("Which port does the server use?"), [])
    draft.chosen, draft.ranked = [topic], [topic, value]
    draft = check_fact(draft, Env(embedder=None, settings=SimpleNamespace(extractive_sentences=4)))  # type: ignore[arg-type]
    assert draft.declined is None and draft.chosen == [topic, value]
    value.score = 0.2  # far below the best: not what the answer is about
    draft.chosen, draft.ranked, draft.declined = [topic], [topic, value], None
    assert check_fact(draft, Env(embedder=None, settings=None)).declined == declines.FACT_NOT_STATED  # type: ignore[arg-type]
    # Another page's value is another topic's ("the proxy binds port 3128"): it does not join.
    elsewhere = Candidate(2, "The proxy binds port 3128 for the server.", "corpus:w:kb:proxy", score=0.9)
    draft.chosen, draft.ranked, draft.declined = [topic], [topic, elsewhere], None
    assert check_fact(draft, Env(embedder=None, settings=None)).declined == declines.FACT_NOT_STATED  # type: ignore[arg-type]


def test_a_how_to_about_a_limit_is_no_question_for_a_number() -> None:
    found = pool()
    draft = _checked("My uploads keep getting refused. How do I get the size limit raised?",
                     [one(found, "Uploads larger than the configured size")])
    assert draft.declined is None
