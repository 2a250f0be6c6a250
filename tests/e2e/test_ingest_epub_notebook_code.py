"""EPUB books, Jupyter notebooks, and source code and config files: what each parser reads out of
real files (tests/data/epub, tests/data/notebook, tests/data/code: see the README beside each),
every kind of bad file refused with its reason, a zip bomb in an EPUB refused as a Word one is,
secret-looking files skipped by a folder walk with the reason, and questions answered from the
book, the notebook and the code with the right document cited."""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import tarfile
import zipfile
from pathlib import Path

import pytest
from sqlalchemy import select

from rag.ingest.chunk import Chunker
from rag.ingest.formats import FileTooComplex, UnreadableFile, parse_here, supported_suffixes
from rag.ingest.formats import code as code_format
from rag.ingest.formats import epub as epub_format
from rag.ingest.formats import notebook as notebook_format
from rag.ingest.read import parse_bytes
from rag.store.models import Node

from ..support.ingested import ingested_folder

DATA = Path(__file__).resolve().parents[1] / "data"
BOOK = DATA / "epub" / "jekyll-and-hyde.epub"
NOTEBOOK = DATA / "notebook" / "running-code.ipynb"
REPOSITORY = DATA / "code" / "datasette-block-robots.tar.gz"
CHAPTERS = ["Imprint", "Story of the Door", "Search for Mr. Hyde", "Dr. Jekyll Was Quite at Ease",
            "The Carew Murder Case", "Incident of the Letter", "Remarkable Incident of Dr. Lanyon",
            "Incident at the Window", "The Last Night", "Dr. Lanyon’s Narrative",
            "Henry Jekyll’s Full Statement of the Case", "Colophon", "Uncopyright"]


def refusal(data: bytes, name: str, parse=parse_bytes) -> str:
    with pytest.raises(UnreadableFile) as caught:
        parse(data, name)
    return str(caught.value)


def unpack_repository(into: Path) -> Path:
    with tarfile.open(REPOSITORY) as archive:
        archive.extractall(into, filter="data")
    return into / "datasette-block-robots"


def private_key() -> str:
    """A PEM block shaped like an RSA key (random bytes: the detector reads the shape, not the maths)."""
    body = base64.b64encode(os.urandom(600)).decode()
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    return "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END RSA PRIVATE KEY-----\n"


def epub(chapters: dict[str, str], spine: list[str], *, title: str = "A Field Guide",
         extra: dict[str, bytes] | None = None) -> bytes:
    """A minimal EPUB 3: `chapters` (name -> XHTML body) listed in the manifest in their order,
    read in `spine` order."""
    manifest = "".join(f'<item id="{n}" href="text/{n}.xhtml" media-type="application/xhtml+xml"/>' for n in chapters)
    itemrefs = "".join(f'<itemref idref="{n}"/>' for n in spine)
    opf = (f'<?xml version="1.0" encoding="utf-8"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0">'
           f'<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>{title}</dc:title></metadata>'
           f'<manifest>{manifest}</manifest><spine>{itemrefs}</spine></package>')
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as package:
        package.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        package.writestr("META-INF/container.xml",
                         '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:'
                         'container"><rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/'
                         'oebps-package+xml"/></rootfiles></container>')
        package.writestr("OEBPS/content.opf", opf)
        for name, body in chapters.items():
            package.writestr(f"OEBPS/text/{name}.xhtml",
                             '<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/1999/xhtml">'
                             f"<head><title>{name.title()}</title></head><body>{body}</body></html>")
        for member, data in (extra or {}).items():
            package.writestr(member, data)
    return out.getvalue()


# ----- EPUB -----

def test_epub_chapters_in_spine_order_under_the_book_title() -> None:
    parsed = parse_bytes(BOOK.read_bytes(), "jekyll-and-hyde.epub")
    assert parsed.title == "The Strange Case of Dr. Jekyll and Mr. Hyde"  # the OPF's dc:title
    lines = parsed.body.splitlines()
    assert lines[0] == "# The Strange Case of Dr. Jekyll and Mr. Hyde"
    assert [line for line in lines if line.startswith("# ")] == [lines[0]]  # the title page's h1 not repeated
    assert [line[3:] for line in lines if line.startswith("## ")] == CHAPTERS  # each chapter's h2, in the spine's order
    assert lines[2] == "By Robert Louis Stevenson."  # the title page's text, under the title
    door = parsed.body.index("## Story of the Door")
    assert parsed.body.index("Mr. Utterson the lawyer was a man of a rugged countenance that was never lighted "
                             "by a smile") > door
    assert "<" not in parsed.body and "svg" not in parsed.body.lower()  # no markup, no images, no CSS


