"""The encoder compiler: (message schema, version) -> Python source of ``encode(o, ap)``.

The generated function appends the message's bytes, in parts, through ``ap`` (a list's
``append``): runs of fixed-size fields (and the length prefixes and empty tag sections between
them) become one ``struct.pack`` call; strings are encoded once; ``bytes``/``records`` values
are appended as they are, so a fetch response's record data is copied once, into the frame, when
the caller joins the parts. Fields outside the version are not written; tagged fields are written
when they differ from their default, in ascending tag order.
"""

from __future__ import annotations

import struct
from typing import Any

from . import wire
from .codegen import SMALL_ARRAY, Source, fixed_size
from .schema import PRIMITIVES, Field, MessageSchema, StructSchema

__all__ = ["encoder_source"]

_Z16 = bytes(16)
_Run = list[tuple[str, Any]]  # (struct format characters, argument expression or None for pads)


def _uuid_bytes(value: Any) -> bytes:
    return _Z16 if value is None else bytes(value.bytes)


def encoder_source(schema: MessageSchema, version: int) -> Source:
    """Source of ``encode(o, ap)`` for ``schema`` at ``version``."""
    src = Source()
    for name, value in (("_UV", wire.UVARINT_1), ("_uv", wire.uvarint), ("_ub", _uuid_bytes),
                        ("_pk", struct.pack), ("_bi", wire.bits_to_int)):
        src.consts[name] = value
    gen = _Encoder(src, version, schema.flexible(version))
    src.emit(0, "def encode(o, ap):")
    run: _Run = []
    gen.struct(schema.root, "o", 1, "ap", run)
    gen.flush(run, 1, "ap")
    if len(src.lines) == 1:
        src.emit(1, "pass")
    return src


