"""Where configuration comes from: defaults < file < environment < ``--override``.

Why one place: every value passes through the same parse (Kafka's types and validators) and
every error says, in one line, which key, which value and where it was set
(``server.properties:12``, ``--override``, ``environment TRIO_BROKER_NUM_PARTITIONS``). Kafka's
``server.properties`` is read as Java's ``Properties.load`` reads it (``java_properties``: line
continuations, ``=``/``:``/whitespace separators, escapes, ``#`` and ``!`` comments); a name
ending in ``.toml`` is read as TOML instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .broker import BrokerConfig, ConfigError, build_config, normalise
from .java_properties import PropertiesError, parse_properties
from .keys import ALIASES, BROKER_KEYS, HONOURED_KEYS

__all__ = ["ENV_PREFIX", "build_config", "describe_keys", "load_config", "normalise",
           "parse_overrides", "read_config_entries", "read_config_file", "read_environment",
           "read_properties"]

ENV_PREFIX = "TRIO_BROKER_"
#: keys ``trio-broker serve --help`` lists
COMMON_KEYS = ("node.id", "listeners", "advertised.listeners", "metrics.listener", "http.listener",
               "log.dirs", "log.flush.interval.messages", "auto.create.topics.enable",
               "num.partitions", "group.initial.rebalance.delay.ms")
# --- sources ------------------------------------------------------------------------------------

def read_properties(text: str, source: str) -> list[tuple[str, str, str]]:
    """Java properties text -> [(key, value, "source:line")], in order (later keys win)."""
    try:
        return [(key, value, f"{source}:{line}") for key, value, line in parse_properties(text)]
    except PropertiesError as exc:
        raise ConfigError(f"{source}:{exc.line}: cannot read Java properties: {exc}") from None


def _flatten_toml(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in data.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten_toml(v, key + "."))
        else:
            out[key] = v
    return out


def read_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A properties or TOML file -> {key: value} (later lines win), any keys (client files too)."""
    return {key: value for key, value, _ in read_config_entries(path)}


def read_config_entries(path: str | os.PathLike[str]) -> list[tuple[str, Any, str]]:
    """A properties or TOML file -> [(key, value, origin)], origin ``file:line`` or ``file``."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"config file {str(p)!r}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {str(p)!r}: not UTF-8 text: {exc}") from exc
    return parse_config_text(text, str(p), toml=p.suffix == ".toml")


def parse_config_text(text: str, source: str, *, toml: bool) -> list[tuple[str, Any, str]]:
    """A config file's text (TOML or Java properties) -> [(key, value, origin)]."""
    if toml:
        # here: its import compiles regular expressions, which a start without a .toml file
        # need not pay for (docs/benchmarks.md, "Start-up")
        import tomllib

        try:
            data = _flatten_toml(tomllib.loads(text))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {source!r}: invalid TOML: {exc}") from exc
        except RecursionError:  # tomllib (and the flattening) recurse per level of nesting
            raise ConfigError(f"config file {source!r}: invalid TOML: nested too deeply") from None
        return [(k, v, source) for k, v in data.items()]
    return read_properties(text, source)


def _env_names() -> dict[str, str]:
    names = {ENV_PREFIX + key.upper().replace(".", "_").replace("-", "_"): key
             for key in BROKER_KEYS}
    names.update({ENV_PREFIX + alias.upper().replace(".", "_"): alias for alias in ALIASES})
    return names


def read_environment(environ: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """``TRIO_BROKER_LOG_DIRS=/x`` -> [("log.dirs", "/x", "environment TRIO_BROKER_LOG_DIRS")]."""
    names = _env_names()
    out = []
    for name, value in environ.items():
        if not name.startswith(ENV_PREFIX):
            continue
        key = names.get(name)
        if key is None:
            raise ConfigError(f"environment {name}: unknown config key "
                              f"{name[len(ENV_PREFIX):].lower().replace('_', '.')!r}")
        out.append((key, value, f"environment {name}"))
    return out


def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--override {item!r}: expected key=value")
        out[key.strip()] = value.strip()
    return out


def load_config(config_file: str | os.PathLike[str] | None = None, *,
                environ: Mapping[str, str] | None = None,
                overrides: Mapping[str, Any] | None = None) -> BrokerConfig:
    """Defaults < file < environment < overrides, validated into a BrokerConfig."""
    entries: list[tuple[str, Any, str]] = []
    if config_file is not None:
        entries += read_config_entries(config_file)
    entries += read_environment(os.environ if environ is None else environ)
    entries += [(k, v, "--override") for k, v in (overrides or {}).items()]
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for key, value, origin in entries:
        values[key] = value
        origins[key] = origin
    return build_config(values, origins)


def describe_keys(common_only: bool = False) -> list[tuple[str, str, str]]:
    """(key, default, doc) of the honoured keys, for ``--help``."""
    rows = []
    for name, key in HONOURED_KEYS.items():
        if common_only and name not in COMMON_KEYS:
            continue
        rows.append((name, key.default_text or "", key.doc))
    return rows