def test_epub_headings_demoted_a_chapter_without_one_named_by_its_title() -> None:
    data = epub({"one": "<h1>Birds</h1><p>Wrens nest low.</p><h3>Owls</h3><p>Owls hunt at night.</p>",
                 "two": "<p>A chapter with no heading; its <b>title</b> names it.</p>",
                 "three": "<section><header><h2>Trees</h2></header><p>Oaks &amp; ashes.</p></section>"},
                spine=["three", "one", "two"])
    parsed = parse_here(data, "guide.epub")
    assert parsed.body == (
        "# A Field Guide\n\n## Trees\n\nOaks & ashes.\n\n## Birds\n\nWrens nest low.\n\n#### Owls\n\n"
        "Owls hunt at night.\n\n## Two\n\nA chapter with no heading; its title names it.\n")


def test_epub_refusals_name_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    book = BOOK.read_bytes()
    assert refusal(book[: len(book) // 2], "cut.epub") == "a damaged or truncated book in EPUB format"
    assert refusal(NOTEBOOK.read_bytes(), "nb.epub") == (
        "not a book in EPUB format (its content does not match the .epub extension)")
    chapter = {"one": "<p>Text.</p>"}
    drm = ('<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" xmlns:enc="http://www.w3.org/2001/'
           '04/xmlenc#"><enc:EncryptedData><enc:EncryptionMethod Algorithm="http://www.w3.org/2001/04/xmlenc#aes128-'
           'cbc"/><enc:CipherData><enc:CipherReference URI="OEBPS/text/one.xhtml"/></enc:CipherData>'
           '</enc:EncryptedData></encryption>')
    assert refusal(epub(chapter, ["one"], extra={"META-INF/encryption.xml": drm.encode()}), "drm.epub") == (
        "an EPUB book protected by DRM (its chapters are encrypted); it cannot be read without the bookseller's key")
    fonts = drm.replace("http://www.w3.org/2001/04/xmlenc#aes128-cbc", "http://www.idpf.org/2008/embedding") \
        .replace("OEBPS/text/one.xhtml", "OEBPS/fonts/serif.otf")
    readable = parse_here(epub(chapter, ["one"], extra={"META-INF/encryption.xml": fonts.encode()}), "f.epub")
    assert readable.body == "# A Field Guide\n\n## One\n\nText.\n"  # obfuscated fonts are no DRM
    broken = epub(chapter, ["one"]).replace(b"OEBPS/content.opf", b"OEBPS/missing.opf")
    assert refusal(broken, "broken.epub", parse_here) == (
        "a damaged EPUB book (it names 'OEBPS/content.opf', which it does not hold)")
    empty = epub({"one": "<p> </p>"}, ["one"])
    assert refusal(empty, "empty.epub", parse_here) == "an EPUB book with no text in its chapters"
    monkeypatch.setattr(epub_format, "MAX_CHARACTERS", 10_000)
    with pytest.raises(FileTooComplex, match=r"\(characters: more than 10000 characters of text\)"):
        parse_here(book, "long.epub")
    monkeypatch.setattr(epub_format, "MAX_CHAPTERS", 2)
    with pytest.raises(FileTooComplex, match=r"\(chapters: more than 2\)"):
        parse_here(epub({"a": "<p>a</p>", "b": "<p>b</p>", "c": "<p>c</p>"}, ["a", "b", "c"]), "many.epub")


def test_a_zip_bomb_in_an_epub_is_refused_before_it_is_expanded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(epub_format, "MAX_EXPANDED", 5_000_000)
    data = epub({"one": "<p>bomb</p>"}, ["one"], extra={"OEBPS/images/padding.bin": b"\0" * 20_000_000})
    assert len(data) < 100_000  # 20 MB of zeros pack into ~20 kB
    assert refusal(data, "bomb.epub", parse_here) == (
        "a book in EPUB format that expands to more than 5 MB (a decompression bomb?); refused")


def test_an_epub_bomb_stops_in_the_parse_worker_at_the_default_bound() -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(epub({"one": "<p>x</p>"}, ["one"]))) as source, \
            zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as package:
        for item in source.infolist():
            package.writestr(item, source.read(item))
        with package.open("OEBPS/images/zeros.bin", "w", force_zip64=True) as member:
            for _ in range(256):  # 256 MiB, past the 200 MB bound
                member.write(bytes(1 << 20))
    assert len(out.getvalue()) < 1_000_000
    assert refusal(out.getvalue(), "bomb.epub") == (
        "a book in EPUB format that expands to more than 200 MB (a decompression bomb?); refused")


# ----- Jupyter notebooks -----

def test_notebook_markdown_as_prose_code_fenced_outputs_left_out() -> None:
    parsed = parse_bytes(NOTEBOOK.read_bytes(), "running-code.ipynb")
    assert parsed.title == "Running Code" and parsed.metadata == {"language": "python"}
    lines = parsed.body.splitlines()
    assert lines[0] == "# Running Code" and "## Managing the Kernel" in lines
    assert "Code is run in a separate process called the Kernel.  The Kernel can be interrupted or restarted." \
        in parsed.body
    assert "```python\nimport time\n\ntime.sleep(10)\n```" in parsed.body
    notebook = json.loads(NOTEBOOK.read_text())
    code = ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]
    assert parsed.body.count("```python\n") == len([c for c in code if c.strip()])
    assert all(f"```python\n{c.strip(chr(10))}\n```" in parsed.body for c in code if c.strip())  # byte for byte
    assert "9223372036854775807" not in parsed.body  # a cell's printed output
    assert "execution_count" not in parsed.body and "output_type" not in parsed.body


