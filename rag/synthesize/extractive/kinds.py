"""What a question asks for and what a sentence looks like, as English cue patterns, in one table.

A question *kind* is one row of `KINDS`: the pattern that says a question asks for it, the pattern
that says a sentence holds such an answer, the feature of the sentence score it feeds
(features.py), and whether an answer must state such a thing (`required`: a question asking for a
maximum, a percentage, a port or a flag is not answered by sentences that hold no number or value;
the answer then declines as `fact_not_stated`). A new kind is one row. The sentence *cues* (code,
an action verb, a pointer elsewhere, an introduction, a step that leans on the one before, a
negation, a failure and its fix) are the rest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rag.retrieve.text import STOPWORDS, WORD, porter_stem
from rag.synthesize.extractive.subject import MONTHS

_NUMBER_WORDS = r"(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|hundred|half|twice)"
# A number as a reader reads one ("80", "2.1%", "$3,000", "15th"), not the digits of a link or an
# identifier ("file/d/13H21w1"); "once" only as a frequency ("once a week"), not as "once you have".
_NUMBER = r"(?<![\w/=#.-])\d[\d,.]*(?:st|nd|rd|th|s|k|m|h|%)?(?![\w/])|\bonce (?:a|an|per|every)\b"
NUMBER_TOKEN = re.compile(rf"\d[\d,.]*(?:st|nd|rd|th|s|k|m|h)?|{_NUMBER_WORDS}")  # one word of a number

# A how-to question: "How do I ...?", "Can I ...?", "What's the best way ...?", "I want to ...";
# not a question of how something works ("How are search results ranked?", "How does X resolve ...?"),
# whose answer explains rather than names a command.
HOWTO = re.compile(
    r"^\s*(?:how\b(?! (?:many|much|long|often|far|big|large|old|soon|quickly)\b)"
    r"(?! (?:is|are|was|were|does|did|do) (?!(?:i|you|we|one)\b))|can (?:i|you|we)\b|is (?:there|it possible)\b|what(?:'s| is) the (?:\w+ )?way\b"
    r"|i (?:want|need|would like|have)\b)|\bhow (?:do|can|should|would) (?:i|you|we)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Kind:
    name: str
    asks: re.Pattern[str]  # a question asking for this kind of answer
    holds: re.Pattern[str] | None  # a sentence holding such an answer (None: features.py decides)
    feature: str  # the sentence feature it feeds: "type", "lead" or "howto"
    required: bool = False  # an answer without a sentence holding it does not answer
    in_code: bool = True  # the code block a sentence introduces may hold it (a number in code is mostly a version)


KINDS: tuple[Kind, ...] = (
    Kind("number",
         re.compile(r"\bhow (?:many|much|long|often|far|big|large|old)\b"
                    r"|\b(?:minimum|maximum|limit|percentage|percent|rate|cap|amount|largest|smallest|biggest|longest"
                    r"|shortest|highest|lowest|fewest)\b", re.I),
         re.compile(rf"{_NUMBER}|\b{_NUMBER_WORDS}\b|\b(?:no|any|unlimited|dozen|several)\s+(?:limit|maximum|cap)\b"
                    r"|\b(?:an?|few|several)\s+(?:seconds?|minutes?|hours?|days?|weeks?|months?|years?)\b"
                    r"|\b(?:daily|weekly|monthly|annually|yearly|hourly)\b", re.I),
         "type", required=True, in_code=False),
    Kind("time",
         re.compile(r"\b(?:when|how soon|how quickly|what time|which day|what day|weekday|deadline|by when)\b", re.I),
         re.compile(
             rf"{_NUMBER}|\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|february|march|april|may|june"
             r"|july|august|september|october|november|december|days?|weeks?|months?|years?|hours?|minutes?|daily"
             r"|weekly|monthly|annually|before|after|within|until|immediately)\b", re.I,
         ), "type"),
    Kind("agent", re.compile(r"\b(?:who|whom|which (?:team|office|person|group)|to whom)\b", re.I),
         re.compile(r"@|(?<=[a-z,;] )[A-Z][\w&-]+"), "type"),
    Kind("place", re.compile(r"\b(?:where|which (?:site|page|url|address|file|folder|directory|channel))\b", re.I),
         re.compile(r"https?://|www\.|@|/[\w.-]+|`[^`]+`|(?<=[a-z,;] )[A-Z][\w&-]+"), "type"),
    # "How far ahead of my last day ...?", "How much notice ...?": a span of time before something
    # ("at least two weeks before your last day", "three business days in advance"), not any number
    # ("within 24 hours of the person ending their work").
    Kind("lead",
         re.compile(
             r"\bhow (?:far|long|much time|early|many (?:days|weeks|hours|months))\b(?:\s+\w+){0,6}?\s+(?:ahead|in advance|before|beforehand|prior)\b"
             r"|\bhow much (?:advance )?notice\b", re.I),
         re.compile(
             rf"\b(?:\d+|{_NUMBER_WORDS}|an?)\s+(?:(?:full|business|calendar|working|work)\s+)?(?:minutes?|hours?|days?|weeks?|months?|years?)"
             r"(?:'s)?\s+(?:before|in advance|ahead|prior|beforehand|notice|early)\b", re.I),
         "lead"),
    # "Which option/flag/port/variable ...?": a value only code, a number or an address states.
    Kind("value",
         re.compile(r"\b(?:which|what)(?:'s| is| are)?(?: the)?(?: [\w-]+){0,3}? (?:option|flag|setting|variable|command"
                    r"|field|port|key|header|parameter|argument|endpoint|url|path|directory|version|extension|prefix"
                    r"|suffix|label|classifier|code)s?\b", re.I),
         re.compile(r"`[^`]+`|(?<![\w-])--?[a-zA-Z][\w-]*|\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b|\d|https?://|@|/[\w.-]+"
                    r"|\b[\w-]+\.(?:toml|txt|lock|json|ya?ml|cfg|ini|py|sh|ps1|md|env)\b"), "type", required=True),
    Kind("howto", HOWTO, None, "howto"),
)

# --- sentence cues
CODE = re.compile(  # a mechanism: inline code, a flag, an environment variable, a file name
    r"`[^`]+`|(?<![\w-])--?[a-zA-Z][\w-]*|\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b"
    r"|\b[\w-]+\.(?:toml|txt|lock|json|ya?ml|cfg|ini|py|sh|ps1|md|env)\b"
)
ACTION = re.compile(
    r"\b(?:use|using|run|set|add|pass|specify|configure|install|enable|disable|provide|create|invoke"
    r"|define|declare|include|call|with the|via)\b",
    re.IGNORECASE,
)
POINTER = re.compile(
    # "see" points elsewhere where it opens a sentence or an aside ("See the guide", "(see below)"),
    # not where it is the verb of what the reader does ("to see your user type").
    r"(?:^|[(;:,—–]\s*)see\b|\b(?:please see|see also)\b"
    r"|\bsee (?:the |our )?(?:[\w`'-]+ ){0,4}(?:docs|documentation|guide|page|section|reference)\b"
    r"|\b(?:check out|jump to|refer to|consult|read more|learn more|more (?:details|information)|documented in"
    r"|described in|covered in|discussed in|can be found (?:in|at|on))\b|\b(?:below|above|following)\s*[.:]?$",
    re.IGNORECASE,
)
INTRO = re.compile(
    r"^(?:this|the following|these|in this) (?:guide|page|section|document|tutorial|chapter|example)s?\b",
    re.IGNORECASE,
)
NEGATION = re.compile(r"\b(?:not|no|never|cannot)\b|n't\b", re.IGNORECASE)
# A sentence that describes a failure, and one that gives the step resolving it.
FAILURE = re.compile(
    r"\b(?:error|errors|fails?|failed|failing|failure|cannot|can't|unable|won't|doesn't work|does not work|not found"
    r"|denied|refused|rejected|conflicts?|broken|breaks|mismatch|out of date|outdated|not up-to-date|problem|stuck"
    r"|times? out|invalid|missing|incompatible)\b", re.IGNORECASE)
FIX = re.compile(
    r"^(?:to (?:fix|resolve|avoid|solve|work around|correct|recover|address|prevent)|instead|in (?:this|that|such a) case"
    r"|if so|try|make sure|ensure|you (?:can|should|must|need to|may need to)|use|run|set|add|remove|delete|upgrade"
    r"|update|reinstall|retry|restart|reset|clear|contact|ask|reach out|email|file|open|request)\b"
    r"|\b(?:to (?:fix|resolve|avoid|solve|work around) (?:this|that|it|the)|can be (?:fixed|resolved|avoided))\b",
    re.IGNORECASE)
# A step the reader takes: the sentence opens with a verb in the imperative ("Submit a request to
# be upgraded", "Email the service desk"), what a how-to answer gives after a sentence that says
# only what is possible ("You can check your profile to see your user type").
INSTRUCTION = re.compile(
    r"^(?:please\s+)?(?:submit|request|contact|email|ask|file|fill|complete|send|visit|sign|log|go|navigate"
    r"|click|select|choose|enter|follow|call|reach|apply|register|download|install|upgrade|update|open|join)\b",
    re.IGNORECASE)
STEP = re.compile(r"^(?:then|next|now|finally|after that|afterwards|once (?:that|this) is done),", re.IGNORECASE)


def holds(kind: Kind, text: str, question_stems: set[str] | frozenset[str] = frozenset(),
          unit: str | None = None, strict: bool = True) -> bool:
    """Does `text` hold an answer of this kind that is not only the question's own words again? In
    reply to "By when each week must I submit my hours?", "track your hours each week" echoes the
    question; "by the end of the day on Friday" answers it. Where a number question counts a
    `unit`, the number must be one of that unit ("80 hours", not "November 15th"; `counts`)."""
    if kind.holds is None:
        return False
    if unit is not None and kind.name == "number":
        return counts(text, unit, strict)
    for match in kind.holds.finditer(text):
        words = WORD.findall(match.group(0).lower())
        if not words or any(NUMBER_TOKEN.fullmatch(w) or porter_stem(w) not in question_stems for w in words):
            return True  # a number is never only an echo ("one year" after "one grade higher")
    return False


# What a number question counts: the plural noun after "how many" or "number of" ("How many of
# those hours ...?", "How many permit checks were ...?", "the maximum number of knowledge bases"),
# the one noun after "how much" ("how much notice"), or a unit it names ("in seconds"); money and
# shares are units of their own ("how much money", "what amount", "what percentage").
_COUNTED = re.compile(r"\b(how many|number of|how much|in)\b((?:\s+[A-Za-z][\w-]*){1,5})", re.IGNORECASE)
_IN_UNITS = frozenset("seconds minutes hours days weeks months years bytes megabytes gigabytes characters".split())
_ENDS_NOUN = frozenset(
    "do does did is are was were can could should would will shall may might must i you we they he she it of per a an"
    " the in on for to at by from with have has there that this those these my our your their one each every".split())
_VAGUE = frozenset(porter_stem(w) for w in "time space size storage amount number lot".split())  # no unit
# Units that answer for each other: "How many days ahead?" is answered by "two weeks".
_FAMILIES = (frozenset(porter_stem(w) for w in "seconds minutes hours days weeks months years".split()),
             frozenset(porter_stem(w) for w in "bytes kb mb gb tb kilobytes megabytes gigabytes terabytes".split()))
_MONEY_ASKED = re.compile(r"\bhow much (?:money|funding|budget)\b|\bhow much (?:does|do|will|would) [\w\s]{0,30}\bcost\b"
                          r"|\b(?:dollar )?amount\b", re.IGNORECASE)
_SHARE_ASKED = re.compile(r"\b(?:percentage|percent|share|proportion)\b", re.IGNORECASE)
_PLURAL = re.compile(r"[a-z]{2,}(?<!ss|us|is)s")
MONEY, SHARE = "$", "%"  # the units of money and of shares
_STATES_UNIT = {MONEY: re.compile(r"\$\s?\d|\d\s*(?:dollars|usd)\b", re.IGNORECASE),
                SHARE: re.compile(r"\d\s*%|\bpercent\b", re.IGNORECASE)}


def counted(question: str) -> str | None:
    """The stem of what a number question counts ("reader" for "How many PIV card readers should I
    have?", "second" for "... in seconds?"), `MONEY` or `SHARE`, or None where it names no unit
    ("How long does it take?", "How much of the allowance ...?")."""
    if _SHARE_ASKED.search(question):
        return SHARE
    if _MONEY_ASKED.search(question):
        return MONEY
    for match in _COUNTED.finditer(question):
        cue, words = match.group(1).lower(), match.group(2).lower().split()
        if cue == "in":
            if words[0] in _IN_UNITS:
                return porter_stem(words[0])
            continue
        if cue == "how many" and words[:1] == ["of"]:
            words = words[2:]  # "how many of those hours"
        noun = []
        for word in words:
            if word in _ENDS_NOUN:
                break
            noun.append(word)
        head = next((w for w in noun if _PLURAL.fullmatch(w)), None) if cue != "how much" else None
        if head is None and len(noun) == 1:
            head = noun[0]
        if head is not None:
            unit = porter_stem(head)
            return None if unit in _VAGUE else unit
    return None


# The months' names (subject.py's) and their short forms ("Mar 31", "Sept 2022").
_MONTH_WORDS = frozenset(MONTHS) | {m[:3] for m in MONTHS} | {"sept"}


def _dated(tokens: list[str], i: int) -> bool:
    """Is the number at `i` part of a date ("March 31, 2022", "31 March 2022")? A date says when,
    never how many."""
    before = tokens[i - 1] if i else ""
    if before in _MONTH_WORDS or (i + 1 < len(tokens) and tokens[i + 1] in _MONTH_WORDS):
        return True
    return i >= 2 and tokens[i - 2] in _MONTH_WORDS and bool(NUMBER_TOKEN.fullmatch(before))  # its year


def counts(text: str, unit: str, strict: bool = True) -> bool:
    """Does the text give a number of `unit` (a number, then the unit within three words: "a maximum
    of 80 hours", "two readers"; or the unit right before it: "port 8000"; an amount of money, a
    percentage)? A row of figures ("Kentucky 264,140 12,155 ...") has its units in its header:
    where numbers are most of its words, it gives numbers of any unit. Not `strict`, a number
    followed by no word of its own ("the county population was 9,984.") may be of the unit too; a
    number of another unit ("3 times" for "how many seconds") or a date's ("through March 31, 2022"
    for "how many options") is not."""
    if unit in _STATES_UNIT:
        return bool(_STATES_UNIT[unit].search(text))
    units = next((family for family in _FAMILIES if unit in family), {unit})
    tokens = WORD.findall(text.lower())
    numbers = [i for i, token in enumerate(tokens) if NUMBER_TOKEN.fullmatch(token)]
    if tokens and len(numbers) * 2 >= len(tokens):
        return True
    for i in numbers:
        if _dated(tokens, i):
            continue
        if units & {porter_stem(t) for t in tokens[max(0, i - 1):i + 4]}:
            return True
        after = tokens[i + 1] if i + 1 < len(tokens) else ""
        if not strict and (not after or after in STOPWORDS or NUMBER_TOKEN.fullmatch(after)):
            return True
    return False


def asks_for(question: str) -> set[str]:
    """The kinds of answer a question asks for: the names of the `KINDS` rows whose pattern it matches."""
    return {kind.name for kind in KINDS if kind.asks.search(question)}


def is_howto(question: str) -> bool:
    return bool(HOWTO.search(question))
