"""Share groups on ``/metrics`` under Kafka's names (``metrics/collectors/share.py``): the group
counts of the group coordinator's metrics, each share-partition's records in flight, and the
acknowledgements by type, scraped while confluent-kafka's ``ShareConsumer`` holds records and
after it acknowledged them."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import AcknowledgeType

from tests.metrics.test_metrics import scrape, value
from tests.share import test_share_errors as raw
from tests.share.test_share_consumer import create_topic, members, produce, share_consumer, wait_for
from trio_broker.client.blocking import BrokerConnection, parse_address
from trio_broker.protocol.api_keys import ApiKey
from trio_broker.protocol.errors import ErrorCode
from trio_broker.testing import ThreadedBroker

GROUPS = "kafka_server_group_coordinator_metrics_group_count"
BY_STATE = "kafka_server_group_coordinator_metrics_share_group_count"
IN_FLIGHT = "kafka_server_sharepartitionmetrics_inflightmessagecount"
ACKS = "kafka_server_sharegroupmetrics_recordacknowledgements_total"


@pytest.mark.broker_config(metrics_listener="http://127.0.0.1:0")
def test_share_group_metrics(kafka_broker: ThreadedBroker,
                             unique_topic: Callable[[str], str]) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic, group = unique_topic("t"), unique_topic("sg")
    samples = scrape(kafka_broker)
    assert value(samples, GROUPS, protocol="share") == 0
    create_topic(bootstrap, topic)
    c = share_consumer(bootstrap, group, **{"share.acknowledgement.mode": "explicit"})
    c.subscribe([topic])
    wait_for(lambda: (c.poll(0.2), members(bootstrap, group))[1] == 1, 30, "the member")
    produce(bootstrap, topic, range(6))
    held = []
    deadline = time.monotonic() + 30
    while len(held) < 6 and time.monotonic() < deadline:
        held += [m for m in c.poll(0.5) if m.error() is None]
    assert len(held) == 6
    samples = scrape(kafka_broker)  # six records held by the one member
    assert value(samples, GROUPS, protocol="share") == 1
    assert value(samples, BY_STATE, state="stable") == 1
    assert value(samples, BY_STATE, state="empty") == 0
    assert value(samples, IN_FLIGHT, group=group, topic=topic, partition="0") == 6
    # three accepted, two rejected, one released (it comes back: still in flight)
    for m, kind in zip(held, [AcknowledgeType.ACCEPT] * 3 + [AcknowledgeType.REJECT] * 2
                       + [AcknowledgeType.RELEASE], strict=True):
        c.acknowledge(m, kind)
    c.commit_sync()
    samples = scrape(kafka_broker)
    assert value(samples, ACKS, acktype="Accept") == 3
    assert value(samples, ACKS, acktype="Reject") == 2
    assert value(samples, ACKS, acktype="Release") == 1
    assert value(samples, IN_FLIGHT, group=group, topic=topic, partition="0") == 1
    c.close()
    wait_for(lambda: members(bootstrap, group) == 0, 30, "the leave")
    samples = scrape(kafka_broker)
    assert value(samples, BY_STATE, state="empty") == 1
    assert value(samples, BY_STATE, state="stable") == 0
    assert value(samples, IN_FLIGHT, group=group, topic=topic, partition="0") == 1


FETCHES = "kafka_server_brokertopicmetrics_totalsharefetchrequests_total"
FAILED_FETCHES = "kafka_server_brokertopicmetrics_failedsharefetchrequests_total"
ACK_REQUESTS = "kafka_server_brokertopicmetrics_totalshareacknowledgementrequests_total"
FAILED_ACKS = "kafka_server_brokertopicmetrics_failedshareacknowledgementrequests_total"


@pytest.mark.broker_config(metrics_listener="http://127.0.0.1:0")
def test_share_request_counters_per_topic(kafka_broker: ThreadedBroker,
                                          unique_topic: Callable[[str], str]) -> None:
    """BrokerTopicMetrics' share request counters on the wire: a ShareFetch counted once for
    its topic, an acknowledgement of records never acquired and a fetch from a partition the
    topic does not have counted as failed, acknowledgements piggybacked on a ShareFetch counted
    as acknowledgement requests too."""
    group, topic = unique_topic("sg"), unique_topic("t")
    series = (FETCHES, FAILED_FETCHES, ACK_REQUESTS, FAILED_ACKS)
    before = scrape(kafka_broker)  # the broker may serve other tests: all topics as deltas
    with BrokerConnection(*parse_address(kafka_broker.bootstrap_servers)) as conn:
        topic_id = raw.create_topic(conn, topic)
        raw.heartbeat(conn, group, "m1", 0, [topic])
        raw.produce(kafka_broker.bootstrap_servers, topic, 4)
        assert raw.acquired(raw.share_fetch(conn, group, "m1", 0, topic_id)) == [(0, 3, 1)]
        refused = raw.share_ack(conn, group, "m1", 1, topic_id, [(50, 60, [1])])
        assert refused.responses[0].partitions[0].error_code == ErrorCode.INVALID_RECORD_STATE
        assert raw.share_ack(conn, group, "m1", 2, topic_id, [(0, 1, [1])]).error_code == 0
        # a second fetch carrying good acknowledgements: one more of each, nothing failed
        assert raw.share_fetch(conn, group, "m1", 3, topic_id, acks=[(2, 3, [1])]).error_code == 0
        # a fetch from a partition the topic does not have fails for the topic
        raw.heartbeat(conn, group, "m2", 0, [topic])
        bad = conn.call(ApiKey.ShareFetch, 1, group_id=group, member_id="m2",
                        share_session_epoch=0, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                        max_records=500, batch_size=500, topics=[raw.SF.FetchTopic(
                            topic_id=topic_id,
                            partitions=[raw.SF.FetchTopic.FetchPartition(partition_index=5)])])
        assert bad.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    samples = scrape(kafka_broker)
    expected = dict(zip(series, (3, 1, 3, 1), strict=True))
    for name in series:
        assert value(samples, name, topic=topic) == expected[name], name
        assert value(samples, name) - value(before, name) == expected[name], name


LOCK_TIMEOUTS = "kafka_server_sharepartitionmetrics_acquisitionlocktimeout_total"


@pytest.mark.broker_config(metrics_listener="http://127.0.0.1:0",
                           group_share_record_lock_duration_ms=1000)
def test_acquisition_lock_timeouts_are_counted(kafka_broker: ThreadedBroker,
                                               unique_topic: Callable[[str], str]) -> None:
    """Records left unacknowledged past the acquisition lock: SharePartitionMetrics'
    AcquisitionLockTimeoutPerSec counts each of them once, when they come back."""
    group, topic = unique_topic("sg"), unique_topic("t")
    with BrokerConnection(*parse_address(kafka_broker.bootstrap_servers)) as conn:
        topic_id = raw.create_topic(conn, topic)
        raw.heartbeat(conn, group, "m1", 0, [topic])
        raw.produce(kafka_broker.bootstrap_servers, topic, 3)
        assert raw.acquired(raw.share_fetch(conn, group, "m1", 0, topic_id)) == [(0, 2, 1)]
        samples = scrape(kafka_broker)
        assert value(samples, LOCK_TIMEOUTS, group=group, topic=topic, partition="0") == 0
        # the waiting fetch wakes when the locks end and acquires the records again
        again = raw.share_fetch(conn, group, "m1", 1, topic_id, max_wait_ms=10000)
        assert raw.acquired(again) == [(0, 2, 2)]
    samples = scrape(kafka_broker)
    assert value(samples, LOCK_TIMEOUTS, group=group, topic=topic, partition="0") == 3
    assert value(samples, IN_FLIGHT, group=group, topic=topic, partition="0") == 3
