"""Configuration: Kafka names and defaults, source precedence, one-line errors."""

from __future__ import annotations

import pytest

from trio_broker.broker.config import BrokerConfig, ConfigError, load_config
from trio_broker.cli import main


def test_kafka_defaults():
    c = BrokerConfig()
    assert (c.num_network_threads, c.num_io_threads, c.queued_max_requests) == (3, 8, 500)
    assert c.socket_request_max_bytes == 104_857_600
    assert c.connections_max_idle_ms == 600_000
    assert c.message_max_bytes == 1_048_588
    assert c.log_retention_effective_ms == 7 * 24 * 3600 * 1000
    assert c.group_initial_rebalance_delay_ms == 3000
    assert c.auto_create_topics_enable is True


def test_precedence_defaults_file_environment_override(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("# comment\nnum.partitions=2\nlog.dirs=/from/file\n! other comment\n"
                     "num.io.threads : 4\n")
    env = {"TRIO_BROKER_LOG_DIRS": "/from/env", "TRIO_BROKER_NUM_NETWORK_THREADS": "5",
           "UNRELATED": "x"}
    c = load_config(props, environ=env, overrides={"num.network.threads": "6"})
    assert (c.num_partitions, c.num_io_threads) == (2, 4)  # file
    assert c.log_dirs == "/from/env"  # environment beats file
    assert c.num_network_threads == 6  # override beats environment


def test_toml_file_with_dotted_keys(tmp_path):
    f = tmp_path / "broker.toml"
    f.write_text('listeners = "PLAINTEXT://127.0.0.1:0"\n"auto.create.topics.enable" = false\n'
                 '[log]\ndirs = "/data"\n[log.retention]\nhours = 1\n')
    c = load_config(f, environ={})
    assert c.log_dirs == "/data"
    assert c.log_retention_effective_ms == 3_600_000
    assert c.auto_create_topics_enable is False


@pytest.mark.parametrize(("overrides", "message"), [
    ({"num.partitions": "many"},
     "--override: Invalid value many for configuration num.partitions: Not a number of type INT"),
    ({"no.such.key": "1"}, "--override: unknown config key 'no.such.key'"),
    ({"listeners": "127.0.0.1:9092"},
     "--override: Invalid value 127.0.0.1:9092 for configuration listeners: expected "
     "NAME://host:port"),
    ({"num.io.threads": "0"},
     "--override: Invalid value 0 for configuration num.io.threads: Value must be at least 1"),
    ({"log.message.timestamp.type": "Now"}, "String must be one of: CreateTime, LogAppendTime"),
    ({"auto.create.topics.enable": "perhaps"}, "Expected value to be either true or false"),
    ({"max.connections.per.ip.overrides": "a:b"}, "expected host:N"),
    ({"default.replication.factor": "3"}, "Value must be 1 on a single broker"),
    ({"schema.registry.listener": "https://127.0.0.1:0"},
     "schema.registry.listener='https://127.0.0.1:0': https needs ssl.certfile"),
    ({"rest.proxy.listener": "https://127.0.0.1:0"},
     "rest.proxy.listener='https://127.0.0.1:0': https needs ssl.certfile"),
])
def test_bad_values_are_one_line_errors_naming_key_value_and_expectation(overrides, message):
    with pytest.raises(ConfigError) as info:
        load_config(overrides=overrides, environ={})
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_unknown_environment_key_is_an_error():
    with pytest.raises(ConfigError, match="TRIO_BROKER_NUM_PARTITONS"):
        load_config(environ={"TRIO_BROKER_NUM_PARTITONS": "3"})


def test_cli_reports_bad_config_in_one_line_and_exit_code_2(capsys, tmp_path):
    assert main(["serve", "--override", "num.partitions=x"]) == 2
    err = capsys.readouterr().err
    assert err == ("trio-broker serve: error: --override: Invalid value x for configuration "
                   "num.partitions: Not a number of type INT\n")
    assert main(["serve", str(tmp_path / "missing.properties")]) == 2
    assert "config file" in capsys.readouterr().err
    assert main(["serve", "--override", "novalue"]) == 2
    assert "expected key=value" in capsys.readouterr().err


def test_serve_help_lists_common_keys(capsys):
    with pytest.raises(SystemExit) as info:
        main(["serve", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for key in ("listeners", "log.dirs", "num.partitions", "log.flush.interval.messages"):
        assert key in out
