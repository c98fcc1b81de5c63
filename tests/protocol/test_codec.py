"""The sans-IO codec: round trips for every advertised (API, version), byte-exact vectors from
the wire reference, and hostile bytes that may only ever raise RemoteProtocolError."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trio_broker.broker.apis.registry import advertised_versions
from trio_broker.protocol.api_keys import ApiKey, is_flexible, request_class
from trio_broker.protocol.errors import RemoteProtocolError, UnsupportedVersionError
from trio_broker.protocol.framing import NEED_DATA, FrameDecoder, frame
from trio_broker.protocol.messages import (
    decode_request_body,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
    make_request,
    make_response,
    response_type,
)

ADVERTISED = sorted((int(k), v) for k, v in advertised_versions().items())
PAIRS = [(k, v) for k, r in ADVERTISED for v in range(r.min, r.max + 1)]


def _sample_request(key: int, version: int):
    """A request with non-trivial content where it matters (arrays filled)."""
    cls = request_class(key)
    if key == ApiKey.Produce:
        part = cls.TopicProduceData.PartitionProduceData(index=1, records=b"\x01\x02\x03")
        return make_request(key, version, transactional_id=None, acks=-1, timeout_ms=1500,
                            topic_data=[cls.TopicProduceData(name="t", partition_data=[part])])
    if key == ApiKey.Fetch:
        p = cls.FetchTopic.FetchPartition(partition=2, fetch_offset=42, partition_max_bytes=1024,
                                          current_leader_epoch=-1, log_start_offset=-1)
        return make_request(key, version, replica_id=-1, max_wait_ms=500, min_bytes=1,
                            max_bytes=1 << 20, isolation_level=0, session_id=0,
                            session_epoch=-1, topics=[cls.FetchTopic(topic="t", partitions=[p])],
                            forgotten_topics_data=[], rack_id="")
    if key == ApiKey.Metadata:
        return make_request(key, version, topics=[cls.MetadataRequestTopic(name="a")],
                            allow_auto_topic_creation=False)
    return make_request(key, version)


@pytest.mark.parametrize(("key", "version"), PAIRS)
def test_request_round_trip_for_every_advertised_version(key, version):
    body = _sample_request(key, version)
    data = encode_request(key, version, 77, "client-1", body)
    (size,) = struct.unpack(">i", data[:4])
    assert size == len(data) - 4
    header = decode_request_header(data[4:])
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        key, version, 77, "client-1")
    assert header.flexible == is_flexible(key, version)
    decoded = decode_request_body(header, data[4:])
    assert encode_request(key, version, 77, "client-1", decoded) == data


@pytest.mark.parametrize(("key", "version"), PAIRS)
def test_response_round_trip_for_every_advertised_version(key, version):
    header = decode_request_header(encode_request(key, version, 5, None,
                                                  _sample_request(key, version))[4:])
    body = make_response(key, version)
    data = encode_response(header, body)
    cid, decoded = decode_response(key, version, data[4:])
    assert cid == 5
    assert encode_response(header, decoded) == data


def test_api_versions_vectors_from_the_reference():
    v0 = bytes.fromhex("0000000b00120000000000010001" "63")
    h = decode_request_header(v0[4:])
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id) == (18, 0, 1, "c")
    v3 = bytes.fromhex("00000011" "0012000300000001000163" "00" "0278023100")
    h3 = decode_request_header(v3[4:])
    body = decode_request_body(h3, v3[4:])
    assert (body.client_software_name, body.client_software_version) == ("x", "1")
    entry = response_type(ApiKey.ApiVersions).ApiVersion(api_key=18, min_version=0,
                                                         max_version=4)
    resp = make_response(ApiKey.ApiVersions, 3, error_code=0, api_keys=[entry],
                         throttle_time_ms=0)
    assert encode_response(h3, resp) == bytes.fromhex(
        "00000013" "00000001" "000002001200000004000000000000")
    err = make_response(ApiKey.ApiVersions, 0, error_code=35, api_keys=[entry])
    assert encode_response(h3, err, version=0) == bytes.fromhex(
        "00000010" "00000001" "0023" "00000001" "001200000004")


def test_unknown_key_and_unsupported_version_are_rejected_before_the_body():
    with pytest.raises(UnsupportedVersionError):
        decode_request_header(struct.pack(">hhih", 999, 0, 1, -1))
    with pytest.raises(UnsupportedVersionError):
        decode_request_header(struct.pack(">hhih", ApiKey.Produce, 14, 1, -1))
    # ApiVersions of any version passes the header check: it gets the v0 error reply.
    header = decode_request_header(struct.pack(">hhih", ApiKey.ApiVersions, 9, 1, -1))
    assert header.api_version == 9


def test_frame_decoder_handles_partial_and_multiple_frames():
    frames = [frame(bytes([i]) * i) for i in range(1, 6)]
    stream = b"".join(frames)
    dec = FrameDecoder()
    out = []
    for i in range(0, len(stream), 3):
        dec.receive_data(stream[i:i + 3])
        while (f := dec.next_frame()) is not NEED_DATA:
            out.append(f)
    assert out == [bytes([i]) * i for i in range(1, 6)]
    dec.receive_data(stream)
    assert [dec.next_frame() for _ in range(5)] == out
    assert dec.next_frame() is NEED_DATA


@pytest.mark.parametrize("size", [-1, -(2**31), 101, 2**31 - 1])
def test_frame_size_checked_before_buffering(size):
    dec = FrameDecoder(max_frame_bytes=100)
    dec.receive_data(struct.pack(">i", size))
    with pytest.raises(RemoteProtocolError, match=r"socket\.request\.max\.bytes"):
        dec.next_frame()


def test_peek_api_key_and_partial_frame_tell_what_the_buffer_holds():
    """What a processor's selector asks before it takes a frame: the next whole frame's API
    key (None while it is partial or its size is out of bounds), and whether the buffer holds
    only the start of a frame it may wait for."""
    dec = FrameDecoder(max_frame_bytes=100)
    assert dec.peek_api_key() is None
    assert dec.partial_frame(10)
    request = frame(struct.pack(">hhi", 3, 1, 7) + b"\x00\x00")
    dec.receive_data(request[:6])
    assert dec.peek_api_key() is None
    assert dec.partial_frame(10)
    assert not dec.partial_frame(2)  # it misses more than that
    dec.receive_data(request[6:])
    assert dec.peek_api_key() == 3
    assert not dec.partial_frame(10)
    assert dec.peek_api_key() == 3  # not taken
    assert dec.next_frame() == request[4:]
    for prefix in (struct.pack(">i", 101), struct.pack(">i", -1)):  # refused by next_frame
        out_of_bounds = FrameDecoder(max_frame_bytes=100)
        out_of_bounds.receive_data(prefix + b"\x00\x03")
        assert out_of_bounds.peek_api_key() is None
        assert not out_of_bounds.partial_frame(1000)
    short = FrameDecoder()
    short.receive_data(frame(b"\x01"))  # whole, but too short for an API key
    assert short.peek_api_key() is None
    assert not short.partial_frame(10)


def test_big_frame_read_into_its_own_buffer():
    """A big frame's rest is read into one buffer of its size (``frame_view``), only once the
    peer sent 1/16 of it; pipelined frames around it and ``receive_data`` while it fills keep
    their order and bytes."""
    big = bytes(range(256)) * 1000  # 256,000 bytes
    stream = frame(b"a") + frame(big) + frame(b"bc") + frame(b"")
    dec = FrameDecoder()
    assert dec.frame_view(100, 16) is None  # nothing received
    dec.receive_data(stream[:5 + 4 + 10_000])
    assert dec.next_frame() == b"a"
    assert dec.next_frame() is NEED_DATA
    assert dec.frame_view(100, 16) is None  # 10,000 of 256,000 bytes: under 1/16
    dec.receive_data(stream[5 + 4 + 10_000:5 + 4 + 20_000])
    assert dec.buffered == 4 + 20_000
    view = dec.frame_view(100, 16)
    assert view is not None
    assert len(view) == len(big) - 20_000
    pos = 5 + 4 + 20_000
    view[:50_000] = stream[pos:pos + 50_000]
    dec.received_into(50_000)
    pos += 50_000
    assert dec.next_frame() is NEED_DATA
    assert dec.missing_bytes() == len(big) - 70_000
    # a TLS-style read may still arrive by receive_data, past the frame's end
    dec.receive_data(stream[pos:pos + 100_000])
    pos += 100_000
    view = dec.frame_view(100, 16)
    assert view is not None
    assert len(view) == len(big) - 170_000
    rest = len(view)
    view[:] = stream[pos:pos + rest]
    dec.received_into(rest)
    pos += rest
    assert dec.frame_view(100, 16) is None
    dec.receive_data(stream[pos:])
    assert dec.buffered == len(stream) - 5
    assert [dec.next_frame() for _ in range(3)] == [big, b"bc", b""]
    assert dec.next_frame() is NEED_DATA
    assert dec.buffered == 0


def test_a_big_frame_read_in_place_can_be_taken_without_a_copy():
    """``next_frame`` copies a big frame read in place to bytes (the broker keeps its slices);
    ``next_frame_in_place`` hands over the buffer itself, and is ``next_frame`` otherwise."""
    big = bytes(range(256)) * 1000
    for take, kind in ((FrameDecoder.next_frame, bytes),
                       (FrameDecoder.next_frame_in_place, bytearray)):
        dec = FrameDecoder()
        dec.receive_data(frame(b"a") + frame(big)[:30_000])
        assert take(dec) == b"a"
        assert take(dec) is NEED_DATA  # the big frame is partial
        view = dec.frame_view(100, 16)
        assert view is not None
        view[:] = frame(big)[30_000:]
        dec.received_into(len(view))
        got = take(dec)
        assert got == big
        assert type(got) is kind
        dec.receive_data(frame(b"bc"))
        small = take(dec)
        assert small == b"bc"
        assert type(small) is bytes
        assert take(dec) is NEED_DATA


def test_a_produce_request_read_in_place_hands_its_batches_over_without_a_copy():
    """A big Produce frame read into its own buffer reaches the decoder as that buffer, and its
    ``records`` are views of it: the batches go from the socket to the log with no copy in
    between."""
    batch = bytes(range(256)) * 4000
    body = _sample_request(ApiKey.Produce, 9)
    body.topic_data[0].partition_data[0].records = batch
    data = encode_request(ApiKey.Produce, 9, 5, "c", body)
    dec = FrameDecoder()
    dec.receive_data(data[:70_000])
    view = dec.frame_view(100, 16)
    assert view is not None
    view[:] = data[70_000:]
    dec.received_into(len(view))
    raw = dec.next_frame_in_place()
    assert type(raw) is bytearray
    decoded = decode_request_body(decode_request_header(raw), raw)
    records = decoded.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview)
    assert records.obj is raw
    assert records == batch


def test_big_frame_view_needs_a_valid_size():
    """No buffer is reserved for a size claim the decoder refuses, nor for one whose bytes did
    not arrive (a size claim alone costs nothing)."""
    dec = FrameDecoder(max_frame_bytes=1000)
    dec.receive_data(struct.pack(">i", 5000) + b"x" * 400)
    assert dec.frame_view(10, 16) is None
    with pytest.raises(RemoteProtocolError):
        dec.next_frame()
    dec = FrameDecoder()
    dec.receive_data(struct.pack(">i", 100_000_000) + b"x" * 1000)
    assert dec.frame_view(10, 16) is None


def _valid_frames() -> list[bytes]:
    return [encode_request(k, v, 1, "c", _sample_request(k, v))[4:] for k, v in PAIRS]


VALID = _valid_frames()


def _decode(data: bytes) -> None:
    try:
        header = decode_request_header(data)
        if header.api_key == ApiKey.ApiVersions and header.api_version > 4:
            return
        decode_request_body(header, data)
    except RemoteProtocolError:
        pass


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(VALID), st.data())
def test_mutated_frames_raise_only_remote_protocol_error(base, data):
    buf = bytearray(base)
    for _ in range(data.draw(st.integers(1, 8))):
        op = data.draw(st.sampled_from(["flip", "set", "truncate", "insert"]))
        if not buf:
            break
        i = data.draw(st.integers(0, len(buf) - 1))
        if op == "flip":
            buf[i] ^= 1 << data.draw(st.integers(0, 7))
        elif op == "set":
            buf[i] = data.draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF]))
        elif op == "truncate":
            del buf[i:]
        else:
            buf[i:i] = data.draw(st.binary(min_size=1, max_size=8))
    _decode(bytes(buf))


@settings(max_examples=1500, deadline=None)
@given(st.sampled_from(PAIRS), st.binary(max_size=300))
def test_random_bodies_raise_only_remote_protocol_error(pair, body):
    key, version = pair
    header = struct.pack(">hhih", key, version, 1, 1) + b"c"
    if is_flexible(key, version):
        header += b"\x00"
    _decode(header + body)
