"""The decoder compiler: (message schema, version) -> Python source of ``decode(data, pos)``.

The generated function reads a ``memoryview`` from ``pos`` and returns ``(message, next pos)``.
Every length and count is checked against the bytes left before anything is sliced or built (an
array count larger than the bytes that could hold it is refused before any list exists), a null
in a field the schema declares non-nullable is refused, unknown tagged fields are skipped, and
``bytes``/``records`` values are copied out of the frame exactly once, except a request's
``records`` (Produce's batches): those are views of the frame, which the reader hands over and
keeps nothing else of, so the batches go from the socket's buffer to the log's ``pwritev`` with
no copy in between (docs/benchmarks.md, "Big records"). Everything a hostile peer
can cause raises ``RemoteProtocolError`` (or a ``struct.error``/``IndexError``/
``UnicodeDecodeError``, which the codec turns into one).
"""

from __future__ import annotations

import struct
import uuid

from . import wire
from .codegen import SMALL_ARRAY, Source, element_min_size, fixed_size
from .schema import PRIMITIVES, Field, MessageSchema, StructSchema

__all__ = ["decoder_source"]

_Z16 = bytes(16)


def decoder_source(schema: MessageSchema, version: int) -> Source:
    """Source of ``decode(data, pos) -> (message, pos)`` for ``schema`` at ``version``."""
    src = Source()
    for name, value in (("_new", object.__new__), ("_rv", wire.read_uvarint),
                        ("_le", wire.length_error), ("_se", wire.short_error),
                        ("_ce", wire.count_error), ("_te", wire.tag_error),
                        ("_Z16", _Z16), ("_UUID", uuid.UUID), ("_bits", wire.bits_from_int)):
        src.consts[name] = value
    gen = _Decoder(src, version, schema.flexible(version),
                   records_as_views=schema.kind == "request")
    src.emit(0, "def decode(data, pos):")
    src.emit(1, "end = len(data)")
    gen.struct(schema.root, "o", 1, schema.name)
    src.emit(1, "return o, pos")
    return src


