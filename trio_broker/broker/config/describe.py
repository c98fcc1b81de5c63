"""DescribeConfigs' answer: each config's value, source, synonyms, type and documentation.

Why Kafka's algorithm, quirks included (``ConfigHelper.configSynonyms``): admin tools decide what
a user "set" from these sources, and infrastructure-as-code tools compare them to find drift.
Synonyms are walked layer by layer (dynamic per-broker, dynamic cluster default, static, default),
each layer in synonym order (``log.retention.ms``, ``.minutes``, ``.hours``), and the list is cut
before the first entry with the config's own name. So a stock ``log.retention.hours=168`` shows
on a topic's ``retention.ms`` as no synonym at all (source DEFAULT_CONFIG), exactly as Kafka
shows it, while ``segment.bytes`` lists ``STATIC_BROKER_CONFIG log.segment.bytes``.
"""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Iterable, Mapping

import attrs

from .broker import BrokerConfig
from .defs import Support
from .dynamic import DynamicBrokerConfigs
from .keys import ALIASES, BROKER_KEYS, LISTENER_MECHANISM_KEYS, base_key
from .topic_keys import TOPIC_KEYS

__all__ = ["ConfigSource", "Entry", "Sources", "Synonym", "describe_broker", "describe_topic"]


class ConfigSource(enum.IntEnum):
    """DescribeConfigsResponse.ConfigSource."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


@attrs.frozen
class Synonym:
    name: str
    value: str | None
    source: ConfigSource


@attrs.frozen
class Entry:
    name: str
    value: str | None
    source: ConfigSource
    sensitive: bool
    read_only: bool
    #: every synonym; the handler sends them only when the request asks (include_synonyms)
    synonyms: tuple[Synonym, ...]
    documentation: str | None
    #: DescribeConfigs v3+ config_type (0 = unknown)
    config_type: int


_LISTENER_KEY = re.compile(r"listener\.name\.[^.]*\.(.*)")
_SYNONYM_GROUPS = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)


def broker_synonym_names(name: str) -> list[str]:
    """Kafka's ``DynamicBrokerConfig.brokerConfigSynonyms(name, matchListenerOverride=true)``."""
    for group in _SYNONYM_GROUPS:
        if name in group:
            return list(group)
    match = _LISTENER_KEY.fullmatch(name)
    if match is not None:
        rest = match.group(1)
        mechanism_key = next((k for k in LISTENER_MECHANISM_KEYS if rest.endswith(k)), None)
        return [name, mechanism_key or rest]
    return [name]


@functools.cache
def _defaults() -> dict[str, str]:
    """Every broker key's default as text: fixed, so rendered once, not per described resource
    (rendering some 670 defaults for each topic would be most of DescribeConfigs' work)."""
    return {name: key.default_text for name, key in BROKER_KEYS.items()
            if key.default_text is not None}


class Sources:
    """The four layers a broker config value can come from, as text by key."""

    def __init__(self, dynamic: DynamicBrokerConfigs) -> None:
        self.per_broker = dynamic.per_broker
        self.cluster_default = dynamic.cluster_level()
        self.static = dynamic.static.static_values()
        self.defaults = _defaults()

    def synonyms(self, name: str, names: Iterable[str], sensitive: bool) -> list[Synonym]:
        names = list(names)
        found: list[Synonym] = []
        for layer, source in ((self.per_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
                              (self.cluster_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                              (self.static, ConfigSource.STATIC_BROKER_CONFIG),
                              (self.defaults, ConfigSource.DEFAULT_CONFIG)):
            for synonym in names:
                if synonym in layer:
                    found.append(Synonym(synonym, None if sensitive else layer[synonym], source))
        while found and found[0].name != name:
            found.pop(0)
        return found


def _key_of(name: str) -> tuple[int, bool, str | None]:
    """(config_type id, sensitive, documentation) of a broker key or a listener-prefixed one."""
    key = BROKER_KEYS.get(name) or BROKER_KEYS.get(base_key(name) or "")
    if key is None:
        return 0, True, None  # Kafka treats a key of unknown type as sensitive
    return key.type.value, key.sensitive, key.doc


def describe_topic(values: Mapping[str, str | None], overrides: Mapping[str, str],
                   sources: Sources, keys: set[str] | None) -> list[Entry]:
    """The entries of one topic: ``values`` is its LogConfig rendered (Kafka names)."""
    out = []
    for name, value in sorted(values.items()):
        if keys and name not in keys:
            continue
        topic_key = TOPIC_KEYS[name].key
        broker_key = TOPIC_KEYS[name].broker_key
        synonyms = [] if broker_key is None else sources.synonyms(
            broker_key, broker_synonym_names(broker_key), False)
        if name in overrides:
            synonyms.insert(0, Synonym(name, value, ConfigSource.TOPIC_CONFIG))
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        out.append(Entry(name, value, source, False, False, tuple(synonyms),
                         _topic_doc(topic_key.doc, topic_key.support, topic_key.note),
                         topic_key.type.value))
    return out


def _topic_doc(doc: str, support: Support, note: str) -> str:
    if support is Support.HONOURED:
        return doc
    return f"{doc} Stored and described; not acted on by this broker ({note})."


def describe_broker(current: BrokerConfig, sources: Sources, keys: set[str] | None, *,
                    per_broker: bool) -> list[Entry]:
    """A broker's entries: every key (resource "<node id>"), or the cluster default ones ("")."""
    if per_broker:
        names = {n for n, k in BROKER_KEYS.items() if not k.internal} | set(current.originals)
    else:
        names = set(sources.cluster_default)
    out = []
    for name in sorted(names):
        if keys and name not in keys:
            continue
        config_type, sensitive, doc = _key_of(name)
        value = _current_text(current, name) if per_broker else sources.cluster_default[name]
        synonyms = sources.synonyms(name, broker_synonym_names(name), sensitive)
        if not per_broker:
            synonyms = [s for s in synonyms
                        if s.source is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        key = BROKER_KEYS.get(base_key(name) or name)
        read_only = key is None or not key.dynamic
        out.append(Entry(name, None if sensitive else value, source, sensitive, read_only,
                         tuple(synonyms), doc, config_type))
    return out


def _current_text(config: BrokerConfig, name: str) -> str | None:
    target = ALIASES.get(name)
    if target is not None and name not in config.originals:
        name = target
    if name in BROKER_KEYS:
        return BROKER_KEYS[name].render(config.value_of(name))
    return config.originals.get(name)
