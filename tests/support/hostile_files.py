"""Hostile files, made when a test (or benchmarks.load) needs them: nothing big is committed.

Each maker returns bytes small enough to upload; what they expand to is what a parser must bound.
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib

BOMB_TEXT = b"BT /F1 12 Tf 72 700 Td (bomb) Tj ET\n"
_BLOCK = BOMB_TEXT * ((1 << 20) // len(BOMB_TEXT))


def deflate_repeated(block: bytes, copies: int) -> bytes:
    """A zlib stream of `copies` times `block`, made in time of one block: after a full flush a
    deflate stream no longer refers to what came before, so the same block compresses to the same
    bytes each time; the checksum is computed over the whole, as a reader checks it."""
    compressor = zlib.compressobj(9)
    first = compressor.compress(block) + compressor.flush(zlib.Z_FULL_FLUSH)  # with the zlib header
    again = compressor.compress(block) + compressor.flush(zlib.Z_FULL_FLUSH)
    checksum = 1
    for _ in range(copies):
        checksum = zlib.adler32(block, checksum)
    return first + again * (copies - 1) + b"\x03\x00" + struct.pack(">I", checksum)  # an empty final block


def pdf(objects: list[bytes]) -> bytes:
    """A PDF of these objects (1 0 obj is the catalog), with a correct cross-reference table."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def page_pdf(content: bytes, extra: list[bytes] = (), filtered: bool = True) -> bytes:
    """One page drawing `content` (a content stream, FlateDecode-compressed unless `filtered` is false) in Helvetica."""
    stream = (b"<< /Length %d /Filter /FlateDecode >>" if filtered else b"<< /Length %d >>") % len(content)
    return pdf([
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 5 0 R >> >> "
        b"/Contents 4 0 R >>",
        stream + b"\nstream\n" + content + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        *extra,
    ])


def pdf_flate_bomb(inflated_mib: int = 1024) -> bytes:
    """One page whose content stream (`BT ... (bomb) Tj ET` repeated) inflates to `inflated_mib` MiB
    (1 GiB: a ~1 MB file)."""
    return page_pdf(deflate_repeated(_BLOCK, inflated_mib))


def pdf_many_objects(count: int = 300_000) -> bytes:
    """A readable page, and `count` more objects in an array the page's resources point at."""
    content = b"BT /F1 12 Tf 72 700 Td (many objects) Tj ET"
    refs = b" ".join(b"%d 0 R" % n for n in range(7, 7 + count))
    extra = [b"[" + refs + b"]"] + [b"<< /N %d >>" % n for n in range(count)]
    return page_pdf(content, extra, filtered=False)


def pdf_deep_nesting(depth: int = 200_000) -> bytes:
    """An object of arrays nested `depth` deep, reachable from the page."""
    deep = b"[" * depth + b"]" * depth
    content = b"BT /F1 12 Tf 72 700 Td (deep) Tj ET"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R /Deep 6 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 5 0 R >> >> "
        b"/Contents 4 0 R >>",
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        deep,
    ]
    return pdf(objects)


_CONTENT_TYPES = (
    b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    b'<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    b'<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    b'<Default Extension="xml" ContentType="application/xml"/>'
    b'<Override PartName="/word/document.xml" '
    b'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>'
)
_RELS = (
    b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    b'<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    b'<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
    b'officeDocument" Target="word/document.xml"/></Relationships>'
)
_W = b'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'


def docx(body_xml: bytes | None = None, *, document: bytes | None = None) -> bytes:
    """A minimal Word package around `body_xml` (the children of w:body), or a whole document.xml."""
    if document is None:
        document = b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document ' + _W + b"><w:body>" \
            + (body_xml or b"") + b"</w:body></w:document>"
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as package:
        package.writestr("[Content_Types].xml", _CONTENT_TYPES)
        package.writestr("_rels/.rels", _RELS)
        package.writestr("word/document.xml", document)
    return out.getvalue()


def docx_paragraphs(count: int) -> bytes:
    """`count` one-word paragraphs (20,000: a 2,857-byte file in the issue; millions stay small)."""
    return docx(b"<w:p><w:r><w:t>x</w:t></w:r></w:p>" * count)


def docx_deep_nesting(depth: int = 100_000) -> bytes:
    """Elements nested `depth` deep inside one paragraph."""
    return docx(b"<w:p>" + b"<w:r>" * depth + b"</w:r>" * depth + b"</w:p>")


def docx_zip_bomb(expanded_mib: int = 1024) -> bytes:
    """A package whose one extra member expands to `expanded_mib` MiB of zeros."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as package:
        package.writestr("[Content_Types].xml", _CONTENT_TYPES)
        package.writestr("_rels/.rels", _RELS)
        package.writestr("word/document.xml", docx_document(b"<w:p><w:r><w:t>bomb</w:t></w:r></w:p>"))
        with package.open("word/media/zeros.bin", "w", force_zip64=True) as member:
            zeros = bytes(1 << 20)
            for _ in range(expanded_mib):
                member.write(zeros)
    return out.getvalue()


def docx_document(body_xml: bytes) -> bytes:
    return b'<?xml version="1.0" encoding="UTF-8"?><w:document ' + _W + b"><w:body>" + body_xml + b"</w:body></w:document>"


def html_deep_nesting(depth: int = 200_000) -> bytes:
    return b"<html><body>" + b"<div>" * depth + b"deep" + b"</div>" * depth + b"</body></html>"


def html_many_attributes(count: int = 500_000) -> bytes:
    attributes = b" ".join(b'a%d="%d"' % (n, n) for n in range(count))
    return b"<html><body><p " + attributes + b">many attributes</p></body></html>"


def html_entities() -> bytes:
    """A DOCTYPE with an internal subset of nested entities (billion laughs), used in the body."""
    subset = b'<!ENTITY a0 "lol">' + b"".join(
        b'<!ENTITY a%d "%s">' % (n, b"&a%d;" % (n - 1) * 10) for n in range(1, 10))
    return b"<!DOCTYPE html [" + subset + b"]><html><body><p>&a9; entities</p></body></html>"
