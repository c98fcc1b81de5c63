"""HTTP basic credentials (RFC 7617), as the REST proxy and the Schema Registry read them."""

from __future__ import annotations

import base64
import binascii


def parse_basic(authorization: str | None) -> tuple[str, str] | None:
    """``Basic base64(user:password)`` -> (user, password); None when absent or malformed."""
    scheme, _, encoded = (authorization or "").partition(" ")
    if scheme.lower() != "basic" or not encoded.strip():
        return None
    try:
        user, colon, password = base64.b64decode(encoded.strip(), validate=True).decode(
        ).partition(":")
    except (binascii.Error, ValueError):
        return None
    if not colon or not user:
        return None
    return user, password


__all__ = ["parse_basic"]