class _Decoder:
    def __init__(self, src: Source, version: int, flexible: bool, *,
                 records_as_views: bool = False) -> None:
        self.src = src
        self.v = version
        self.flex = flexible
        self.records_as_views = records_as_views

    # --- structs --------------------------------------------------------------------------------

    def struct(self, schema: StructSchema, target: str, ind: int, path: str) -> None:
        src, v = self.src, self.v
        src.emit(ind, f"{target} = _new({src.const('cls:' + schema.name, schema.cls)})")
        wire_fields = [f for f in schema.fields if f.present(v) and not f.tagged(v)]
        run: list[tuple[str, str]] = []
        posts: list[str] = []
        for field in wire_fields:
            dest = f"{target}.{field.name}"
            where = f"{path}.{field.name}"
            fixed = fixed_size(field)
            if fixed is not None:
                fmt = PRIMITIVES[field.element][1]
                if field.element == "uuid":
                    tmp = src.var("u")
                    run.append((fmt, tmp))
                    posts.append(f"{dest} = None if {tmp} == _Z16 else _UUID(bytes={tmp})")
                elif field.element == "bitfield":
                    tmp = src.var("u")
                    run.append((fmt, tmp))
                    posts.append(f"{dest} = _bits({tmp})")
                else:
                    run.append((fmt, dest))
                continue
            length = None
            if not self.flex and (field.is_array or field.struct is None):
                length = src.var("n")  # a non-flexible length prefix joins the fixed run
                run.append(("h" if _short_length(field) else "i", length))
            self._flush(run, posts, ind)
            self.value(field, dest, length, ind, where)
        self._flush(run, posts, ind)
        for field in schema.fields:
            if field not in wire_fields:
                src.emit(ind, f"{target}.{field.name} = {self._default(field)}")
        if self.flex:
            self._tags(schema, target, ind, path)

    def _flush(self, run: list[tuple[str, str]], posts: list[str], ind: int) -> None:
        if not run:
            return
        fmt = "".join(f for f, _ in run)
        unpack = self.src.struct_const("unpack", fmt)
        targets = [t for _, t in run]
        if len(targets) == 1:
            self.src.emit(ind, f"{targets[0]} = {unpack}(data, pos)[0]")
        else:
            self.src.emit(ind, f"{', '.join(targets)} = {unpack}(data, pos)")
        self.src.emit(ind, f"pos += {struct.calcsize('>' + fmt)}")
        for post in posts:
            self.src.emit(ind, post)
        run.clear()
        posts.clear()

    def _default(self, field: Field) -> str:
        value = field.default
        if value is None:
            return "None"
        if field.is_array:
            return "[]"
        if field.struct is not None:
            if field.tag is not None:
                return "None"
            return f"{self.src.const('cls:' + field.struct.name, field.struct.cls)}()"
        return repr(field.default_value())

    def _tags(self, schema: StructSchema, target: str, ind: int, path: str) -> None:
        src, v = self.src, self.v
        tagged = sorted((f for f in schema.fields if f.present(v) and f.tagged(v)),
                        key=lambda f: f.tag or 0)
        src.emit(ind, "if data[pos] == 0:")
        src.emit(ind + 1, "pos += 1")
        src.emit(ind, "else:")
        count, tag, size, tag_end = (src.var(p) for p in ("nt", "tg", "sz", "te"))
        src.emit(ind + 1, f"{count}, pos = _rv(data, pos)")
        src.emit(ind + 1, f"for _ in range({count}):")
        src.emit(ind + 2, f"{tag}, pos = _rv(data, pos)")
        src.emit(ind + 2, f"{size}, pos = _rv(data, pos)")
        src.emit(ind + 2, f"{tag_end} = pos + {size}")
        src.emit(ind + 2, f"if {tag_end} > end: raise _se({path + ' tagged fields'!r})")
        for i, field in enumerate(tagged):
            src.emit(ind + 2, f"{'if' if i == 0 else 'elif'} {tag} == {field.tag}:")
            self.value(field, f"{target}.{field.name}", None, ind + 3, f"{path}.{field.name}")
            src.emit(ind + 3, f"if pos > {tag_end}: raise _te({tag})")
        src.emit(ind + 2, f"pos = {tag_end}")

    # --- values ---------------------------------------------------------------------------------

    def _length(self, ind: int, short: bool) -> str:
        """Read a length or count here (compact in flexible versions); returns its variable."""
        src = self.src
        n = src.var("n")
        if self.flex:
            src.emit(ind, f"{n} = data[pos]")
            src.emit(ind, f"if {n} < 128: pos += 1")
            src.emit(ind, f"else: {n}, pos = _rv(data, pos)")
            src.emit(ind, f"{n} -= 1")
        else:
            fmt = "h" if short else "i"
            src.emit(ind, f"{n} = {src.struct_const('unpack', fmt)}(data, pos)[0]")
            src.emit(ind, f"pos += {2 if fmt == 'h' else 4}")
        return n

    def value(self, field: Field, dest: str, length: str | None, ind: int, path: str) -> None:
        """Decode one present, non-fixed field (or a tagged field of any type) into ``dest``."""
        src = self.src
        if not field.is_array and field.struct is None and fixed_size(field) is not None:
            fmt = PRIMITIVES[field.element][1]  # a fixed-size tagged field
            tmp = src.var("x")
            src.emit(ind, f"{tmp} = {src.struct_const('unpack', fmt)}(data, pos)[0]")
            src.emit(ind, f"pos += {fixed_size(field)}")
            if field.element == "uuid":
                src.emit(ind, f"{dest} = None if {tmp} == _Z16 else _UUID(bytes={tmp})")
            elif field.element == "bitfield":
                src.emit(ind, f"{dest} = _bits({tmp})")
            else:
                src.emit(ind, f"{dest} = {tmp}")
            return
        if field.struct is not None and not field.is_array:
            self._single_struct(field, dest, ind, path)
            return
        n = length if length is not None else self._length(ind, _short_length(field))
        nullable = field.nullable(self.v)
        if nullable:
            src.emit(ind, f"if {n} < 0:")
            src.emit(ind + 1, f"if {n} != -1: raise _le({path!r}, {n})")
            src.emit(ind + 1, f"{dest} = None")
            src.emit(ind, "else:")
            ind += 1
        else:
            src.emit(ind, f"if {n} < 0: raise _le({path!r}, {n})")
        if field.is_array:
            self._array(field, dest, n, ind, path)
        else:
            self._blob(field.element, dest, n, ind, path)

    def _blob(self, element: str, dest: str, n: str, ind: int, path: str) -> None:
        src = self.src
        end = src.var("e")
        src.emit(ind, f"{end} = pos + {n}")
        src.emit(ind, f"if {end} > end: raise _se({path!r})")
        if element == "string":
            src.emit(ind, f"{dest} = str(data[pos:{end}], 'utf-8')")
        elif element == "records" and self.records_as_views:
            src.emit(ind, f"{dest} = data[pos:{end}]")
        else:  # bytes, records: one copy out of the frame
            src.emit(ind, f"{dest} = bytes(data[pos:{end}])")
        src.emit(ind, f"pos = {end}")

    def _array(self, field: Field, dest: str, n: str, ind: int, path: str) -> None:
        src = self.src
        least = element_min_size(field, self.v, self.flex)
        need = n if least <= 1 else f"{n} * {least}"
        src.emit(ind, f"if {need} > end - pos: raise _ce({path!r}, {n}, end - pos)")
        fixed = PRIMITIVES.get(field.element, (None, ""))[0] if field.struct is None else None
        if field.element == "bitfield":
            raise ValueError(f"{path}: arrays of bitfields are not supported")
        if fixed is not None and field.element != "uuid":
            fmt = PRIMITIVES[field.element][1]
            it = src.struct_const("iter", fmt)
            small = src.array_const("unpack", fmt)
            end = src.var("e")
            src.emit(ind, f"{end} = pos + {n} * {fixed}")
            src.emit(ind, f"if {n} < {SMALL_ARRAY}: {dest} = list({small}[{n}](data, pos))")
            src.emit(ind, f"else: {dest} = [x for (x,) in {it}(data[pos:{end}])]")
            src.emit(ind, f"pos = {end}")
            return
        items, item = src.var("L"), src.var("o")
        src.emit(ind, f"{items} = []")
        src.emit(ind, f"for _ in range({n}):")
        if field.struct is not None:
            self.struct(field.struct, item, ind + 1, f"{path}[]")
        elif field.element == "uuid":
            tmp = src.var("u")
            src.emit(ind + 1, f"{tmp} = {src.struct_const('unpack', '16s')}(data, pos)[0]")
            src.emit(ind + 1, "pos += 16")
            src.emit(ind + 1, f"{item} = None if {tmp} == _Z16 else _UUID(bytes={tmp})")
        else:  # strings and bytes: elements are never null
            m = self._length(ind + 1, field.element == "string")
            src.emit(ind + 1, f"if {m} < 0: raise _le({path + '[]'!r}, {m})")
            self._blob(field.element, item, m, ind + 1, path + "[]")
        src.emit(ind + 1, f"{items}.append({item})")
        src.emit(ind, f"{dest} = {items}")

    def _single_struct(self, field: Field, dest: str, ind: int, path: str) -> None:
        src = self.src
        assert field.struct is not None
        item = src.var("o")
        if field.nullable(self.v):
            src.emit(ind, "if data[pos] >= 128:")  # a negative int8 marks null
            src.emit(ind + 1, "pos += 1")
            src.emit(ind + 1, f"{dest} = None")
            src.emit(ind, "else:")
            src.emit(ind + 1, "pos += 1")
            ind += 1
        self.struct(field.struct, item, ind, path)
        src.emit(ind, f"{dest} = {item}")


def _short_length(field: Field) -> bool:
    """Whether the non-flexible length prefix is an i16 (strings) rather than an i32."""
    return field.element == "string" and not field.is_array