def test_notebook_v3_fence_longer_than_the_code_title_from_the_file_name() -> None:
    v3 = {"nbformat": 3, "metadata": {"name": "old"}, "worksheets": [{"cells": [
        {"cell_type": "heading", "level": 2, "source": ["Setup"]},
        {"cell_type": "code", "language": "python", "input": ["doc = '''\n", "```\n", "'''"], "outputs": []},
        {"cell_type": "markdown", "source": "Then run it."},
        {"cell_type": "raw", "source": "raw text left out"}]}]}
    parsed = parse_here(json.dumps(v3).encode(), "old_analysis.ipynb", "Old analysis")
    assert parsed.title == "Old analysis"  # no level-1 heading: the file's name
    assert parsed.body == "# Old analysis\n\n## Setup\n\n````python\ndoc = '''\n```\n'''\n````\n\nThen run it.\n"


def test_bad_notebooks_are_refused_with_their_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    assert refusal(b'{"cells": [', "cut.ipynb").startswith("not a Jupyter notebook (invalid JSON: ")
    assert refusal(b'{"name": "x"}', "x.ipynb") == "not a Jupyter notebook (JSON without cells)"
    assert refusal(b'{"cells": [{"cell_type": "code", "source": 3}]}', "x.ipynb") == (
        "not a Jupyter notebook (a cell's source is not text)")
    assert refusal(b'{"cells": []}', "empty.ipynb") == "a Jupyter notebook with no text or code in its cells"
    with pytest.raises(FileTooComplex, match=r"\(depth: JSON nested too deeply\)"):
        parse_bytes(b'{"cells": ' + b"[" * 200_000 + b"]" * 200_000 + b"}", "deep.ipynb")
    monkeypatch.setattr(notebook_format, "MAX_CELLS", 10)
    with pytest.raises(FileTooComplex, match=r"\(cells: more than 10\)"):
        parse_here(NOTEBOOK.read_bytes(), "running-code.ipynb")


# ----- source code and config -----

