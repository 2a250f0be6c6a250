"""Source code and configuration files: the file's lines as fenced code under its name, split at
top-level definitions, never cleaned as prose.

`LANGUAGES` is the one list of the code and config suffixes ingestion reads (the folder walk and
every source take it through `supported_suffixes`), each with the language recorded in the
document's metadata (`language`) and on its fences. The body is the file name as the title heading
(in a code span, so `__init__.py` stays itself), then the file's lines in fenced blocks. Where a
language has a cheap split (`_DEFINITIONS`: a line at column 0 that starts a def/class/func/fn, a
YAML top-level key, a TOML/INI section), each such line starts a section headed `## def name`, with
the decorators and comment lines just above it, so the chunker's heading-aware split
(rag/ingest/chunk.py) lands on definitions. The lines themselves are never touched: no template
tags stripped, no white space tidied, no escaping inside a fence (its backtick run is longer than
any inside), so taking out the headings and fence lines the body adds gives back the file, byte for
byte (`source_of` does it, and the tests check it).

Files that look like secrets (`secret_reason`: .env files, private keys, keystores,
credentials.json, and any text holding a PEM private key) are never ingested: a folder walk skips
them with the reason, and a file of a read suffix that holds a key is refused here. The key is
looked for in one pass over the lines (`holds_private_key`), so its cost grows with the bytes alone:
it runs in the serving process (an upload, a folder or Git sync), where a check quadratic in the
lines held every request for a minute (issue 49). Bounds: the characters of the file and the length
of a line (a minified or generated file is refused).
"""

from __future__ import annotations

import re
from pathlib import PurePath

from rag.ingest.formats import UnreadableFile, too_complex
from rag.ingest.formats.markdown import escape_text
from rag.ingest.parse import ParsedDocument

MAX_CHARACTERS = 2_000_000
MAX_LINE = 20_000

# suffix -> language (the name Markdown fences and GitHub use). .jsonl is not here: a JSONL file is
# data (corpus records), not configuration.
LANGUAGES: dict[str, str] = {
    ".py": "python", ".pyi": "python", ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript",
    ".jsx": "jsx", ".ts": "typescript", ".tsx": "tsx", ".go": "go", ".rs": "rust", ".java": "java",
    ".kt": "kotlin", ".kts": "kotlin", ".scala": "scala", ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp",
    ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp", ".cs": "csharp", ".rb": "ruby", ".php": "php", ".swift": "swift",
    ".sh": "bash", ".bash": "bash", ".zsh": "zsh", ".ps1": "powershell", ".sql": "sql", ".r": "r", ".lua": "lua",
    ".pl": "perl", ".dart": "dart", ".ex": "elixir", ".exs": "elixir", ".hs": "haskell", ".jl": "julia",
    ".css": "css", ".scss": "scss", ".graphql": "graphql", ".proto": "protobuf", ".tf": "hcl", ".hcl": "hcl",
    ".yaml": "yaml", ".yml": "yaml", ".json": "json", ".toml": "toml", ".ini": "ini", ".cfg": "ini",
    ".conf": "ini", ".properties": "properties", ".xml": "xml", ".gradle": "groovy", ".vue": "vue",
    ".svelte": "svelte",
}

_C_LIKE = r"//|/\*|[ \t]*\*|@"  # comment lines and annotations kept with the definition below them


def _rule(modifiers: str, kinds: str, attached: str, name: str = r"\w+", between: str = "") -> tuple[re.Pattern[str], str]:
    """A line at column 0 that starts a definition: modifiers, then its kind and its name."""
    lead = f"(?:(?:{modifiers})[ \t]+)*" if modifiers else ""
    return re.compile(f"{lead}(?P<kind>{kinds})[ \t]+{between}(?P<name>{name})"), attached


