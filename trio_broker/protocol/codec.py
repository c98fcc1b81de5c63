"""Compiled codecs, one per (message, version), built on first use and cached.

Why lazily: a broker meets a handful of (API, version) pairs, so compiling all of them at start-up
would cost time nobody uses; compiling one takes a fraction of a millisecond. Decoding turns
every failure on peer bytes into one ``RemoteProtocolError``; encoding raises ``ValueError`` for
a message that cannot be written (a wrong type, a null where none is allowed), which is a bug of
the code that built it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .decoder import decoder_source
from .encoder import encoder_source
from .errors import RemoteProtocolError
from .schema import MessageSchema
from .structs import Message, class_for
from .wire import STRUCT_ERRORS

__all__ = ["decode", "decoder", "encode_into", "encoder"]

Decoder = Callable[[memoryview, int], tuple[Any, int]]
Encoder = Callable[[Any, Callable[[Any], None]], None]

_decoders: dict[tuple[str, int], Decoder] = {}
_encoders: dict[tuple[str, int], Encoder] = {}


def _check(schema: MessageSchema, version: int) -> None:
    if version not in schema.versions:
        raise ValueError(f"{schema.name} has no version {version} "
                         f"(schemas cover {schema.versions.min}-{schema.versions.max})")


def decoder(schema: MessageSchema, version: int) -> Decoder:
    """``decode(data: memoryview, pos) -> (message, next pos)`` for one version."""
    fn = _decoders.get((schema.name, version))
    if fn is None:
        _check(schema, version)
        class_for(schema)
        src = decoder_source(schema, version)
        namespace = dict(src.consts)
        exec(compile(src.text(), f"<decode {schema.name} v{version}>", "exec"), namespace)
        fn = _decoders[schema.name, version] = namespace["decode"]
    return fn


def encoder(schema: MessageSchema, version: int) -> Encoder:
    """``encode(message, append)`` for one version: appends the body's parts."""
    fn = _encoders.get((schema.name, version))
    if fn is None:
        _check(schema, version)
        class_for(schema)
        src = encoder_source(schema, version)
        namespace = dict(src.consts)
        exec(compile(src.text(), f"<encode {schema.name} v{version}>", "exec"), namespace)
        fn = _encoders[schema.name, version] = namespace["encode"]
    return fn


def decode(schema: MessageSchema, version: int, data: bytes | bytearray | memoryview,
           pos: int = 0) -> tuple[Any, int]:
    """Decode one message at ``pos``; every failure is one ``RemoteProtocolError``."""
    fn = decoder(schema, version)
    try:
        return fn(data if isinstance(data, memoryview) else memoryview(data), pos)
    except RemoteProtocolError:
        raise
    except STRUCT_ERRORS as exc:
        raise RemoteProtocolError(
            f"{schema.name} v{version} is malformed: {type(exc).__name__}: {exc}") from exc


def encode_into(schema: MessageSchema, version: int, message: Message,
                append: Callable[[Any], None]) -> None:
    """Append ``message``'s encoding at ``version`` to a list of parts (``append``)."""
    if not isinstance(message, schema.root.cls):
        raise TypeError(f"expected a {schema.name}, got {type(message).__name__}")
    try:
        encoder(schema, version)(message, append)
    except (AttributeError, TypeError, ValueError, OverflowError, IndexError) as exc:
        raise ValueError(f"cannot encode {schema.name} v{version}: {exc}") from exc
    except STRUCT_ERRORS as exc:
        raise ValueError(f"cannot encode {schema.name} v{version}: {exc}") from exc
