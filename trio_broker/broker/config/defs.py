"""Kafka's ``ConfigDef`` as data: a key's type, default, validator, and this broker's use of it.

Why a table and not code per key: Kafka defines some five hundred broker and topic keys, each by
name, type, default and validator, and checks every value the same way (``ConfigDef.parseType``,
then the validator). Holding the same facts as data gives one parser, one set of error messages
(Kafka's own text, so a tool that matches on them keeps working), one renderer for
DescribeConfigs, and the documentation table, which is generated from these rows.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

import attrs

__all__ = ["NO_DEFAULT", "AtLeast", "Between", "ConfigKey", "ConfigType", "ConfigValueError",
           "ListOf", "OneOf", "Support", "Validator", "parse_value", "render"]

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
SHORT_MIN, SHORT_MAX = -(2**15), 2**15 - 1


class ConfigValueError(ValueError):
    """A value Kafka's ``ConfigDef`` would refuse; ``str()`` is Kafka's one-line message."""

    def __init__(self, key: str, value: object, reason: str | None) -> None:
        shown = "null" if value is None else value
        super().__init__(f"Invalid value {shown} for configuration {key}"
                         + ("" if reason is None else f": {reason}"))
        self.key = key
        self.value = value
        self.reason = reason


class ConfigType(enum.Enum):
    """ConfigDef.Type, with DescribeConfigs' ``config_type`` id (v3+) as the value."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class Support(enum.Enum):
    """What this broker does with a key; docs/configuration.md says it per key."""

    #: acted on, as Kafka does
    HONOURED = "honoured"
    #: topic config kept, validated and described; not acted on (no meaning on one node, or
    #: that part is not built here); the docs row says which
    STORED = "stored"
    #: broker key accepted and validated, with no meaning on one node
    IGNORED = "ignored"
    # Both of the latter are "accepted, no effect": named in one log line at start-up and at each
    # change that sets one (keys.NO_EFFECT).


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Any = _NoDefault()

_INTEGER = re.compile(r"[+-]?[0-9]+")
# Java's Double.parseDouble, decimal forms: 1, -1.5, .5, 5., 1e3, 2.5d, NaN, Infinity
_DOUBLE = re.compile(r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"
                     r"[fFdD]?")
_CLASS_NAME = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*")
_LIST_SPLIT = re.compile(r"\s*,\s*")
_BOUNDS = {ConfigType.INT: (INT_MIN, INT_MAX), ConfigType.LONG: (LONG_MIN, LONG_MAX),
           ConfigType.SHORT: (SHORT_MIN, SHORT_MAX)}


def parse_value(key: str, raw: Any, type_: ConfigType) -> Any:
    """Kafka's ``ConfigDef.parseType``: a string (or a Python value) to the key's type."""
    if raw is None:
        return None
    text = raw.strip() if isinstance(raw, str) else None
    if type_ is ConfigType.BOOLEAN:
        if isinstance(raw, bool):
            return raw
        if text is not None and text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise ConfigValueError(key, raw, "Expected value to be either true or false")
    if type_ in (ConfigType.STRING, ConfigType.PASSWORD):
        if text is None:
            raise ConfigValueError(key, raw, "Expected value to be a string, but it was a "
                                   f"{type(raw).__name__}")
        return text
    if type_ in _BOUNDS:
        low, high = _BOUNDS[type_]
        if isinstance(raw, int) and not isinstance(raw, bool):
            value = raw
        elif text is not None and _INTEGER.fullmatch(text):
            value = int(text)
        else:
            raise ConfigValueError(key, raw, f"Not a number of type {type_.name}")
        if not low <= value <= high:
            raise ConfigValueError(key, raw, f"Not a number of type {type_.name}")
        return value
    if type_ is ConfigType.DOUBLE:
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            return float(raw)
        if text is not None and _DOUBLE.fullmatch(text):
            return float(text.rstrip("fFdD").replace("Infinity", "inf"))
        raise ConfigValueError(key, raw, "Not a number of type DOUBLE")
    if type_ is ConfigType.LIST:
        if isinstance(raw, list | tuple):
            return [str(item).strip() for item in raw]
        if text is None:
            raise ConfigValueError(key, raw, "Expected a comma separated list.")
        return [] if not text else _LIST_SPLIT.split(text)
    if type_ is ConfigType.CLASS:
        # Classes cannot be loaded here: a well-formed Java class name is all that is checked.
        if text is None or not _CLASS_NAME.fullmatch(text):
            raise ConfigValueError(key, raw, "Expected a Class instance or class name.")
        return text
    raise AssertionError(type_)


def java_double(value: float) -> str:
    """Java's ``Double.toString``: 0.5, 1.0, 1.0E7, 1.0E-4."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        text = repr(float(value))
        return text if "e" not in text else f"{value:f}".rstrip("0")
    mantissa, exponent = f"{value:e}".split("e")
    mantissa = mantissa.rstrip("0")
    if mantissa.endswith("."):
        mantissa += "0"
    return f"{mantissa}E{int(exponent)}"


def render(value: Any, type_: ConfigType) -> str | None:
    """Kafka's ``ConfigDef.convertToString``: how DescribeConfigs shows a parsed value."""
    if value is None:
        return None
    if type_ is ConfigType.BOOLEAN:
        return "true" if value else "false"
    if type_ is ConfigType.DOUBLE:
        return java_double(float(value))
    if type_ is ConfigType.LIST:
        return ",".join(str(v) for v in value) if not isinstance(value, str) else value
    return str(value)


