"""Unit tests of the client's pure parts: murmur2, backoff, config, errors, assignors, payloads."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_broker.client.core.backoff import ExponentialBackoff
from trio_broker.client.core.bootstrap import parse_bootstrap
from trio_broker.client.core.partitioner import StickyPartitioner, murmur2, partition_for_key
from trio_broker.client.trio import errors
from trio_broker.client.trio.config import PRODUCER_DEFAULTS, normalize
from trio_broker.client.trio.consumer.assignors import RangeAssignor, RoundRobinAssignor
from trio_broker.protocol.consumer_protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from trio_broker.protocol.errors import ErrorCode

# Kafka's UtilsTest.testMurmur2 (org.apache.kafka.common.utils)
JAVA_MURMUR2_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


def _java_int(n: int) -> int:
    n &= 0xFFFFFFFF
    return n - (1 << 32) if n >= 1 << 31 else n


def _java_murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2 transcribed with Java's signed int arithmetic and >>>."""
    length = len(data)
    seed = _java_int(0x9747B28C)
    m = 0x5BD1E995
    h = _java_int(seed ^ length)

    def ushr(x: int, s: int) -> int:
        return (x & 0xFFFFFFFF) >> s

    for i in range(length // 4):
        i4 = i * 4
        k = _java_int(data[i4] + (data[i4 + 1] << 8) + (data[i4 + 2] << 16)
                      + (data[i4 + 3] << 24))
        k = _java_int(k * m)
        k = _java_int(k ^ ushr(k, 24))
        k = _java_int(k * m)
        h = _java_int(h * m)
        h = _java_int(h ^ k)
    rest = length % 4
    base = length & ~3
    if rest >= 3:
        h = _java_int(h ^ (data[base + 2] << 16))
    if rest >= 2:
        h = _java_int(h ^ (data[base + 1] << 8))
    if rest >= 1:
        h = _java_int(h ^ data[base])
        h = _java_int(h * m)
    h = _java_int(h ^ ushr(h, 13))
    h = _java_int(h * m)
    return _java_int(h ^ ushr(h, 15))


@pytest.mark.parametrize(("key", "expected"), JAVA_MURMUR2_VECTORS.items())
def test_murmur2_matches_kafka_vectors(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected
    assert _java_murmur2(key) == expected


@given(st.binary(max_size=64))
def test_murmur2_matches_an_independent_transcription(data: bytes) -> None:
    assert murmur2(data) == _java_murmur2(data)


def test_partition_for_key_masks_the_sign_bit_rather_than_abs() -> None:
    # murmur2(b"foobar") is negative: Java's toPositive clears the sign bit
    assert partition_for_key(b"foobar", 50) == (-790332482 & 0x7FFFFFFF) % 50 == 16
    assert partition_for_key(b"foobar", 50) != abs(-790332482) % 50


def test_sticky_partitioner_moves_to_another_available_partition() -> None:
    sticky = StickyPartitioner()
    first = sticky.partition("t", [0, 1, 2], 3)
    assert sticky.partition("t", [0, 1, 2], 3) == first
    for _ in range(20):
        assert sticky.next_partition("t", [0, 1, 2], 3, first) != first
    assert sticky.next_partition("t", [1], 3, 1) == 1  # the only available one


def test_backoff_grows_exponentially_within_jitter_and_caps() -> None:
    backoff = ExponentialBackoff(50, 1000)
    rng = random.Random(1)
    for attempts, base in [(0, 50), (1, 100), (2, 200), (3, 400), (4, 800), (5, 1000),
                           (30, 1000)]:
        values = [backoff.backoff_ms(attempts, rng) for _ in range(200)]
        assert min(values) >= base * 0.8
        assert max(values) <= base * 1.2
        assert max(values) - min(values) > base * 0.2  # jittered, not constant


def test_backoff_without_room_to_grow_stays_at_initial() -> None:
    backoff = ExponentialBackoff(100, 100, jitter=0)
    assert [backoff.backoff_ms(n) for n in range(5)] == [100] * 5


def test_config_accepts_dotted_and_keyword_names() -> None:
    merged = normalize("producer", PRODUCER_DEFAULTS, {"linger.ms": "7"},
                       {"bootstrap_servers": "h:1", "batch_size": 100,
                        "enable_idempotence": "false"})
    assert merged["linger.ms"] == 7
    assert merged["batch.size"] == 100
    assert merged["enable.idempotence"] is False
    assert merged["acks"] == "all"
    assert merged["client.id"].startswith("trio-broker-producer-")


def test_unknown_config_is_a_one_line_error_naming_it() -> None:
    with pytest.raises(errors.ConfigError, match=r"^unknown producer config 'lingr_ms'$"):
        normalize("producer", PRODUCER_DEFAULTS, None, {"bootstrap_servers": "h:1",
                                                        "lingr_ms": 5})
    with pytest.raises(errors.ConfigError, match="must be an integer"):
        normalize("producer", PRODUCER_DEFAULTS, None, {"bootstrap_servers": "h:1",
                                                        "linger_ms": "soon"})


def test_bootstrap_servers_parse() -> None:
    assert parse_bootstrap("a:1, b:2,PLAINTEXT://c:3") == [("a", 1), ("b", 2), ("c", 3)]
    assert parse_bootstrap(["[::1]:9092"]) == [("::1", 9092)]
    with pytest.raises(errors.ConfigError):
        parse_bootstrap("nohost")


def test_errors_are_generated_from_error_codes() -> None:
    assert errors.UnknownTopicOrPartitionError.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert errors.UnknownTopicOrPartitionError.retriable
    assert errors.InvalidTopicError.code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert not errors.TopicAlreadyExistsError.retriable
    for code in ErrorCode:
        if code is ErrorCode.NONE:
            continue
        error = errors.error_for(code)
        assert isinstance(error, errors.KafkaError)
        assert error.code == code
        assert error.retriable == code.retriable
        assert type(error).__name__.endswith("Error")
    unknown = errors.error_for(4242, "from the future")
    assert type(unknown) is errors.KafkaError
    assert unknown.code == 4242
    assert not unknown.retriable


def test_client_side_errors_fit_the_hierarchy() -> None:
    assert issubclass(errors.KafkaConnectionError, errors.NetworkError)
    assert errors.KafkaConnectionError("x").retriable
    assert issubclass(errors.CorrelationIdMismatchError, errors.KafkaConnectionError)
    assert issubclass(errors.KafkaTimeoutError, errors.RequestTimedOutError)


def test_consumer_protocol_payloads_match_the_reference_vectors() -> None:
    # kafka-protocol.md §6.3 (aiokafka's encoder)
    assert encode_subscription(["t"]) == bytes.fromhex("0000" "00000001" "000174" "00000000")
    assert encode_assignment({"t": [0, 1]}) == bytes.fromhex(
        "0000" "00000001" "000174" "00000002" "00000000" "00000001" "00000000")
    assert decode_subscription(encode_subscription(["b", "a"])).topics == ["a", "b"]
    assert decode_assignment(encode_assignment({"t": [1, 0], "u": []})).partitions == {
        "t": [0, 1], "u": []}
    assert decode_assignment(b"").partitions == {}


def test_subscription_of_a_newer_version_reads_the_known_fields() -> None:
    # v1 appends owned partitions after user data; a reader must ignore what it does not know
    payload = bytes.fromhex("0001" "00000001" "000174" "ffffffff" "00000001" "000174"
                            "00000001" "00000003")
    assert decode_subscription(payload).topics == ["t"]
    assert decode_subscription(payload).user_data is None


def test_cooperative_subscriptions_carry_owned_partitions_and_generation() -> None:
    v2 = encode_subscription(["t"], b"", owned_partitions={"t": [3, 1]}, generation_id=7)
    assert v2 == bytes.fromhex("0002" "00000001" "000174" "00000000" "00000001" "000174"
                               "00000002" "00000001" "00000003" "00000007")
    decoded = decode_subscription(v2)
    assert (decoded.version, decoded.owned_partitions, decoded.generation_id) == (
        2, {"t": [1, 3]}, 7)
    v1 = decode_subscription(encode_subscription(["t"], owned_partitions={}))
    assert (v1.version, v1.owned_partitions, v1.generation_id) == (1, {}, -1)


def test_range_assignor_gives_leading_members_the_extra_partitions() -> None:
    result = RangeAssignor.assign({"c2": ["t"], "c1": ["t", "u"], "c3": ["t"]},
                                  {"t": 7, "u": 2})
    assert result == {"c1": {"t": [0, 1, 2], "u": [0, 1]}, "c2": {"t": [3, 4]},
                      "c3": {"t": [5, 6]}}


def test_roundrobin_assignor_deals_partitions_skipping_unsubscribed_members() -> None:
    result = RoundRobinAssignor.assign({"a": ["t0", "t1"], "b": ["t1"], "c": ["t0", "t1"]},
                                       {"t0": 2, "t1": 3})
    # t0-0 a, t0-1 c (b is not subscribed to t0), t1-0 a, t1-1 b, t1-2 c
    assert result == {"a": {"t0": [0], "t1": [0]}, "b": {"t1": [1]},
                      "c": {"t0": [1], "t1": [2]}}


@given(members=st.integers(1, 6), partitions=st.integers(0, 20),
       assignor=st.sampled_from([RangeAssignor, RoundRobinAssignor]))
def test_assignors_assign_every_partition_exactly_once(members: int, partitions: int,
                                                      assignor: type) -> None:
    subscriptions = {f"m{i}": ["t"] for i in range(members)}
    result = assignor.assign(subscriptions, {"t": partitions})
    owned = sorted(p for parts in result.values() for p in parts.get("t", []))
    assert owned == list(range(partitions))
    sizes = [len(parts.get("t", [])) for parts in result.values()]
    assert max(sizes) - min(sizes) <= 1