def test_code_files_are_fenced_split_at_definitions_and_kept_byte_for_byte(tmp_path: Path) -> None:
    repo = unpack_repository(tmp_path)
    files = sorted(p for p in repo.rglob("*") if p.is_file() and p.suffix in code_format.LANGUAGES)
    assert {p.suffix for p in files} == {".py", ".toml", ".yml"}
    for path in files:
        parsed = parse_bytes(path.read_bytes(), path.name)
        assert parsed.title == path.name
        assert parsed.metadata == {"language": code_format.LANGUAGES[path.suffix]}
        assert code_format.source_of(parsed.body) == path.read_text()  # only headings and fences added
    init = parse_bytes((repo / "datasette_block_robots" / "__init__.py").read_bytes(), "__init__.py")
    assert [line for line in init.body.splitlines() if line.startswith("#")] == [
        "# `__init__.py`", "## def `robots_txt`", "## def `register_routes`", "## def `startup`"]
    assert "## def `register_routes`\n\n```python\n@hookimpl\ndef register_routes():\n" in init.body  # with its decorator
    workflow = parse_bytes((repo / ".github" / "workflows" / "test.yml").read_bytes(), "test.yml")
    assert "${{ matrix.python-version }}" in workflow.body  # no template tag stripped
    assert "## `jobs`" in workflow.body.splitlines()
    specs = Chunker().chunk(init.body)
    startup = next(s for s in specs if "cannot be configured with both disallow" in s.text)
    assert startup.heading_path[-1] == "def startup" and startup.heading_path[0] == "__init__.py"
    assert all(init.body[s.char_start:s.char_end] == s.text for s in specs)
    source = (repo / "datasette_block_robots" / "__init__.py").read_text()
    for spec in specs:  # the code in each chunk is the file's own lines, one run of them
        pieces = [(max(spec.char_start, at), min(spec.char_end, end), origin + max(spec.char_start, at) - at)
                  for at, end, origin in code_lines(init.body) if at < spec.char_end and end > spec.char_start]
        assert all(a[2] + a[1] - a[0] == b[2] for a, b in zip(pieces, pieces[1:]))  # contiguous in the file
        code = "".join(init.body[a:b] for a, b, _ in pieces)
        assert code == source[pieces[0][2]:pieces[0][2] + len(code)]


def code_lines(body: str) -> list[tuple[int, int, int]]:
    """(start, end, offset in the file) of each line of code in a body parse_code made."""
    spans, at, origin, fence = [], 0, 0, ""
    for line in body.splitlines(keepends=True):
        bare = line.rstrip("\n")
        if fence and bare == fence:
            fence = ""
        elif fence:
            spans.append((at, at + len(line), origin))
            origin += len(line)
        elif bare.startswith("```"):
            fence = bare[:len(bare) - len(bare.lstrip("`"))]
        at += len(line)
    return spans


@pytest.mark.parametrize(("name", "code", "headings"), [
    ("server.go", "package main\n\nimport \"fmt\"\n\n// Greeter says hello.\ntype Greeter struct{}\n\n"
     "func (g Greeter) Hello() {\n\tfmt.Println(\"hi\")\n}\n\nfunc main() {\n\tGreeter{}.Hello()\n}\n",
     ["## type `Greeter`", "## func `Hello`", "## func `main`"]),
    ("lib.rs", "use std::fmt;\n\n#[derive(Debug)]\npub struct Point {\n    x: i32,\n}\n\n"
     "impl fmt::Display for Point {\n    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {\n"
     "        write!(f, \"{}\", self.x)\n    }\n}\n", ["## struct `Point`", "## impl `fmt::Display`"]),
    ("app.ts", "import x from './x';\n\n/**\n * Adds.\n */\nexport function add(a: number): number {\n"
     "  return a + 1;\n}\n\nexport default class App {}\n", ["## function `add`", "## class `App`"]),
])
def test_definitions_start_sections_in_other_languages(name: str, code: str, headings: list[str]) -> None:
    parsed = parse_here(code.encode(), name)
    assert [line for line in parsed.body.splitlines() if line.startswith("## ")] == headings
    assert code_format.source_of(parsed.body) == code
    first = parsed.body.split(headings[0] + "\n\n", 1)[1].split("\n", 2)[1]
    assert first.startswith(("//", "#[", "/**"))  # the comment or attribute above it goes with it


def test_code_bounds_and_a_private_key_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ".py" in supported_suffixes() and ".jsonl" not in supported_suffixes()
    assert refusal(f"key = '''\n{private_key()}'''\n".encode(), "keys.py") == (
        "holds a private key: files with secrets are never ingested")
    placeholder = b"# Put your key here:\n# -----BEGIN RSA PRIVATE KEY-----\n# ...\n"
    assert parse_here(placeholder, "setup.sh").metadata == {"language": "bash"}  # an example is no key
    with pytest.raises(FileTooComplex, match=r"\(line length: a line of more than 20000 characters"):
        parse_bytes(b"var a=" + b"1," * 15_000 + b"2;\n", "bundle.min.js")
    assert refusal(b"\x00\x01\x02", "data.json") == "a binary file, not text"
    assert refusal(b"\n\n", "empty.yaml") == "an empty file"