class _Encoder:
    def __init__(self, src: Source, version: int, flexible: bool) -> None:
        self.src = src
        self.v = version
        self.flex = flexible

    def flush(self, run: _Run, ind: int, ap: str) -> None:
        if not run:
            return
        fmt = "".join(f for f, _ in run)
        args = [a for _, a in run if a is not None]
        if not args:
            self.src.emit(ind, f"{ap}({bytes(struct.calcsize('>' + fmt))!r})")
        else:
            self.src.emit(ind, f"{ap}({self.src.struct_const('pack', fmt)}({', '.join(args)}))")
        run.clear()

    def struct(self, schema: StructSchema, obj: str, ind: int, ap: str, run: _Run) -> None:
        """Write ``obj``'s fields; fixed-size ones join ``run``, which the caller flushes."""
        v = self.v
        for field in schema.fields:
            if not field.present(v) or field.tagged(v):
                continue
            expr = f"{obj}.{field.name}"
            if fixed_size(field) is not None:
                run.append(self._fixed(field, expr))
            else:
                self.value(field, expr, ind, ap, run)
        if self.flex:
            tagged = sorted((f for f in schema.fields if f.present(v) and f.tagged(v)),
                            key=lambda f: f.tag or 0)
            if not tagged:
                run.append(("x", None))  # an empty tagged-field section
            else:
                self.flush(run, ind, ap)
                self._tags(tagged, obj, ind, ap)

    @staticmethod
    def _fixed(field: Field, expr: str) -> tuple[str, str]:
        fmt = PRIMITIVES[field.element][1]
        if field.element == "uuid":
            return fmt, f"_ub({expr})"
        if field.element == "bitfield":
            return fmt, f"_bi({expr})"
        return fmt, expr

    def value(self, field: Field, expr: str, ind: int, ap: str, run: _Run) -> None:
        """Write one present field that is not a fixed-size primitive."""
        src = self.src
        nullable = field.nullable(self.v)
        if field.struct is not None and not field.is_array:
            item = src.var("s")
            src.emit(ind, f"{item} = {expr}")
            if nullable:
                self.flush(run, ind, ap)
                src.emit(ind, f"if {item} is None: {ap}(b'\\xff')")
                src.emit(ind, "else:")
                inner: _Run = [("b", "1")]
                self.struct(field.struct, item, ind + 1, ap, inner)
                self.flush(inner, ind + 1, ap)
            else:
                self.struct(field.struct, item, ind, ap, run)
            return
        if field.is_array:
            self._array(field, expr, ind, ap, run, nullable)
            return
        data = src.var("b")
        if field.element == "string":
            if nullable:
                tmp = src.var("v")
                src.emit(ind, f"{tmp} = {expr}")
                src.emit(ind, f"{data} = None if {tmp} is None else {tmp}.encode('utf-8')")
            else:
                src.emit(ind, f"{data} = {expr}.encode('utf-8')")
        else:
            src.emit(ind, f"{data} = {expr}")
        self._length(data, nullable, field.element == "string", ind, ap, run)
        if nullable:
            src.emit(ind, f"if {data} is not None: {ap}({data})")
        else:
            src.emit(ind, f"{ap}({data})")

    def _length(self, var: str, nullable: bool, short: bool, ind: int, ap: str,
                run: _Run) -> None:
        """Write the length (or count) of ``var``: compact in flexible versions."""
        src = self.src
        if not self.flex:
            size = f"-1 if {var} is None else len({var})" if nullable else f"len({var})"
            run.append(("h" if short else "i", size))
            self.flush(run, ind, ap)
            return
        self.flush(run, ind, ap)
        n = src.var("n")
        if nullable:
            src.emit(ind, f"{n} = 0 if {var} is None else len({var}) + 1")
        else:
            src.emit(ind, f"{n} = len({var}) + 1")
        src.emit(ind, f"{ap}(_UV[{n}] if {n} < 128 else _uv({n}))")

    def _array(self, field: Field, expr: str, ind: int, ap: str, run: _Run,
               nullable: bool) -> None:
        src = self.src
        items = src.var("a")
        src.emit(ind, f"{items} = {expr}")
        self._length(items, nullable, False, ind, ap, run)
        if nullable:
            src.emit(ind, f"if {items} is not None:")
            ind += 1
        element = field.element
        if element == "bitfield":
            raise ValueError(f"{field.name}: arrays of bitfields are not supported")
        if field.struct is None and element != "uuid" and PRIMITIVES[element][0] is not None:
            fmt = PRIMITIVES[element][1]
            small = src.array_const("pack", fmt)
            count = src.var("k")
            src.emit(ind, f"{count} = len({items})")
            src.emit(ind, f"if {count} >= {SMALL_ARRAY}: {ap}(_pk('>%d{fmt}' % {count}, *{items}))")
            src.emit(ind, f"elif {count}: {ap}({small}[{count}](*{items}))")
            return
        item = src.var("e")
        src.emit(ind, f"for {item} in {items}:")
        body: _Run = []
        if field.struct is not None:
            self.struct(field.struct, item, ind + 1, ap, body)
        elif element == "uuid":
            body.append(("16s", f"_ub({item})"))
        else:  # strings and bytes; elements are never null
            data = src.var("b")
            encode = ".encode('utf-8')" if element == "string" else ""
            src.emit(ind + 1, f"{data} = {item}{encode}")
            self._length(data, False, element == "string", ind + 1, ap, body)
            src.emit(ind + 1, f"{ap}({data})")
        self.flush(body, ind + 1, ap)

    def _tags(self, tagged: list[Field], obj: str, ind: int, ap: str) -> None:
        src = self.src
        found = src.var("t")
        src.emit(ind, f"{found} = []")
        for field in tagged:
            value = src.var("v")
            src.emit(ind, f"{value} = {obj}.{field.name}")
            default = field.default_value()
            if default is None:
                src.emit(ind, f"if {value} is not None:")
            else:
                src.emit(ind, f"if {value} != {default!r}:")
            parts, add = src.var("p"), src.var("pa")
            src.emit(ind + 1, f"{parts} = []")
            src.emit(ind + 1, f"{add} = {parts}.append")
            run: _Run = []
            if fixed_size(field) is not None:
                run.append(self._fixed(field, value))
            else:
                self.value(field, value, ind + 1, add, run)
            self.flush(run, ind + 1, add)
            data = src.var("b")
            src.emit(ind + 1, f"{data} = b''.join({parts})")
            src.emit(ind + 1, f"{found}.append(_uv({field.tag}) + _uv(len({data})) + {data})")
        src.emit(ind, f"{ap}(_uv(len({found})))")
        src.emit(ind, f"{ap}(b''.join({found}))")
