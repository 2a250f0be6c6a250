"""Office Open XML packages (Word, PowerPoint, Excel): the zip checked before any library opens it.

A .docx, .pptx or .xlsx file is a zip of XML parts, and the zip's headers are the file's own word:
a member that says 1 kB may inflate to gigabytes. So `check_package` decompresses every member in
bounded steps (`_STEP`), counting the bytes as they come, and refuses a package that would expand
past `Package.max_expanded` bytes (a decompression bomb), holds more than `Package.max_members`
members, or lacks the format's main part, before python-docx, python-pptx or openpyxl reads a byte
of it. On the way it counts tags in the members a format names (a `Tally`: a Word document's
paragraphs, a deck's shapes, a workbook's cells), so that a file of millions of small things is
refused in a pass over its bytes rather than after minutes of the library's time. A tag written
with another namespace prefix escapes the count, not the parse worker's bounds of time and memory
(rag/ingest/sandbox.py), nor a format's own count as it reads.

A file saved as Strict Open XML (ISO 29500 Strict: other namespaces, which the libraries do not
read) is refused naming that form. A password-protected Office file is no zip at all: Office encrypts the whole package into an OLE
compound file (an `EncryptedPackage` stream beside the key data), so it is recognised by that
container and refused in words that say so.
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass, field
from typing import Callable

from rag.ingest.formats import UnreadableFile, too_complex

_STEP = 1 << 20
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_ENCRYPTED_STREAM = "EncryptedPackage".encode("utf-16-le")
_OFFICE = {".docx", ".pptx", ".xlsx"}  # the formats Office encrypts into an OLE container
# ISO 29500 Strict's namespaces, which python-docx, python-pptx and openpyxl do not know (they would
# read no text at all): an Office "Strict Open XML" file is refused saying so.
_STRICT = b"http://purl.oclc.org/ooxml/"


@dataclass(frozen=True)
class Package:
    """What a format calls its file ("Word document"), its extension, the part every such file
    has, and its bounds (read by the format at each call: a test may lower them)."""

    kind: str
    suffix: str
    main: str
    max_members: int
    max_expanded: int

    @property
    def a(self) -> str:
        """The kind with its article: "a Word document", "an Excel workbook"."""
        return f"{'an' if self.kind[:1].lower() in 'aeio' else 'a'} {self.kind}"


@dataclass
class Tally:
    """A count of `tags` across the members it is given for: past `limit` the file is refused as
    too complex, naming `bound`. One tally given for several members counts them all together."""

    tags: tuple[bytes, ...]
    limit: int
    bound: str
    counted: int = field(default=0)

    def add(self, window: bytes) -> None:
        self.counted += sum(window.count(tag) for tag in self.tags)
        if self.counted > self.limit:
            raise too_complex(self.bound, f"more than {self.limit}")


def check_package(data: bytes, package: Package,
                  tally_for: Callable[[str], Tally | None] = lambda name: None) -> list[str]:
    """Refuse a file that is no such package, is damaged or encrypted, or would pass a bound; else
    the names of its members. `tally_for(name)` is the tally that member's tags count in, or None."""
    if data.startswith(_OLE_MAGIC) and package.suffix in _OFFICE:
        if _ENCRYPTED_STREAM in data:
            raise UnreadableFile(f"an encrypted (password-protected) {package.kind}; "
                                 "it cannot be read without its password")
        raise UnreadableFile(f"not {package.a} (an older binary Office file with the {package.suffix} "
                             f"extension; save it as {package.suffix} to ingest it)")
    if not data.startswith(b"PK\x03\x04"):
        raise UnreadableFile(f"not {package.a} (its content does not match the {package.suffix} extension)")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
            if len(members) > package.max_members:
                raise UnreadableFile(f"{package.a} of more than {package.max_members} parts")
            names = archive.namelist()
            if package.main not in names:
                raise UnreadableFile(f"not {package.a} (a zip file without {package.main})")
            if package.suffix in _OFFICE:
                with archive.open(package.main) as main:
                    if _STRICT in main.read(4096):  # the root element's namespaces
                        raise UnreadableFile(f"{package.a} saved as Strict Open XML, which this service does not "
                                             f"read; save it as an ordinary {package.suffix} file to ingest it")
            expanded = 0
            for member in members:
                expanded = _expand(archive, member, expanded, package, tally_for(member.filename))
            return names
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, NotImplementedError) as exc:
        if isinstance(exc, UnreadableFile):
            raise
        raise UnreadableFile(f"a damaged or truncated {package.kind}") from None


def _expand(archive: zipfile.ZipFile, member: zipfile.ZipInfo, expanded: int, package: Package,
            tally: Tally | None) -> int:
    """Inflate one member in bounded steps: the bytes expanded so far, with its own; its tags
    counted in `tally` on the way."""
    keep = max((len(tag) for tag in tally.tags), default=1) - 1 if tally else 0
    tail = b""
    with archive.open(member) as stream:
        while chunk := stream.read(_STEP):
            expanded += len(chunk)
            if expanded > package.max_expanded:
                raise UnreadableFile(f"{package.a} that expands to more than "
                                     f"{package.max_expanded // 1_000_000} MB (a decompression bomb?); refused")
            if tally is not None:
                window = tail + chunk  # a tag across two steps is counted once, in the later
                tally.add(window)
                tail = window[-keep:] if keep else b""  # shorter than a tag: none is counted twice
    return expanded