# ----- a folder through the service: reported, cited -----

def plant_secrets(repo: Path) -> None:
    """What must never reach an index: an environment file, keys, credentials, a key inside a config."""
    (repo / ".env").write_text("DATABASE_PASSWORD=hunter2\n")
    (repo / "id_rsa").write_text(private_key())
    (repo / "server.pem").write_text(private_key())
    (repo / "credentials.json").write_text('{"client_secret": "s3cr3t"}\n')
    (repo / "deploy").mkdir()
    (repo / "deploy" / "settings.yaml").write_text(f"tls:\n  key: |\n{private_key()}")


@pytest.fixture(scope="module")
def shelf(tmp_path_factory: pytest.TempPathFactory):
    """A folder with the book, the notebook, the code repository, secret-looking files and bad files,
    ingested once into a SQLite home."""
    root = tmp_path_factory.mktemp("shelf")
    files = root / "files"
    repo = unpack_repository(files)
    (files / "books").mkdir()
    shutil.copy(BOOK, files / "books" / "jekyll-and-hyde.epub")
    (files / "notebooks").mkdir()
    shutil.copy(NOTEBOOK, files / "notebooks" / "running-code.ipynb")
    book = BOOK.read_bytes()
    (files / "books" / "truncated.epub").write_bytes(book[: len(book) // 3])
    (files / "notebooks" / "broken.ipynb").write_text('{"cells": [{"cell_type": "markdown", "source": "x"')
    plant_secrets(repo)
    with ingested_folder(root / "home", files) as shelf:
        yield shelf


def test_the_folder_reads_each_format_skips_secrets_and_names_bad_files(shelf) -> None:
    svc, admin, report = shelf
    code = "datasette-block-robots/"
    assert sorted(report.added) == [
        "books/jekyll-and-hyde.epub", f"{code}README.md", f"{code}datasette_block_robots/__init__.py",
        f"{code}datasette_block_robots/hookspecs.py", f"{code}pyproject.toml", f"{code}tests/test_block_robots.py",
        "notebooks/running-code.ipynb"]
    skipped = dict(report.skipped)
    secret = "looks like a secret (a key, credentials or an environment file): never ingested"
    for name in (".env", "id_rsa", "server.pem", "credentials.json"):
        assert skipped[f"{code}{name}"] == secret
    assert skipped[f"{code}deploy/settings.yaml"] == "holds a private key: files with secrets are never ingested"
    failed = dict(report.failed)
    assert sorted(failed) == ["books/truncated.epub", "notebooks/broken.ipynb"]
    assert failed["books/truncated.epub"] == "a damaged or truncated book in EPUB format"
    assert failed["notebooks/broken.ipynb"].startswith("not a Jupyter notebook (invalid JSON")
    with svc.db.session() as session:  # nothing half-written for a refused or skipped file
        labels = set(session.scalars(select(Node.source_label).where(Node.kind == "document")))
    assert labels == {f"fs:{rel}" for rel in report.added}


@pytest.mark.parametrize(("question", "source", "words"), [
    ("What did Mr. Enfield call the house with the door where Hyde had a key?", "books/jekyll-and-hyde.epub",
     "Black Mail House"),
    ("What does restarting the kernel do to the notebook's state?", "notebooks/running-code.ipynb",
     "The kernel maintains the state of a notebook's computations. You can reset this state by restarting"),
    ("What error does datasette-block-robots give at startup when both disallow and literal are configured?",
     "datasette-block-robots/datasette_block_robots/__init__.py", "cannot be configured with both disallow"),
])
def test_a_question_is_answered_from_the_book_the_notebook_and_the_code(shelf, question, source, words) -> None:
    svc, admin, _ = shelf
    top = svc.search(admin, question, 5).hits[0]
    assert top.source == f"fs:{source}" and words in top.text
    assert svc.get_document(admin, top.node_id).content[top.char_start:top.char_end] == top.text
    answer = svc.ask(admin, question)
    assert answer.sources[0].source == f"fs:{source}" and "[1]" in answer.text
