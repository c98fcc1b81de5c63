"""Worked bytes, written by hand from the protocol's field layouts, for the messages kafka-python
does not define (the KIP-848 group APIs and KIP-714 telemetry): both directions.

Reading guide: flexible versions encode strings, bytes and arrays with an unsigned-varint length
plus one (0 = null), and end every struct with a tagged-field section (``00`` when empty); a
nullable struct starts with one byte, ``ff`` for null or ``01`` for present.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from trio_broker.protocol import codec
from trio_broker.protocol.message_types import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
)
from trio_broker.protocol.schema import load

TOPIC_ID = uuid.UUID("0123456789abcdef0123456789abcdef")
INSTANCE = uuid.UUID("fedcba98765432100123456789abcdef")
HB = ConsumerGroupHeartbeatRequest
HBR = ConsumerGroupHeartbeatResponse
CGD = ConsumerGroupDescribeResponse.DescribedGroup


def _hex(text: str) -> bytes:
    """Hex bytes, each line optionally followed by ``# what they are``."""
    return bytes.fromhex("".join(line.partition("#")[0] for line in text.splitlines()))


CASES: list[tuple[str, Any, int, bytes]] = [
    ("join with topics", HB(group_id="g", member_id="", member_epoch=0,
                            subscribed_topic_names=["t"]), 0, _hex("""
        02 67  # group_id "g"
        01  # member_id ""
        00000000  # member_epoch 0
        00  # instance_id null
        00  # rack_id null
        ffffffff  # rebalance_timeout_ms -1
        02 02 74  # subscribed_topic_names ["t"]
        00  # server_assignor null
        00  # topic_partitions null
        00  # tags""")),
    ("v1 adds the regex", HB(group_id="g", member_id="m", member_epoch=3,
                             subscribed_topic_regex="a.*",
                             topic_partitions=[HB.TopicPartitions(topic_id=TOPIC_ID,
                                                                  partitions=[0, 2])]), 1, _hex("""
        02 67 02 6d 00000003 00 00 ffffffff
        00  # subscribed_topic_names null
        04 612e2a  # subscribed_topic_regex "a.*"
        00  # server_assignor null
        02  # topic_partitions: one
          0123456789abcdef0123456789abcdef  # topic_id
          03 00000000 00000002  # partitions [0, 2]
          00  # tags
        00""")),
    ("heartbeat answer with an assignment", HBR(
        member_id="m", member_epoch=1, heartbeat_interval_ms=5000,
        assignment=HBR.Assignment(topic_partitions=[HBR.Assignment.TopicPartitions(
            topic_id=TOPIC_ID, partitions=[0])])), 0, _hex("""
        00000000 0000  # throttle_time_ms, error_code
        00  # error_message null
        02 6d  # member_id "m"
        00000001  # member_epoch
        00001388  # heartbeat_interval_ms 5000
        01  # assignment present
          02 0123456789abcdef0123456789abcdef 02 00000000 00
          00  # assignment tags
        00""")),
    ("heartbeat answer without one", HBR(error_code=25, error_message="x", member_epoch=-1), 1,
     _hex("00000000 0019 02 78 00 ffffffff 00000000 ff 00")),
    ("describe request", ConsumerGroupDescribeRequest(group_ids=["g"],
                                                      include_authorized_operations=True), 0,
     _hex("02 02 67 01 00")),
    ("describe answer v1 with a member type", ConsumerGroupDescribeResponse(groups=[CGD(
        group_id="g", group_state="Stable", group_epoch=4, assignment_epoch=4,
        assignor_name="uniform", members=[CGD.Member(
            member_id="m", client_id="c", client_host="/h", member_epoch=4,
            subscribed_topic_names=["t"], member_type=1)])]), 1, _hex("""
        00000000  # throttle_time_ms
        02  # groups: one
          0000 00  # error_code, error_message null
          02 67  # group_id
          07 537461626c65  # group_state "Stable"
          00000004 00000004
          08 756e69666f726d  # assignor_name "uniform"
          02  # members: one
            02 6d 00 00  # member_id "m", instance_id null, rack_id null
            00000004
            02 63 03 2f68  # client_id "c", client_host "/h"
            02 02 74  # subscribed_topic_names ["t"]
            00  # subscribed_topic_regex null
            01 00  # assignment: no partitions, tags
            01 00  # target_assignment
            01  # member_type 1 (consumer)
            00
          80000000  # authorized_operations: not requested
          00
        00""")),
    ("telemetry subscription request", GetTelemetrySubscriptionsRequest(), 0,
     _hex("00000000000000000000000000000000 00")),
    ("telemetry subscription answer", GetTelemetrySubscriptionsResponse(
        client_instance_id=INSTANCE, subscription_id=7, accepted_compression_types=[0, 4],
        push_interval_ms=60000, telemetry_max_bytes=1 << 20, delta_temporality=True,
        requested_metrics=["org.apache.kafka."]), 0, _hex("""
        00000000 0000 fedcba98765432100123456789abcdef 00000007
        03 00 04  # accepted_compression_types [none, zstd]
        0000ea60 00100000 01
        02 12 6f72672e6170616368652e6b61666b612e
        00""")),
    ("push", PushTelemetryRequest(client_instance_id=INSTANCE, subscription_id=7,
                                  terminating=False, compression_type=4, metrics=b"\x28\xb5"),
     0, _hex("fedcba98765432100123456789abcdef 00000007 00 04 03 28b5 00")),
    ("push answer", PushTelemetryResponse(throttle_time_ms=5, error_code=0), 0,
     _hex("00000005 0000 00")),
]


@pytest.mark.parametrize(("what", "message", "version", "wire"), CASES,
                         ids=[c[0] for c in CASES])
def test_worked_bytes_both_ways(what: str, message: Any, version: int, wire: bytes) -> None:
    schema = load(type(message).__name__)
    assert schema is not None
    parts: list[Any] = []
    codec.encode_into(schema, version, message, parts.append)
    assert b"".join(parts).hex() == wire.hex(), what
    decoded, end = codec.decode(schema, version, wire)
    assert end == len(wire)
    assert decoded == message


def test_a_null_array_where_the_schema_forbids_one_is_refused() -> None:
    from trio_broker.protocol.errors import RemoteProtocolError

    schema = load("ConsumerGroupDescribeResponse")
    assert schema is not None
    member = CASES[5][3]
    broken = member.replace(bytes.fromhex("01 00 01 00 01"), bytes.fromhex("00 00 01 00 01"))
    assert broken != member
    with pytest.raises(RemoteProtocolError):
        codec.decode(schema, 1, broken)
