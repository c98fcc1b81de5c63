"""Every advertised (API, version), a few schema-generated hostile bodies each, one live broker.

Why per version: the mixed fuzz in ``test_fuzz.py`` samples versions at random, so a rare
(API, version) may go a whole run unvisited; here each one gets ``FRAMES_PER_VERSION`` frames.
Every frame is well-formed, so the broker must answer it or close the connection within
``FRAME_BOUND_S`` (only requests that Kafka parks by design may still be pending then), and a
fresh connection's ApiVersions must be answered within ``PROBE_BOUND_S`` after every frame: a
hostile request must never hold anything another connection needs. One frame per Hypothesis
example, drawn by a test parametrized per version: drawing all versions' frames in one example
overruns Hypothesis's per-example budget, and it discards and regenerates such examples
hundreds of times.
"""

from __future__ import annotations

import time
import uuid
from typing import NamedTuple

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.hostile.fuzz import API_VERSIONS, feed, valid_requests, well_behaved_client_ok
from tests.hostile.harness import BrokerProcess
from trio_broker.protocol.api_keys import ApiKey

FRAMES_PER_VERSION = 3
#: a well-formed request is answered (or its connection closed) within this; observed < 0.1 s
FRAME_BOUND_S = 5.0
#: a fresh connection's ApiVersions is answered within this, whatever the previous frame did
PROBE_BOUND_S = 2.0
#: requests Kafka parks until something else happens (max_wait_ms, a rebalance, the leader's
#: assignment): bounded by the request's own timeouts, not by the broker's answer time
PARKED = {ApiKey.Fetch, ApiKey.JoinGroup, ApiKey.SyncGroup}
RSS_BOUND_KB = 256 * 1024


class Sent(NamedTuple):
    api_key: int
    version: int
    outcome: str
    seconds: float
    probe_seconds: float
    frame: bytes


SENT: list[Sent] = []


@pytest.fixture(scope="module")
def swept_broker(tmp_path_factory):
    data = tmp_path_factory.mktemp("swept")
    # a long idle time, so a connection whose request hangs is not closed as idle (which would
    # look like the broker refusing the request): only well-formed frames are sent here
    with BrokerProcess(data / "logs", **{"connections.max.idle.ms": 60000,
                                         "socket.request.max.bytes": 1 << 20,
                                         "group.initial.rebalance.delay.ms": 0,
                                         "auto.create.topics.enable": "true"}) as broker:
        yield broker


@pytest.mark.parametrize(("api_key", "version"), API_VERSIONS,
                         ids=[f"{ApiKey(k).name}v{v}" for k, v in API_VERSIONS])
# no shrinking: each attempt on a stall costs FRAME_BOUND_S, and the failure names its frame
@settings(deadline=None, suppress_health_check=list(HealthCheck), database=None,
          max_examples=FRAMES_PER_VERSION, phases=[Phase.generate])
@given(data=st.data())
def test_every_version_is_answered_and_blocks_no_one(swept_broker, api_key, version, data):
    frame = data.draw(valid_requests((api_key, version)))
    t0 = time.monotonic()
    outcome = feed(swept_broker.address, frame, timeout_s=FRAME_BOUND_S)
    t1 = time.monotonic()
    probe_ok = well_behaved_client_ok(swept_broker.address, timeout_s=PROBE_BOUND_S)
    sent = Sent(api_key, version, outcome, t1 - t0, time.monotonic() - t1, frame)
    SENT.append(sent)
    assert swept_broker.alive(), swept_broker.log_tail(80)
    assert probe_ok, f"a fresh connection got no ApiVersions answer after {sent}"
    assert outcome != "waiting" or api_key in PARKED, f"not answered in {FRAME_BOUND_S} s: {sent}"


def test_after_the_sweep_clients_still_work(swept_broker):
    """After the sweep: nothing crashed, memory bounded, a real client produces and consumes.

    Run on its own (``-k``), it sweeps first rather than checking nothing.
    """
    if not SENT:
        for api_key, version in API_VERSIONS:
            test_every_version_is_answered_and_blocks_no_one(swept_broker=swept_broker,
                                                             api_key=api_key, version=version)
    assert len({(s.api_key, s.version) for s in SENT}) == len(API_VERSIONS)
    assert len(SENT) >= len(API_VERSIONS) * FRAMES_PER_VERSION
    t0 = time.monotonic()
    assert well_behaved_client_ok(swept_broker.address, timeout_s=PROBE_BOUND_S)
    assert time.monotonic() - t0 < PROBE_BOUND_S
    _produce_and_consume(swept_broker.bootstrap_servers)
    assert swept_broker.rss_kb() < RSS_BOUND_KB
    log = swept_broker.log_text()
    assert "Traceback" not in log, swept_broker.log_tail(80)
    # well-formed requests may be refused, never fail the broker (a 249-character topic did)
    assert [line for line in log.splitlines() if " ERROR " in line] == []


def _produce_and_consume(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer

    topic, values = f"after-sweep-{uuid.uuid4().hex[:8]}", [b"v%d" % i for i in range(10)]
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "message.timeout.ms": 10000})
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic,
                         "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
    try:
        consumer.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(got) < len(values) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        assert got == values
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
