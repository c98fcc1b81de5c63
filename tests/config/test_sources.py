"""Reading configuration: Java properties syntax, every source named in errors, listener maps,
KRaft keys, keys ignored on one node."""

from __future__ import annotations

import logging

import pytest

from trio_broker import open_broker
from trio_broker.broker.config import BrokerConfig, ConfigError, load_config


def _file(tmp_path, text: str, name: str = "server.properties"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_java_properties_syntax(tmp_path):
    path = _file(tmp_path, "\n".join([
        "# a hash comment",
        "! a bang comment",
        "num.partitions : 3",                      # colon separator, spaces around
        "num.io.threads 4",                        # whitespace separator
        "log.dirs = /data/one,\\",                 # continuation line...
        "           /data/two",                    # ...its leading spaces dropped
        "cluster.id=caf\\u00e9-\\tcluster",        # unicode and tab escapes
        "metrics.listener=",                       # empty value
        "   num.network.threads=5   ",             # leading whitespace; value trimmed by Kafka
        "log.level\tDEBUG",                        # tab separator
    ]) + "\n")
    config = load_config(path, environ={})
    assert config.num_partitions == 3
    assert config.num_io_threads == 4
    assert config.log_dirs == "/data/one,/data/two"
    assert config.cluster_id == "café-\tcluster"
    assert config.metrics_listener == ""
    assert config.num_network_threads == 5
    assert config.log_level == "DEBUG"
    assert config.origins["num.io.threads"] == f"{path}:4"
    assert config.origins["cluster.id"] == f"{path}:7"


@pytest.mark.parametrize(("line", "message"), [
    ("num.partitions=many",
     "Invalid value many for configuration num.partitions: Not a number of type INT"),
    ("socket.send.buffer.bytes=big",
     "Invalid value big for configuration socket.send.buffer.bytes: Not a number of type INT"),
    ("no.such.key=1", "unknown config key 'no.such.key'"),
    ("process.roles=controller", "process.roles must include broker"),
    ("offsets.topic.replication.factor=99999",
     "Invalid value 99999 for configuration offsets.topic.replication.factor: "
     "Not a number of type SHORT"),
    ("controller.quorum.voters=localhost:9093",
     "Invalid value localhost:9093 for configuration controller.quorum.voters: Each entry should "
     "be in the form `{id}@{host}:{port}`"),
    ("inter.broker.protocol.version=banana",
     "Invalid value banana for configuration inter.broker.protocol.version: Version banana is "
     "not a valid version"),
    ("group.coordinator.rebalance.protocols=classic,bogus",
     "Invalid value bogus for configuration group.coordinator.rebalance.protocols: String must "
     "be one of: classic, consumer, share, streams"),
])
def test_file_errors_name_key_value_file_and_line(tmp_path, line, message):
    path = _file(tmp_path, f"# header\nnum.io.threads=2\n\n{line}\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert str(info.value) == f"{path}:4: {message}" or (
        str(info.value).startswith(f"{path}:4: ") and message in str(info.value))
    assert "\n" not in str(info.value)


def test_errors_name_the_environment_variable_and_the_override():
    with pytest.raises(ConfigError) as env:
        load_config(environ={"TRIO_BROKER_NUM_PARTITIONS": "0"})
    assert str(env.value) == ("environment TRIO_BROKER_NUM_PARTITIONS: Invalid value 0 for "
                              "configuration num.partitions: Value must be at least 1")
    with pytest.raises(ConfigError) as override:
        load_config(environ={}, overrides={"log.cleanup.policy": "delete,shred"})
    assert str(override.value) == ("--override: Invalid value shred for configuration "
                                   "log.cleanup.policy: String must be one of: compact, delete")
    with pytest.raises(ConfigError, match=r"^environment TRIO_BROKER_NO_SUCH: unknown config key"):
        load_config(environ={"TRIO_BROKER_NO_SUCH": "1"})


def test_environment_reaches_every_kafka_key():
    config = load_config(environ={"TRIO_BROKER_SOCKET_SEND_BUFFER_BYTES": "65536",
                                  "TRIO_BROKER_LOG_CLEANER_THREADS": "2"})
    assert config.value_of("socket.send.buffer.bytes") == 65536
    assert config.value_of("log.cleaner.threads") == 2
    assert config.origins["log.cleaner.threads"] == "environment TRIO_BROKER_LOG_CLEANER_THREADS"


def test_toml_errors_name_the_file(tmp_path):
    path = _file(tmp_path, 'num.partitions = "many"\n', "broker.toml")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert str(info.value) == (f"{path}: Invalid value many for configuration num.partitions: "
                               "Not a number of type INT")


def test_listener_names_map_to_security_protocols(tmp_path):
    config = load_config(environ={}, overrides={
        "listeners": "INTERNAL://127.0.0.1:9094,EXTERNAL://127.0.0.1:9095,CONTROLLER://:9093",
        "advertised.listeners": "INTERNAL://broker.internal:9094,CONTROLLER://localhost:9093",
        "listener.security.protocol.map":
            "INTERNAL:SASL_SSL,EXTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "ssl.certfile": "/unused.pem", "sasl.credentials.file": "/unused.json"})
    assert [(lst.name, lst.security_protocol) for lst in config.listener_list] == [
        ("INTERNAL", "SASL_SSL"), ("EXTERNAL", "PLAINTEXT")]
    assert [lst.name for lst in config.all_listeners] == ["INTERNAL", "EXTERNAL", "CONTROLLER"]
    assert [(a.name, a.host) for a in config.advertised_listener_list] == [
        ("INTERNAL", "broker.internal")]


@pytest.mark.parametrize(("overrides", "message"), [
    ({"listeners": "INTERNAL://127.0.0.1:9094"},
     "no security protocol defined for listener INTERNAL"),
    ({"listeners": "PLAINTEXT://127.0.0.1:1,PLAINTEXT://127.0.0.1:2"},
     "each listener must have a different name"),
    ({"listeners": "CONTROLLER://127.0.0.1:9093", "controller.listener.names": "CONTROLLER"},
     "expected at least one NAME://host:port that is not a controller listener"),
    ({"listener.security.protocol.map": "INTERNAL:TLS"},
     "Invalid value INTERNAL:TLS for configuration listener.security.protocol.map"),
    ({"broker.id": "1", "node.id": "2"},
     "The values for broker.id (1) and node.id (2) must be the same if both are specified."),
])
def test_keys_that_must_agree(overrides, message):
    with pytest.raises(ConfigError) as info:
        load_config(environ={}, overrides=overrides)
    assert message in str(info.value)
    assert str(info.value).startswith("--override: ")


def test_listener_prefixed_keys_are_accepted_and_checked():
    config = load_config(environ={}, overrides={
        "listener.name.internal.scram-sha-256.sasl.jaas.config": "org.Module required;",
        "listener.name.internal.ssl.keystore.location": "/etc/k.jks",
        "listener.name.internal.max.connections": "10"})
    assert "listener.name.internal.max.connections" in config.ignored_keys()
    with pytest.raises(ConfigError, match=r"Invalid value ten for configuration "
                                          r"listener\.name\.internal\.max\.connections"):
        load_config(environ={}, overrides={"listener.name.internal.max.connections": "ten"})
    with pytest.raises(ConfigError, match=r"unknown config key 'listener\.name\.internal\.nope'"):
        load_config(environ={}, overrides={"listener.name.internal.nope": "1"})


def test_keys_without_meaning_on_one_node_are_listed_as_ignored():
    config = load_config(environ={}, overrides={
        "controller.quorum.voters": "1@localhost:9093", "num.replica.fetchers": "4",
        "num.partitions": "2", "log.cleaner.io.buffer.size": "65536",
        "log.cleaner.threads": "2"})
    assert config.ignored_keys() == ["controller.quorum.voters", "log.cleaner.io.buffer.size",
                                     "num.replica.fetchers"]
    assert (config.num_partitions, config.log_cleaner_threads) == (2, 2)


async def test_keys_without_effect_are_named_once_in_the_log(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="trio_broker.broker.lifecycle")
    async with open_broker(log_dirs=str(tmp_path), **{
            "process.roles": "broker,controller", "node.id": "1",
            "controller.quorum.voters": "1@localhost:9093", "log.preallocate": "true",
            "transaction.state.log.min.isr": "1", "log.cleaner.min.cleanable.ratio": "0.2"}
            ) as broker:
        assert broker.config.node_id == 1
    lines = [r.getMessage() for r in caplog.records if "no effect" in r.getMessage()]
    # ignored on one node, and a topic default whose topic config is only stored; the
    # cleaner's ratio acts, so it is not named
    assert lines == ["Accepted for compatibility, no effect here: controller.quorum.voters, "
                     "log.preallocate, transaction.state.log.min.isr"]


def test_log_dir_is_used_when_log_dirs_is_not_given(tmp_path):
    config = load_config(environ={}, overrides={"log.dir": str(tmp_path / "x")})
    assert config.log_dir_list == [tmp_path / "x"]
    config = load_config(environ={}, overrides={"log.dir": "/ignored", "log.dirs": "/used"})
    assert [str(p) for p in config.log_dir_list] == ["/used"]


def test_values_set_in_code_are_checked_like_values_read_from_a_file():
    with pytest.raises(ConfigError, match=r"Invalid value 0 for configuration num\.io\.threads"):
        BrokerConfig(num_io_threads=0)
    config = BrokerConfig().evolve(**{"log.retention.hours": 1, "num_partitions": 4})
    assert (config.log_retention_effective_ms, config.num_partitions) == (3_600_000, 4)
    assert config.static_values()["num.partitions"] == "4"
