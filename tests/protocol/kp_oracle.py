"""kafka-python's message classes as an independent oracle for the project's schemas and codec.

Why kafka-python: its ``kafka.protocol`` classes are generated from Kafka's own message JSON by a
different codec, so agreeing with it byte for byte, both ways, on every (API, version) both define
catches transcription errors in our schemas and bugs in our compiler. It is a dev dependency only.

Helpers: the kafka-python class of a message, per-version field layouts of both sides (for the
field-by-field comparison), hypothesis strategies drawing our messages from our schemas, and
conversions of a message between the two class families.
"""

from __future__ import annotations

import re
from typing import Any

import kafka.protocol.admin
import kafka.protocol.consumer
import kafka.protocol.metadata
import kafka.protocol.producer
import kafka.protocol.sasl
from hypothesis import strategies as st
from kafka.protocol.api_data import ApiData
from kafka.protocol.api_message import ApiMessage

from trio_broker.protocol.schema import Field, MessageSchema, StructSchema, load
from trio_broker.protocol.structs import class_for

_MODULES = (kafka.protocol.admin, kafka.protocol.consumer, kafka.protocol.metadata,
            kafka.protocol.producer, kafka.protocol.sasl)


def _index() -> dict[str, Any]:
    found: dict[str, Any] = {}
    for module in _MODULES:
        for name in dir(module):
            obj = getattr(module, name)
            if (isinstance(obj, type) and issubclass(obj, ApiMessage | ApiData)
                    and getattr(obj, "_json", None) is not None
                    and getattr(obj, "_class_version", None) is None):
                found[obj._json["name"]] = obj
    return found


KP_CLASSES: dict[str, Any] = _index()


def kp_versions(name: str) -> range:
    """Every version kafka-python can encode for ``name``: 0 .. its validVersions maximum
    (its field versions still describe the versions Kafka 4.0 removed)."""
    return range(0, KP_CLASSES[name]._valid_versions[1] + 1)


def shared_versions(name: str) -> list[int]:
    """The versions both our schema and kafka-python's class define."""
    ours = load(name)
    assert ours is not None
    return [v for v in kp_versions(name) if v in ours.versions]


# --- per-version layouts ----------------------------------------------------------------------

def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _pv(text: str | None) -> tuple[int, int] | None:
    if text is None or not text.strip() or text.strip() == "none":
        return None
    text = text.strip()
    if text.endswith("+"):
        return int(text[:-1]), 1 << 15
    lo, _, hi = text.partition("-")
    return int(lo), int(hi or lo)


def _in(versions: tuple[int, int] | None, v: int) -> bool:
    return versions is not None and versions[0] <= v <= versions[1]


def kp_layout(fields: list[dict[str, Any]], v: int) -> list[tuple[Any, ...]]:
    """(name, type, nullable, tag, children) of each kafka-python field present in ``v``."""
    out = []
    for f in fields:
        versions = _pv(f["versions"])
        if not _in(versions, v):
            continue
        tagged = f.get("tag") is not None and _in(_pv(f.get("taggedVersions")), v)
        children = f.get("fields")
        out.append((_snake(f["name"]), f["type"], _in(_pv(f.get("nullableVersions")), v),
                    f.get("tag") if tagged else None,
                    tuple(kp_layout(children, v)) if children else None))
    return out


def our_layout(struct: StructSchema, v: int) -> list[tuple[Any, ...]]:
    """The same layout, read from our schema (the project's own tagged fields left out)."""
    return [(f.name, f.type, f.nullable(v), f.tag if f.tagged(v) else None,
             tuple(our_layout(f.struct, v)) if f.struct is not None else None)
            for f in struct.fields_in(v) if not f.own]


# --- hypothesis strategies for our messages ------------------------------------------------------

_INTS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


def _scalar(element: str) -> st.SearchStrategy[Any]:
    if element in _INTS:
        bits = _INTS[element]
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        return st.one_of(st.sampled_from([lo, hi, -1, 0, 1]), st.integers(lo, hi))
    if element == "uint16":
        return st.integers(0, 65535)
    if element == "bool":
        return st.booleans()
    if element == "float64":
        return st.floats(allow_nan=False)
    if element == "string":
        return st.text(st.characters(codec="utf-8"), max_size=8)
    if element in ("bytes", "records"):
        return st.binary(max_size=12)
    if element == "uuid":  # all zeros is Kafka's null uuid, read back as None
        return st.uuids().filter(lambda u: u.int != 0)
    if element == "bitfield":  # bit 31 alone is Kafka's "not requested", read back as None
        return st.none() | st.sets(st.integers(0, 31), max_size=4).filter(lambda s: s != {31})
    raise NotImplementedError(element)


def _field(field: Field, v: int, nested_tags: bool) -> st.SearchStrategy[Any]:
    if field.struct is not None:
        element: st.SearchStrategy[Any] = struct_values(field.struct, v, nested_tags)
    else:
        element = _scalar(field.element)
    s = st.lists(element, max_size=3) if field.is_array else element
    if field.nullable(v):
        s = st.none() | s
    return s


def struct_values(struct: StructSchema, v: int, tags: bool = True) -> st.SearchStrategy[Any]:
    """Instances of ``struct``'s class with every field of version ``v`` drawn.

    Inside a tagged field, nested tagged fields keep their defaults (``tags=False``): kafka-python
    writes a tagged struct's own tag section empty, so only default nested tags compare equal.
    """
    parts: dict[str, st.SearchStrategy[Any]] = {}
    for f in struct.fields_in(v):
        if (f.tagged(v) and not tags) or f.own:  # own tags: kafka-python cannot carry them
            continue
        parts[f.name] = _field(f, v, tags and not f.tagged(v))
    cls = struct.cls
    return st.fixed_dictionaries(parts).map(lambda kw: cls(**kw))


def messages(schema: MessageSchema, v: int) -> st.SearchStrategy[Any]:
    class_for(schema)
    strategy = struct_values(schema.root, v)
    if schema.name == "ApiVersionsResponse":  # an error makes every reader switch to v0
        return strategy.map(_no_error)
    return strategy


def _no_error(message: Any) -> Any:
    message.error_code = 0
    return message


# --- conversions ---------------------------------------------------------------------------------

def to_kp(obj: Any, struct: StructSchema, kp_cls: Any, v: int, top: bool = True) -> Any:
    """Our message as kafka-python's, with every field of version ``v``."""
    kwargs = {}
    for f in struct.fields_in(v):
        if f.own:
            continue
        value = getattr(obj, f.name)
        if f.struct is not None and value is not None:
            child = getattr(kp_cls, f.struct.name)
            if f.is_array:
                value = [to_kp(x, f.struct, child, v, False) for x in value]
            else:
                value = to_kp(value, f.struct, child, v, False)
        kwargs[f.name] = value
    if not top:
        return kp_cls(**kwargs)
    if issubclass(kp_cls, ApiData):
        return kp_cls(version=v, **kwargs)
    return kp_cls[v](**kwargs)


def from_kp(obj: Any, struct: StructSchema, v: int) -> Any:
    """kafka-python's decoded message as ours (fields outside ``v`` keep our defaults)."""
    kwargs = {}
    for f in struct.fields_in(v):
        if f.own:
            continue
        value = getattr(obj, f.name)
        if f.struct is not None and value is not None:
            if f.is_array:
                value = [from_kp(x, f.struct, v) for x in value]
            else:
                value = from_kp(value, f.struct, v)
        elif f.element in ("bytes", "records") and value is not None and not f.is_array:
            value = bytes(value)
        kwargs[f.name] = value
    return struct.cls(**kwargs)


