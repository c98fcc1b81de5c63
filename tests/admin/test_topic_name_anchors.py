"""A topic name must be legal as a whole: a trailing newline is INVALID_TOPIC_EXCEPTION, as in
Kafka, and leaves nothing on disk (not a storage error and an orphan partition directory)."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from trio_broker.broker.storage.info import parse_partition_dir
from trio_broker.broker.storage.loader import _SEGMENT_FILE
from trio_broker.broker.storage.topic_metadata import validate_topic_name
from trio_broker.testing import TEST_DEFAULTS, ThreadedBroker


@pytest.mark.parametrize("name", ["orders\n", "a\n", "orders\r", "orders\n\n", "\norders"])
def test_a_name_with_a_line_break_is_illegal(name: str) -> None:
    assert validate_topic_name(name) is not None


def test_storage_names_must_match_whole() -> None:
    assert parse_partition_dir("orders-0") == ("orders", 0)
    assert parse_partition_dir("orders-0\n") is None
    assert _SEGMENT_FILE.fullmatch("00000000000000000000.log")
    assert _SEGMENT_FILE.fullmatch("00000000000000000000.log\n") is None


def test_create_topics_with_a_trailing_newline_fails_cleanly(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = ThreadedBroker(**{**TEST_DEFAULTS, "log_dirs": str(data)}).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        futures = admin.create_topics([NewTopic("orders\n", 1, 1), NewTopic("orders", 1, 1)],
                                      request_timeout=10)
        with pytest.raises(KafkaException) as info:
            futures["orders\n"].result(10)
        error = info.value.args[0]
        assert error.code() == KafkaError.TOPIC_EXCEPTION, error
        assert "illegal" in error.str()
        futures["orders"].result(10)
        on_disk = sorted(p.name for p in data.iterdir() if parse_partition_dir(p.name)
                         or "orders" in p.name)
        assert on_disk == ["orders-0"]
        assert "orders\n" not in admin.list_topics(timeout=10).topics
        del admin  # librdkafka reconnects (and logs) until the client is gone
    finally:
        broker.stop()
