"""A certificate's subject as Java's ``X500Principal.getName()`` prints it (RFC 2253), read from
the certificate's DER.

Why from the DER and not from ``ssl``'s decoded subject: the name is an ACL principal, so two
different subjects must never print alike, and printing them alike needs what the decoded form
drops. RFC 2253 escapes the characters that structure a name (``,=+<>#;"\\``, NUL as ``\\00``,
leading and trailing spaces) so that ``CN=admin\\,O=corp`` (one attribute) differs from
``CN=admin,O=corp`` (two); a multi-valued RDN joins its attributes with ``+``, never ``,``; an
attribute without an RFC 2253 keyword prints as its OID and the hex of its DER value (so
``emailAddress`` is ``1.2.840.113549.1.9.1=#16...``), as does a value that is not a string.
RDNs print last first, joined by ``,`` without spaces: ``CN=client,OU=unit,O=corp``.
"""

from __future__ import annotations

__all__ = ["subject_name"]

#: attribute types RFC 2253 names (Java prints these keywords, every other type as its OID)
_KEYWORDS = {"2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O",
             "2.5.4.11": "OU", "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC",
             "0.9.2342.19200300.100.1.1": "UID"}
#: DER string types Java decodes (UTF8String, PrintableString, T61String, IA5String,
#: GeneralString, BMPString) and the charset it decodes each with
_STRINGS = {0x0C: "utf-8", 0x13: "latin-1", 0x14: "latin-1", 0x16: "latin-1", 0x1B: "latin-1",
            0x1E: "utf-16-be"}
_ESCAPED = frozenset(',=+<>#;"\\')
_SEQUENCE, _SET, _OID, _VERSION = 0x30, 0x31, 0x06, 0xA0


def _tlv(data: bytes, pos: int) -> tuple[int, int, int]:
    """(tag, start of contents, end of contents) of the DER element at ``pos``."""
    if pos + 2 > len(data):
        raise ValueError("truncated DER")
    tag, length = data[pos], data[pos + 1]
    if tag & 0x1F == 0x1F:
        raise ValueError("multi-byte DER tags are not used in certificate names")
    pos += 2
    if length & 0x80:
        count = length & 0x7F
        if not 0 < count <= 4 or pos + count > len(data):
            raise ValueError("bad DER length")
        length = int.from_bytes(data[pos:pos + count], "big")
        pos += count
    if pos + length > len(data):
        raise ValueError("truncated DER")
    return tag, pos, pos + length


def _children(data: bytes, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """(tag, element start, contents start, contents end) of each element in [start, end)."""
    out = []
    while start < end:
        tag, body, stop = _tlv(data, start)
        out.append((tag, start, body, stop))
        start = stop
    return out


def _oid(raw: bytes) -> str:
    arcs, value = [], 0
    for byte in raw:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    if not arcs:
        raise ValueError("empty OID")
    first = min(arcs[0] // 40, 2)
    return ".".join(map(str, [first, arcs[0] - 40 * first, *arcs[1:]]))


def _escape(value: str) -> str:
    text = "".join("\\00" if c == "\0" else f"\\{c}" if c in _ESCAPED else c for c in value)
    lead = len(text) - len(text.lstrip(" \r"))
    trail = len(text.rstrip(" \r"))
    return "".join(f"\\{c}" if i < lead or i >= trail else c for i, c in enumerate(text))


def _attribute(data: bytes, body: int, end: int) -> str:
    (oid_tag, _, oid_start, oid_end), (tag, element, start, stop) = _children(data, body, end)[:2]
    if oid_tag != _OID:
        raise ValueError("an attribute's type is not an OID")
    oid = _oid(data[oid_start:oid_end])
    keyword = _KEYWORDS.get(oid)
    if keyword is None or tag not in _STRINGS:
        return f"{keyword or oid}=#{data[element:stop].hex()}"
    return f"{keyword}={_escape(data[start:stop].decode(_STRINGS[tag]))}"


def _subject(der: bytes) -> tuple[int, int]:
    """Contents span of the subject Name in a DER certificate."""
    _, cert_start, _ = _tlv(der, 0)
    _, tbs_start, tbs_end = _tlv(der, cert_start)
    fields = _children(der, tbs_start, tbs_end)
    if fields and fields[0][0] == _VERSION:
        fields = fields[1:]
    # serialNumber, signature, issuer, validity, subject
    tag, _, start, end = fields[4]
    if tag != _SEQUENCE:
        raise ValueError("the subject is not a Name")
    return start, end


def subject_name(der: bytes) -> str:
    """The subject DN of the DER certificate ``der``, as ``X500Principal.getName()``."""
    start, end = _subject(der)
    rdns = []
    for tag, _, body, stop in _children(der, start, end):
        if tag != _SET:
            raise ValueError("an RDN is not a SET")
        rdns.append("+".join(_attribute(der, a_body, a_end)
                             for _, _, a_body, a_end in _children(der, body, stop)))
    return ",".join(reversed(rdns))
