"""Confluent's schema GUIDs (Schema Registry 8): a schema's GUID is the MD5 of its content,
read as a UUID, so a registry rebuilt from ``_schemas`` serves the same GUIDs without storing
them. Confluent hashes the schema text, its references, then its metadata and rule set, each
of these marked by a byte 1 when present; maps and sets in key order (its entities keep them
sorted). A SCHEMA record may carry that digest as ``md5`` (base64), written when the metadata
was encoded: then the record's digest is the GUID."""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct
import uuid
from collections.abc import Iterable
from typing import Any


def _text(md: Any, value: Any) -> None:
    if value is not None:
        md.update(str(value).encode())


def _rule(md: Any, rule: dict[str, Any]) -> None:
    for name in ("name", "doc", "kind", "mode", "type"):
        _text(md, rule.get(name))
    for tag in sorted(rule.get("tags") or ()):
        _text(md, tag)
    for key, value in sorted((rule.get("params") or {}).items()):
        _text(md, key)
        _text(md, value)
    for name in ("expr", "onSuccess", "onFailure"):
        _text(md, rule.get(name))
    if rule.get("disabled"):
        md.update(b"\x01")


def _metadata(md: Any, metadata: dict[str, Any]) -> None:
    for key, values in sorted((metadata.get("tags") or {}).items()):
        _text(md, key)
        for value in sorted(values or ()):
            _text(md, value)
    for key, value in sorted((metadata.get("properties") or {}).items()):
        _text(md, key)
        _text(md, value)
    for value in sorted(metadata.get("sensitive") or ()):
        _text(md, value)


def schema_guid(schema: str, references: Iterable[dict[str, Any]],
                metadata: dict[str, Any] | None, rule_set: dict[str, Any] | None,
                md5: str | None = None) -> str:
    """The GUID Confluent gives a schema with this content (``md5``: a record's digest)."""
    if md5:
        try:
            digest = base64.b64decode(md5, validate=True)
        except (binascii.Error, ValueError):
            digest = b""
        if len(digest) == 16:
            return str(uuid.UUID(bytes=digest))
    md = hashlib.md5(usedforsecurity=False)
    md.update(schema.encode())
    for ref in references:
        _text(md, ref.get("name"))
        _text(md, ref.get("subject"))
        if isinstance(ref.get("version"), int):
            md.update(struct.pack(">i", ref["version"]))
    if metadata is not None:
        md.update(b"\x01")
        _metadata(md, metadata)
    if rule_set is not None:
        md.update(b"\x01")
        for kind in ("migrationRules", "domainRules", "encodingRules"):
            for rule in rule_set.get(kind) or ():
                _rule(md, rule)
        _text(md, rule_set.get("enableAt"))
    return str(uuid.UUID(bytes=md.digest()))


def parse_guid(text: str) -> str | None:
    """A GUID as Confluent reads one (a UUID, else 32 hex digits), in UUID form; None when it
    is neither, which finds no schema."""
    try:
        return str(uuid.UUID(text))
    except ValueError:
        pass
    try:
        digest = bytes.fromhex(text)
    except ValueError:
        return None
    return str(uuid.UUID(bytes=digest)) if len(digest) == 16 else None


__all__ = ["parse_guid", "schema_guid"]
