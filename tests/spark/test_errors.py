"""What a user sees when the broker is unreachable, a topic is unknown, or data is gone."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest

from trio_broker.cli import main as cli_main
from trio_broker.spark import user_message

pytestmark = pytest.mark.spark


def _load_error(spark: Any, **options: str) -> str:
    with pytest.raises(Exception) as caught:  # noqa: PT011 - Spark wraps it in its own type
        spark.read.format("trio_broker").options(**options).load().collect()
    text = str(caught.value)
    assert "at org.apache.spark" not in text  # a Python message, not a JVM stack dump
    message = user_message(caught.value)
    assert message is not None, text
    return message


def test_unreachable_broker(spark: Any, free_port: int, tmp_path: Path,
                            capsys: pytest.CaptureFixture[str]) -> None:
    address = f"127.0.0.1:{free_port}"
    message = _load_error(spark, **{"kafka.bootstrap.servers": address, "subscribe": "t"})
    assert message == (f"no broker reachable at {address}: "
                       f"cannot connect to the broker at {address}: Connection refused")

    assert cli_main(["export", "--bootstrap-server", address, "--topic", "t",
                        "--out", str(tmp_path)]) == 1
    assert f"error: {message}" in " ".join(capsys.readouterr().err.split())


def test_unknown_topic(spark: Any, kafka_broker: Any, tmp_path: Path,
                       capsys: pytest.CaptureFixture[str]) -> None:
    options = {"kafka.bootstrap.servers": kafka_broker.bootstrap_servers,
               "subscribe": "no-such-topic"}
    assert _load_error(spark, **options) == "topic 'no-such-topic' does not exist"
    assert cli_main(["export", "--bootstrap-server", kafka_broker.bootstrap_servers, "--topic",
                        "no-such-topic", "--follow", "--out", str(tmp_path)]) == 1
    assert "error: topic 'no-such-topic' does not exist" in capsys.readouterr().err


def test_offsets_past_retention(spark: Any, kafka_broker: Any, unique_topic: Any) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = kafka_broker.create_topic(unique_topic("retention"), 1, {
        "segment.bytes": "4096", "retention.bytes": "8192", "retention.ms": "-1"})
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for i in range(400):
        producer.produce(topic, value=b"%04d" % i + b"." * 96)
        if i % 40 == 39:  # ten batches of ~4.4 KB: each fills a segment
            assert producer.flush(30) == 0
    del producer
    deleted = kafka_broker.call(kafka_broker.broker.state.logs.run_retention,
                                int(time.time() * 1000))
    assert deleted > 0

    options = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic,
               "startingOffsets": json.dumps({topic: {"0": 0}})}
    message = _load_error(spark, **options)
    assert message.startswith("offsets 0..")
    assert f"of {topic}-0 are no longer available: " \
        "retention deleted them (the log starts at offset" in message
    assert "failOnDataLoss" in message

    skipped = (spark.read.format("trio_broker").options(**options)
               .option("failOnDataLoss", "false").load().select("offset").collect())
    offsets = sorted(r.offset for r in skipped)
    assert offsets == list(range(offsets[0], 400))
    assert offsets[0] > 0
