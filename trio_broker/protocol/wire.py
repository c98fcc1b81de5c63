"""Primitive wire helpers shared by the generated codecs: unsigned varints, error factories.

Why separate: the compiler inlines the common cases (one-byte varints, fixed-size runs packed by
one ``struct`` call); only the rare ones call in here, and every failure on peer bytes is built
here as one ``RemoteProtocolError`` with a message naming the field.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from .errors import RemoteProtocolError

__all__ = ["UVARINT_1", "read_uvarint", "uvarint"]

#: the one-byte unsigned varints 0..127
UVARINT_1: tuple[bytes, ...] = tuple(bytes([i]) for i in range(128))
STRUCT_ERRORS = (struct.error, IndexError, UnicodeDecodeError, ValueError, OverflowError)


def read_uvarint(data: memoryview | bytes | bytearray, pos: int) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes (a 32-bit value) at ``pos``: (value, next pos)."""
    result = 0
    for shift in (0, 7, 14, 21, 28):
        if pos >= len(data):
            raise RemoteProtocolError("truncated varint")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            if result > 0xFFFFFFFF:
                raise RemoteProtocolError("varint larger than 32 bits")
            return result, pos
    raise RemoteProtocolError("varint longer than 5 bytes")


def uvarint(value: int) -> bytes:
    """The unsigned varint encoding of ``value`` (0 <= value < 2**32)."""
    if value < 0x80:
        return UVARINT_1[value]
    if value > 0xFFFFFFFF:
        raise ValueError(f"{value} does not fit an unsigned 32-bit varint")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def bits_from_int(value: int) -> set[int] | None:
    """An authorized-operations bitfield as the set of its bit numbers; None for -2**31."""
    if value == 0x80000000:
        return None
    return {i for i in range(32) if value >> i & 1}


def bits_to_int(bits: Iterable[int] | None) -> int:
    """The unsigned 32-bit value of a set of bit numbers; None gives Kafka's -2**31."""
    if bits is None:
        return 0x80000000
    value = 0
    for bit in bits:
        if not 0 <= bit < 32:
            raise ValueError(f"bit {bit} is outside a 32-bit field")
        value |= 1 << bit
    return value


def null_error(field: str) -> RemoteProtocolError:
    return RemoteProtocolError(f"non-nullable field {field} was serialized as null")


def length_error(field: str, length: int) -> RemoteProtocolError:
    if length == -1:
        return null_error(field)
    return RemoteProtocolError(f"field {field} has a negative length {length}")


def short_error(field: str) -> RemoteProtocolError:
    return RemoteProtocolError(f"field {field} runs past the end of the message")


def count_error(field: str, count: int, left: int) -> RemoteProtocolError:
    return RemoteProtocolError(
        f"array {field} claims {count} elements but only {left} bytes are left")


def tag_error(tag: int) -> RemoteProtocolError:
    return RemoteProtocolError(f"tagged field {tag} is longer than its declared size")
