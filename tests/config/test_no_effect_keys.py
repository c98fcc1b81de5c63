"""Every settable key either acts or is named as having no effect: the marks on the key tables
are checked against the code that reads keys, and a dynamic change that sets a no-effect key is
named in one log line (the start-up line: tests/config/test_sources.py)."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

import trio_broker
from trio_broker.broker.config.defs import Support
from trio_broker.broker.config.keys import ALIASES, BROKER_KEYS, NO_EFFECT
from trio_broker.broker.config.topic_keys import TOPIC_KEYS

PACKAGE = Path(trio_broker.__file__).parent
#: the key tables themselves
TABLES = {"broker/config/kafka_keys.py", "broker/config/keys.py", "broker/config/topic_keys.py",
          "broker/config/docgen.py"}
#: BrokerConfig's and LogConfig's field per key (``segment_ms: int = _default("segment.ms")``)
#: and LogConfig's cross-field checks (Kafka validates stored keys too), and the configs the
#: internal topics are made with (Kafka's, set rather than read): not reads
NOT_READS = (re.compile(r"^\s+\w+: [^=]+= _(?:default|f)\(\n?\s*\"[\w.-]+\"\)\n", re.M),
             re.compile(r"^    def validate\(self\) -> None:.*?(?=^    def )", re.M | re.S),
             re.compile(r"^def transaction_topic_configs\(.*?(?=^\S)", re.M | re.S))


@pytest.fixture(scope="module")
def code() -> str:
    """The broker's source outside the key tables and LogConfig's fields (what reads keys)."""
    text = "\n".join(p.read_text() for p in sorted(PACKAGE.rglob("*.py"))
                     if p.relative_to(PACKAGE).as_posix() not in TABLES)
    for pattern in NOT_READS:
        text = pattern.sub("", text)
    return text


def _read(code: str, name: str, attr: str) -> bool:
    return f'"{name}"' in code or re.search(rf"\b{re.escape(attr)}\b", code) is not None


#: honoured keys that act through their validator alone (a value they refuse stops the start)
VALIDATED_ONLY = {"process.roles"}  # must include broker; the node is always both roles


def test_every_honoured_broker_key_is_read_outside_the_tables(code):
    topic_defaults = {b for t in TOPIC_KEYS.values() for b, _ in t.synonyms}
    unread = [name for name, key in BROKER_KEYS.items()
              if key.support is Support.HONOURED and name not in ALIASES
              and name not in VALIDATED_ONLY
              and name not in topic_defaults  # they act as their topic config does (below)
              and not _read(code, name, name.replace(".", "_").replace("-", "_"))]
    assert unread == []
    assert all(BROKER_KEYS[target].support is Support.HONOURED for target in ALIASES.values())


def test_every_honoured_topic_config_is_read_and_no_stored_one_is(code):
    honoured = {n: t for n, t in TOPIC_KEYS.items() if t.key.support is Support.HONOURED}
    assert [n for n, t in honoured.items() if not _read(code, n, t.attr)] == []
    # a stored key read somewhere acts (or half acts): its mark must say so
    stored = {n: t for n, t in TOPIC_KEYS.items() if t.key.support is not Support.HONOURED}
    assert [n for n, t in stored.items() if _read(code, n, t.attr)] == []


def test_topic_defaults_follow_their_topic_config():
    for topic in TOPIC_KEYS.values():
        for broker_key, _ in topic.synonyms:
            if broker_key not in ALIASES:
                assert BROKER_KEYS[broker_key].support is topic.key.support, broker_key


def _no_effect_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith(NO_EFFECT)]


def test_a_change_that_sets_no_effect_keys_is_named_in_one_line(kafka_broker, unique_topic,
                                                                caplog):
    caplog.set_level(logging.INFO, logger="trio_broker.broker.apis")
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers})
    topic = unique_topic("no-effect")
    admin.create_topics([NewTopic(topic, 1, 1, config={
        "preallocate": "true", "retention.ms": "600000",
        "leader.replication.throttled.replicas": "*"})])[topic].result(10)
    assert _no_effect_lines(caplog) == [
        f"{NO_EFFECT} (topic {topic}): leader.replication.throttled.replicas, preallocate"]

    caplog.clear()
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("segment.jitter.ms", "100", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("segment.ms", "3600000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("preallocate", None, incremental_operation=AlterConfigOpType.DELETE)])
    admin.incremental_alter_configs([resource])[resource].result(10)
    assert _no_effect_lines(caplog) == [f"{NO_EFFECT} (topic {topic}): segment.jitter.ms"]

    caplog.clear()
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "700000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(10)
    assert _no_effect_lines(caplog) == []  # a key that acts: no line

    caplog.clear()
    broker = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
        ConfigEntry("log.preallocate", "true", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("log.cleaner.backoff.ms", "15000",
                    incremental_operation=AlterConfigOpType.SET)])
    try:
        admin.incremental_alter_configs([broker])[broker].result(10)
        assert _no_effect_lines(caplog) == [
            f"{NO_EFFECT} (dynamic per-broker config): log.preallocate"]
    finally:
        reset = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
            ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
            for k in ("log.preallocate", "log.cleaner.backoff.ms")])
        admin.incremental_alter_configs([reset])[reset].result(10)