# language -> (a line starting a top-level definition, with groups "kind" and "name"; the lines
# just above it that belong to it: comments, decorators)
_DEFINITIONS: dict[str, tuple[re.Pattern[str], str]] = {
    "python": _rule("async", "def|class", "#|@"),
    "javascript": _rule("export|default|async", r"function\*?|class", _C_LIKE, r"[\w$]+"),
    "typescript": _rule("export|default|declare|abstract|async", r"function\*?|class|interface|enum|type", _C_LIKE,
                        r"[\w$]+"),
    "go": _rule("", "func|type", "//", between=r"(?:\([^)]*\)[ \t]*)?"),
    "rust": _rule(r"pub(?:\([^)]*\))?|async|unsafe", "fn|struct|enum|trait|impl|mod", r"//|#\[", r"[\w:]+",
                  r"(?:<[^>]*>[ \t]*)?"),
    "java": _rule("public|protected|private|abstract|final|sealed|static|strictfp",
                  "class|interface|enum|record|@interface", _C_LIKE),
    "kotlin": _rule("public|private|internal|abstract|open|sealed|data|inline|suspend|enum",
                    "class|interface|object|fun", _C_LIKE),
    "ruby": _rule("", "def|class|module", "#", r"[\w:.?!]+"),
    "php": _rule("abstract|final", "function|class|interface|trait|enum", _C_LIKE + "|#"),
    "bash": (re.compile(r"(?:(?P<kind>function)[ \t]+)?(?P<name>[A-Za-z_][\w-]*)[ \t]*\(\)"), "#"),
    "sql": (re.compile(r"(?i:create|alter)[ \t]+(?i:or[ \t]+replace[ \t]+)?(?P<kind>(?i:table|view|function|procedure|"
                       r"index|trigger|type|schema))[ \t]+(?i:if[ \t]+not[ \t]+exists[ \t]+)?(?P<name>[\w.\"`]+)"), "--"),
    "yaml": (re.compile(r"(?P<name>[A-Za-z_][\w.-]*)[ \t]*:(?:[ \t]|$)"), "#"),
    "toml": (re.compile(r"(?P<name>\[\[?[^\]\n]+\]\]?)"), "#"),
    "ini": (re.compile(r"(?P<name>\[[^\]\n]+\])"), "[#;]"),
}
for _alias, _same in (("jsx", "javascript"), ("tsx", "typescript"), ("zsh", "bash"), ("properties", "ini")):
    _DEFINITIONS[_alias] = _DEFINITIONS[_same]

_BACKTICKS = re.compile(r"`{3,}")
_HEADING_LINE = re.compile(r"#{1,6} .*")
# A PEM private key, read line by line (`holds_private_key`): a line ending in its header, then lines of
# header fields or blank lines, then a line of 40 or more base64 characters (the key's body).
_KEY_HEADER = b"-----BEGIN "
_KEY_HEADER_REST = re.compile(rb"(?:[A-Z0-9]+ )*PRIVATE KEY-----")
_KEY_FIELD_LINE = re.compile(rb"[A-Za-z0-9+/=:, -]*")
_KEY_BODY_LINE = re.compile(rb"[ \t]*[A-Za-z0-9+/=]{40,}")
_SECRET_NAMES = {"id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", "credentials.json", "client_secret.json",
                 ".netrc", ".pgpass", ".htpasswd", ".git-credentials", "secrets.json", "secrets.yaml", "secrets.yml"}
_SECRET_SUFFIXES = {".pem", ".key", ".p12", ".pfx", ".jks", ".keystore", ".env", ".ppk", ".asc", ".gpg"}
SECRET_FILE = "looks like a secret (a key, credentials or an environment file): never ingested"
SECRET_CONTENT = "holds a private key: files with secrets are never ingested"


def language_of(filename: str) -> str | None:
    """The language of a code or config file by its suffix, None for any other file."""
    return LANGUAGES.get(PurePath(filename).suffix.lower())


def secret_reason(filename: str, data: bytes | None = None) -> str | None:
    """Why a file is never ingested, by its name (and its bytes, when given), else None."""
    name = PurePath(filename).name.lower()
    if name in _SECRET_NAMES or name == ".env" or name.startswith(".env.") or PurePath(name).suffix in _SECRET_SUFFIXES:
        return SECRET_FILE
    if data is not None and holds_private_key(data):
        return SECRET_CONTENT
    return None


def _ends_in_key_header(line: bytes) -> bool:
    start = line.rfind(_KEY_HEADER)  # the header's words hold no "-": only the last one can end the line
    return start >= 0 and _KEY_HEADER_REST.fullmatch(line, start + len(_KEY_HEADER)) is not None


