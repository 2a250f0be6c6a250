"""Every check that reads a file's content in the serving process costs time linear in its bytes
(issue 49: a private-key regular expression took a minute on a 360 KB code file, in the process that
serves every request). Each test builds a hostile corpus at two sizes, N and 4N, and asserts that the
CPU time (time.process_time, so a busy machine does not count) grows about four times, far from the
sixteen of a quadratic cost: a ratio within one run, never a wall-clock limit.
"""

from __future__ import annotations

import time
from typing import Callable

import pytest

from rag.ingest.chunk import Chunker
from rag.ingest.formats import parse_here
from rag.ingest.formats.code import SECRET_CONTENT, holds_private_key, secret_reason
from rag.ingest.parse import first_heading, strip_template_tags
from rag.synthesize.sentences import units

LINEAR = 8.0  # 4x the input: linear ~4, quadratic ~16; room for noise on a shared machine
HEADER = b"-----BEGIN RSA PRIVATE KEY-----\n"
KEY_BODY = b"MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi8b4NPlZVZ7H0wX2yDkLq8Jd1v"


def _cpu(work: Callable[[], object], times: int) -> float:
    start = time.process_time()
    for _ in range(times):
        work()
    return time.process_time() - start


def growth(check: Callable[[object], object], make: Callable[[int], object], n: int) -> float:
    """CPU time of `check` on `make(4 * n)` over its time on `make(n)`: each repeated as often as
    the small one needs to take 0.05 s (so a fast check is measured above the clock's noise), the
    best of three rounds kept."""
    small, large = make(n), make(4 * n)
    check(small)  # imports and caches outside the measure
    times = 1
    while _cpu(lambda: check(small), times) < 0.05 and times < 4096:
        times *= 2
    ratios = []
    for _ in range(3):
        ratios.append(_cpu(lambda: check(large), times) / max(_cpu(lambda: check(small), times), 1e-9))
    return min(ratios)


def test_the_private_key_check_reads_each_line_a_bounded_number_of_times() -> None:
    # 12,000 header lines (the 360 KB file of issue 49) took a minute: each header rescanned the rest.
    ratio = growth(lambda data: secret_reason("notes.py", data), lambda n: b"x = 1\n" + HEADER * n, 1000)
    assert ratio < LINEAR, f"4x the header lines cost {ratio:.1f}x the CPU"
    assert secret_reason("notes.py", HEADER * 12_000) is None  # headers alone are no key


def test_the_code_parser_a_folder_and_a_git_source_call_is_linear() -> None:
    # What an upload, a folder walk and a Git source run in the serving process for a code file.
    def code(n: int) -> bytes:
        return HEADER * n + b"@decorator\n# c\ndef f():\n    pass\n" * n

    ratio = growth(lambda data: parse_here(data, "hostile.py"), code, 500)
    assert ratio < LINEAR, f"4x the code cost {ratio:.1f}x the CPU"


@pytest.mark.parametrize("text", ["{% ", "{{ ", "{# ", "{%{{{#"])
def test_unclosed_template_tags_are_stripped_in_linear_time(text: str) -> None:
    ratio = growth(lambda data: parse_here(data, "tags.md"), lambda n: ("a\n\n" + text * n).encode(), 2000)
    assert ratio < LINEAR, f"4x the unclosed tags cost {ratio:.1f}x the CPU"


@pytest.mark.parametrize("name", ["heading.md", "heading.txt"])
def test_a_heading_full_of_blanks_is_read_in_linear_time(name: str) -> None:
    # `#\s+(.+?)\s*#*\s*$` took 21 s of CPU for a heading holding 2,000 spaces (cubic).
    ratio = growth(lambda data: parse_here(data, name), lambda n: b"# a" + b" " * n + b"b\n\ntext\n", 300)
    assert ratio < LINEAR, f"4x the blanks cost {ratio:.1f}x the CPU"


@pytest.mark.parametrize("body", ["# a{}b\n\nsome text under it\n", "# h{}\n\nx\n\n"])
def test_the_chunker_reads_headings_in_linear_time(body: str) -> None:
    chunker = Chunker()

    def make(n: int) -> str:
        return body.format(" " * n) if body.startswith("# a") else body.format("") * (n // 4)

    ratio = growth(chunker.chunk, make, 400)
    assert ratio < LINEAR, f"4x the heading cost {ratio:.1f}x the CPU"


@pytest.mark.parametrize("blank", [" \u2003", "\u2003"])
def test_an_answer_reads_a_heading_full_of_blanks_in_linear_time(blank: str) -> None:
    # At answer time, a retrieved chunk's lines are read for headings (rag/synthesize/sentences.py):
    # 1,000 " \u2003" in one heading took 20 s of CPU in the serving process.
    ratio = growth(units, lambda n: f"# a{blank * n}b\n\nSome text. More text here.\n", 150)
    assert ratio < LINEAR, f"4x the blanks cost {ratio:.1f}x the CPU"


# ----- the same answers as before -----

def test_a_private_key_is_found_wherever_a_file_holds_one() -> None:
    key = HEADER + (KEY_BODY + b"\n") * 3 + b"-----END RSA PRIVATE KEY-----\n"
    assert holds_private_key(b"key = '''\n" + key + b"'''\n")
    assert holds_private_key(key.replace(b"\n", b"\r\n"))
    assert holds_private_key(b"-----BEGIN ENCRYPTED PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n\n" + KEY_BODY + b"\n")
    assert holds_private_key(b"tls:\n  key: |\n    " + key.replace(b"\n", b"\n    "))  # indented in YAML
    assert holds_private_key(HEADER * 5 + KEY_BODY + b"\n")
    assert secret_reason("settings.yaml", key) == SECRET_CONTENT
    assert not holds_private_key(b"# Put your key here:\n# -----BEGIN RSA PRIVATE KEY-----\n# ...\n")
    assert not holds_private_key(HEADER + b"# not base64\n" + KEY_BODY + b"\n")  # broken by a comment
    assert not holds_private_key(HEADER + KEY_BODY)  # no line end after the body
    assert not holds_private_key(b"-----BEGIN RSA PUBLIC KEY-----\n" + KEY_BODY + b"\n")


def test_template_tags_and_first_headings_read_as_before() -> None:
    assert strip_template_tags("a {% if x %}b{% endif %} {{ y }} {# c #}d") == "a b  d"
    assert strip_template_tags("{% open {{ x }} {#") == "{% open  {#"
    assert strip_template_tags("{{{ x }}}") == "}"
    assert first_heading("\n\n#  The title  ##  \ntext") == "The title"
    assert first_heading("## Second level") is None
    assert first_heading("#no space") is None
    assert first_heading("# a ## b #\n") == "a ## b"
    assert [unit.heading for unit in units("## Install it ##\n\nRun the installer. It takes a minute.\n")][:1] == [
        "Install it"]
