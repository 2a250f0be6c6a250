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

_NUMBER_WORDS = r"(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|hundred|half|twice|once)"

# A how-to question: "How do I ...?", "Can I ...?", "What's the best way ...?", "I want to ...".
HOWTO = re.compile(
    r"^\s*(?:how\b(?! (?:many|much|long|often|far|big|large|old|soon|quickly)\b)|can (?:i|you|we)\b|is (?:there|it possible)\b|what(?:'s| is) the (?:\w+ )?way\b"
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
         re.compile(rf"\d|\b{_NUMBER_WORDS}\b|\b(?:no|any|unlimited|dozen|several)\s+(?:limit|maximum|cap)\b"
                    r"|\b(?:an?|few|several)\s+(?:seconds?|minutes?|hours?|days?|weeks?|months?|years?)\b"
                    r"|\b(?:daily|weekly|monthly|annually|yearly|hourly)\b", re.I),
         "type", required=True, in_code=False),
    Kind("time",
         re.compile(r"\b(?:when|how soon|how quickly|what time|which day|what day|weekday|deadline|by when)\b", re.I),
         re.compile(
             r"\d|\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|february|march|april|may|june"
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
STEP = re.compile(r"^(?:then|next|now|finally|after that|afterwards|once (?:that|this) is done),", re.IGNORECASE)


def asks_for(question: str) -> set[str]:
    """The kinds of answer a question asks for: the names of the `KINDS` rows whose pattern it matches."""
    return {kind.name for kind in KINDS if kind.asks.search(question)}


def is_howto(question: str) -> bool:
    return bool(HOWTO.search(question))