def holds_private_key(data: bytes) -> bool:
    """Whether `data` holds a PEM private key: one pass over its lines, each read a bounded number of
    times (a key's header arms the scan, a line that is no part of a key disarms it), so the cost
    grows with the bytes alone, whatever the number of headers (issue 49: a regular expression that
    rescanned the lines after each header took a minute for 12,000 header lines)."""
    first = data.find(b"PRIVATE KEY-----")
    if first < 0:
        return False
    armed = False
    lines = data[data.rfind(b"\n", 0, first) + 1:].split(b"\n")
    for line in lines[:-1]:  # the last piece has no line end: neither a header nor a key's body line
        line = line[:-1] if line.endswith(b"\r") else line
        if armed:
            if _KEY_BODY_LINE.fullmatch(line):
                return True
            armed = _KEY_FIELD_LINE.fullmatch(line) is not None
        if line.endswith(b"PRIVATE KEY-----") and _ends_in_key_header(line):
            armed = True
    return False


def _fence(code: str, language: str) -> str:
    """`code` (whole lines, each with its own line end) fenced byte for byte."""
    longest = max((len(run) for run in _BACKTICKS.findall(code)), default=2)
    fence = "`" * max(3, longest + 1)
    end = "" if code.endswith("\n") else "\n"
    return f"{fence}{language}\n{code}{end}{fence}"


def _code_span(text: str) -> str:
    ticks = "``" if "`" in text else "`"
    return f"{ticks} {text} {ticks}" if ticks == "``" else f"`{text}`"


def _starts(lines: list[str], language: str) -> list[tuple[int, str]]:
    """(line index, heading) of each section: where a top-level definition begins, moved up over
    the decorators and comments just above it."""
    pattern, comment = _DEFINITIONS.get(language, (None, ""))
    if pattern is None:
        return []
    attached = re.compile(comment) if comment else None
    starts: list[tuple[int, str]] = []
    for index, line in enumerate(lines):
        found = pattern.match(line)
        if not found:
            continue
        kind = (found.groupdict().get("kind") or "").split(" ")[0]
        name = found.group("name")
        heading = f"{kind} {_code_span(name)}" if kind else _code_span(name)
        first = index
        while attached and first > 0 and first - 1 > (starts[-1][0] if starts else -1) \
                and attached.match(lines[first - 1]):
            first -= 1
        starts.append((first, heading))
    return starts


def _sections(text: str, language: str) -> list[tuple[str, str]]:
    """(heading or "", the lines) of each section, in order: the lines joined are the text."""
    lines = text.splitlines(keepends=True)
    starts = _starts(lines, language)
    if not starts:
        return [("", text)]
    sections: list[tuple[str, str]] = []
    if starts[0][0] > 0:
        sections.append(("", "".join(lines[:starts[0][0]])))
    for (first, heading), following in zip(starts, [s[0] for s in starts[1:]] + [len(lines)]):
        sections.append((heading, "".join(lines[first:following])))
    return sections


def parse_code(data: bytes, filename: str, text: str) -> ParsedDocument:
    """A code or config file (`text`, its bytes decoded) as a Markdown body of fenced code."""
    name = PurePath(filename).name
    language = language_of(name) or ""
    if secret_reason(name, data) is not None:
        raise UnreadableFile(SECRET_CONTENT)
    if len(text) > MAX_CHARACTERS:
        raise too_complex("characters", f"more than {MAX_CHARACTERS} characters of code")
    if any(len(line) > MAX_LINE for line in text.splitlines()):
        raise too_complex("line length", f"a line of more than {MAX_LINE} characters (minified or generated code?)")
    if not text.strip():
        raise UnreadableFile("an empty file")
    parts = [f"# {escape_text(_code_span(name))}"]
    for heading, code in _sections(text, language):
        if heading:
            parts.append(f"## {escape_text(heading)}")
        parts.append(_fence(code, language))
    return ParsedDocument(title=name, body="\n\n".join(parts) + "\n", metadata={"language": language})


def source_of(body: str) -> str:
    """The file's text back from a body `parse_code` made (headings and fences taken out)."""
    code: list[str] = []
    inside = ""
    for line in body.splitlines(keepends=True):
        bare = line.rstrip("\r\n")
        if inside:
            if bare == inside:
                inside = ""
            else:
                code.append(line)
        elif bare.startswith("```"):
            inside = "`" * (len(bare) - len(bare.lstrip("`")))
        elif bare and not _HEADING_LINE.fullmatch(bare):
            raise ValueError(f"not a code body: {bare[:60]!r}")
    return "".join(code)
