"""confluent-kafka's ``ShareConsumer`` against a three-node test cluster whose share APIs fail
on purpose: injected ShareGroupHeartbeat and ShareFetch errors and a ShareFetch connection
dropped mid-stream; the consumer recovers, and every record is delivered and in the end
accepted."""

from __future__ import annotations

import time

import pytest

from tests.share.test_share_consumer import produce, share_consumer, wait_for
from trio_broker.testing import ThreadedCluster

RECORDS = 300


@pytest.mark.broker_config(brokers=3, group_share_record_lock_duration_ms=1000)
def test_a_share_consumer_recovers_from_injected_faults(kafka_cluster: ThreadedCluster) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    topic = kafka_cluster.create_topic("shared", partitions=3)
    group = "sg-faults"
    assert kafka_cluster.cluster is not None
    shares = kafka_cluster.cluster.state.shares  # the cluster's nodes share one coordinator
    kafka_cluster.inject("ShareGroupHeartbeat", ["COORDINATOR_NOT_AVAILABLE"] * 2)
    c = share_consumer(bootstrap, group)
    c.subscribe([topic])
    wait_for(lambda: (c.poll(0.2), group in shares.groups and shares.groups[group].members)[1],
             30, "the member")
    # the next fetches of any leader: a refusal, a retriable error, then a dropped connection
    kafka_cluster.inject("ShareFetch", ["UNKNOWN_SERVER_ERROR", "NOT_LEADER_OR_FOLLOWER"])
    kafka_cluster.inject("ShareFetch", disconnect=True, count=1)
    produce(bootstrap, topic, range(RECORDS))
    seen: list[bytes] = []

    def accepted() -> int:  # the share-partitions' start offsets: records acknowledged
        return sum(sp.start_offset for (g, _, _), sp in shares.partitions.items() if g == group)

    # a ShareFetch that failed carried the last poll's acknowledgements: those records come
    # back once their lock (1 s) ends and are accepted then (at least once, as Kafka's)
    deadline = time.monotonic() + 45
    while accepted() < RECORDS and time.monotonic() < deadline:
        seen += [bytes(m.value()) for m in c.poll(0.5) if m.error() is None]
    c.close()
    assert kafka_cluster.cluster.faults.pending() == {}
    assert accepted() == RECORDS
    assert set(seen) == {b"%d" % i for i in range(RECORDS)}
    requests = [r.api for r in kafka_cluster.requests()]
    assert requests.count("ShareGroupHeartbeat") >= 3
    assert requests.count("ShareFetch") >= 4
