"""``trio-broker transactions``: an open transaction as the command lists and describes it."""

from __future__ import annotations

import confluent_kafka

from trio_broker.cli import main


def test_list_and_describe_an_open_transaction(kafka_broker, unique_topic, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    topic = kafka_broker.create_topic(unique_topic("cli"), 2)
    bootstrap = kafka_broker.bootstrap_servers
    txn_id = f"cli-{topic}"
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap,
                                         "transactional.id": txn_id})
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce(topic, value=b"x", partition=1)
    producer.flush(10)
    assert main(["transactions", "list", "--state", "Ongoing",
                 "--bootstrap-server", bootstrap]) == 0
    out, _ = capsys.readouterr()
    line = next(line for line in out.splitlines() if txn_id in line)
    assert "Ongoing" in line
    assert main(["transactions", "describe", txn_id, "--bootstrap-server", bootstrap]) == 0
    out, _ = capsys.readouterr()
    assert "Ongoing" in out
    assert f"{topic}: 1" in out
    producer.abort_transaction(10)
    assert main(["transactions", "describe", "nope", "--bootstrap-server", bootstrap]) == 1
    _, err = capsys.readouterr()
    assert "does not exist" in err
    assert main(["transactions", "list", "--state", "Bogus",
                 "--bootstrap-server", bootstrap]) == 1
