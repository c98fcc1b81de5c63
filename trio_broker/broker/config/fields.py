"""``FrozenFields``: a frozen class over a table of fields, each maybe a validated config key.

Why not attrs: attrs compiles generated methods (``__init__``, ``__repr__``, ``__eq__``, hash)
for every class it builds, a cost that grows with the fields and that every start of the broker
would pay for ``BrokerConfig``'s ~100 (docs/benchmarks.md, "Start-up"). These methods walk the
field table instead; a ``BrokerConfig`` is made a handful of
times per start, so the walk costs nothing that matters.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, NamedTuple

from attrs.exceptions import FrozenInstanceError

from .defs import ConfigKey, ConfigType, ConfigValueError
from .errors import ConfigError


class Field(NamedTuple):
    """One attribute: its honoured key (None: not a key), default (or the factory making it),
    converter and whether it is compared and shown."""

    key: ConfigKey | None
    default: Any = None
    factory: Any = None
    converter: Any = None
    compared: bool = True


def to_list_text(value: Any) -> Any:
    """A LIST key's value as its text (``["a", "b"]`` -> ``"a,b"``)."""
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return value


def text_map(values: Mapping[str, str]) -> dict[str, str]:
    return dict(values)


def key_field(key: ConfigKey) -> Any:
    """The field of honoured key ``key``: its default, converter and validation."""
    if key.type is ConfigType.LIST:
        return Field(key, to_list_text(key.default), converter=to_list_text)
    return Field(key, key.default)


def validate(key: ConfigKey, value: Any) -> None:
    """Check ``value`` with ``key``'s validator; a bad one is ``ConfigError`` naming the key."""
    if key.validator is not None and value is not None:
        parsed = value
        if key.type is ConfigType.LIST and isinstance(value, str):
            parsed = [v for v in value.split(",") if v]
        try:
            key.validator.check(key.name, parsed)
        except ConfigValueError as exc:
            raise ConfigError(str(exc), key.name) from None


class FrozenFields:
    """Keyword construction, immutability, repr and equality over the class's ``Field``
    attributes, in the order written (what ``attrs.frozen(kw_only=True)`` gives)."""

    _fields: ClassVar[tuple[tuple[str, Field], ...]] = ()

    def __init_subclass__(cls) -> None:
        cls._fields = tuple((name, value) for name, value in vars(cls).items()
                            if isinstance(value, Field))

    def __init__(self, **values: Any) -> None:
        """Every field from ``values`` or its default, converted, then every key validated."""
        fields = self._fields
        for name, field in fields:
            if name in values:
                value = values.pop(name)
            else:
                value = field.factory() if field.factory is not None else field.default
            if field.converter is not None:
                value = field.converter(value)
            object.__setattr__(self, name, value)
        if values:
            raise TypeError(f"{type(self).__name__}() got an unexpected keyword argument "
                            f"{next(iter(values))!r}")
        for name, field in fields:
            if field.key is not None:
                validate(field.key, getattr(self, name))

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}"
                          for name, f in self._fields if f.compared)
        return f"{type(self).__name__}({shown})"

    def _compared(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name, f in self._fields if f.compared)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FrozenFields) or other.__class__ is not self.__class__:
            return NotImplemented
        return self._compared() == other._compared()

    def __hash__(self) -> int:
        return hash(self._compared())