# --- validators (ConfigDef.Range, ValidString, ValidList and Kafka's own) ---------------------

class Validator(Protocol):
    """Checks a parsed value; raises ConfigValueError with Kafka's text.

    The validators are NamedTuples: hundreds of keys are defined at every start, and an attrs
    class is compiled when its module is imported."""

    def check(self, key: str, value: Any) -> None:
        """Raise ConfigValueError when ``value`` is not valid for ``key``."""

    def describe(self) -> str:
        """Kafka's "Valid Values" column."""


class Between(NamedTuple):
    """ConfigDef.Range: ``atLeast(min)`` when ``max`` is None, ``between(min, max)`` otherwise."""

    min: float | None
    max: float | None = None

    def check(self, key: str, value: Any) -> None:
        if value is None:
            raise ConfigValueError(key, None, "Value must be non-null")
        if self.min is not None and value < self.min:
            raise ConfigValueError(key, _shown(value), f"Value must be at least {_num(self.min)}")
        if self.max is not None and value > self.max:
            raise ConfigValueError(key, _shown(value),
                                   f"Value must be no more than {_num(self.max)}")

    def describe(self) -> str:
        if self.min is None:
            return f"[...,{_num(self.max)}]"
        if self.max is None:
            return f"[{_num(self.min)},...]"
        return f"[{_num(self.min)},...,{_num(self.max)}]"


def AtLeast(minimum: float) -> Between:
    return Between(minimum, None)


class OneOf(NamedTuple):
    """ConfigDef.ValidString (or CaseInsensitiveValidString)."""

    values: tuple[str, ...]
    case_insensitive: bool = False

    def check(self, key: str, value: Any) -> None:
        if value is None and None in self.values:
            return
        ok = (str(value).upper() in {v.upper() for v in self.values} if self.case_insensitive
              else value in self.values)
        if not ok:
            kind = "String must be one of (case insensitive): " if self.case_insensitive else (
                "String must be one of: ")
            raise ConfigValueError(key, value, kind + ", ".join(self.values))

    def describe(self) -> str:
        return "[" + ", ".join(self.values) + "]"


class ListOf(NamedTuple):
    """ConfigDef.ValidList: every item one of ``values``."""

    values: tuple[str, ...]
    non_empty: bool = False

    def check(self, key: str, value: Any) -> None:
        if self.non_empty and not value:
            raise ConfigValueError(key, ",".join(value or ()), "Empty list is not allowed")
        for item in value or ():
            if item not in self.values:
                raise ConfigValueError(key, item,
                                       "String must be one of: " + ", ".join(self.values))

    def describe(self) -> str:
        return "[" + ", ".join(self.values) + "]"


class Check(NamedTuple):
    """A validator written as a function: ``fn(value)`` returns a reason or None."""

    fn: Callable[[Any], str | None]
    valid_values: str = ""

    def check(self, key: str, value: Any) -> None:
        reason = self.fn(value)
        if reason is not None:
            raise ConfigValueError(key, _shown(value), reason)

    def describe(self) -> str:
        return self.valid_values


def _num(n: float | None) -> str:
    if isinstance(n, float) and n.is_integer() and abs(n) < 1e15:
        return java_double(n)
    return str(n)


def _shown(value: Any) -> Any:
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, list):
        return ",".join(value)
    return value


# --- the key --------------------------------------------------------------------------------

@attrs.frozen
class ConfigKey:
    """One key: Kafka's facts (name, type, default, validator) and this broker's handling."""

    name: str
    type: ConfigType
    default: Any
    validator: Validator | None = None
    doc: str = ""
    support: Support = Support.IGNORED
    #: Kafka's dynamic update mode for broker keys: "", "cluster-wide" or "per-broker"
    dynamic: str = ""
    #: Kafka defines it with defineInternal: accepted, never described
    internal: bool = False
    #: which Kafka releases define it, when not all of 3.9 .. 4.x
    versions: str = ""
    #: what the docs add after the support column (e.g. what "stored" waits for)
    note: str = ""

    @property
    def sensitive(self) -> bool:
        return self.type is ConfigType.PASSWORD

    def parse(self, raw: Any) -> Any:
        """Parse and validate ``raw``; raises ConfigValueError with Kafka's message."""
        value = parse_value(self.name, raw, self.type)
        if self.validator is not None and value is not None:
            self.validator.check(self.name, value)
        return value

    def render(self, value: Any) -> str | None:
        return render(value, self.type)

    @property
    def default_text(self) -> str | None:
        """The default as Kafka's docs and DescribeConfigs show it (None: no default)."""
        if self.default is NO_DEFAULT:
            return None
        return self.render(self.default)
