"""The connection state machine, bytes in and out: correlation ids, the in-flight FIFO, acks=0,
size checks before buffering, responses split anywhere or batched together."""

from __future__ import annotations

from typing import Any

import pytest

from trio_broker.client.core.connection import NEED_DATA, ClientConnection
from trio_broker.client.core.errors import (
    CorrelationIdMismatchError,
    InvalidResponseError,
    KafkaConnectionError,
)
from trio_broker.protocol.api_keys import ApiKey
from trio_broker.protocol.messages import (
    decode_request_body,
    decode_request_header,
    encode_response,
    make_request,
    make_response,
)


def metadata_request() -> Any:
    return make_request(ApiKey.Metadata, 5, topics=[], allow_auto_topic_creation=False)


def answer(frame: bytes, marker: int, correlation_id: int | None = None) -> bytes:
    """The broker side: decode the request frame and encode a Metadata answer to it."""
    header = decode_request_header(frame[4:])
    decode_request_body(header, frame[4:])
    if correlation_id is not None:
        header.correlation_id = correlation_id
    body = make_response(ApiKey.Metadata, header.api_version, brokers=[], cluster_id="c",
                         controller_id=marker, topics=[])
    return encode_response(header, body)


def test_requests_get_increasing_ids_and_answers_match_in_order() -> None:
    conn = ClientConnection("client-1")
    sent = [conn.send_request(ApiKey.Metadata, 5, metadata_request(), context=i)
            for i in range(3)]
    ids = [request.correlation_id for request, _ in sent]  # type: ignore[union-attr]
    assert ids == [1, 2, 3]
    assert decode_request_header(sent[0][1][4:]).client_id == "client-1"
    stream = b"".join(answer(frame, marker=10 + i) for i, (_, frame) in enumerate(sent))
    assert conn.next_response() is NEED_DATA
    for i in range(0, len(stream), 7):  # split at arbitrary points
        conn.receive_data(stream[i:i + 7])
    got = []
    while (response := conn.next_response()) is not NEED_DATA:
        got.append((response.request.context, response.body.controller_id))
    assert got == [(0, 10), (1, 11), (2, 12)]
    assert not conn.in_flight


def test_acks_zero_produce_is_not_in_flight() -> None:
    conn = ClientConnection(None)
    body = make_request(ApiKey.Produce, 7, transactional_id=None, acks=0, timeout_ms=1,
                        topic_data=[])
    request, frame = conn.send_request(ApiKey.Produce, 7, body, expect_response=False)
    assert request is None
    assert decode_request_header(frame[4:]).client_id is None
    assert not conn.in_flight


def test_a_response_out_of_order_is_a_mismatch() -> None:
    conn = ClientConnection("c", address="the broker at h:1")
    (_, _first), (_, second) = (conn.send_request(ApiKey.Metadata, 5, metadata_request())
                               for _ in range(2))
    conn.receive_data(answer(second, 1))
    with pytest.raises(CorrelationIdMismatchError,
                       match=r"^the broker at h:1 answered correlation id 2, expected 1 "
                             r"\(Metadata\)$") as info:
        conn.next_response()
    assert isinstance(info.value, KafkaConnectionError)
    assert info.value.retriable
    assert [r.correlation_id for r in conn.fail_all()] == [1, 2]


def test_an_answer_with_nothing_in_flight_is_a_mismatch() -> None:
    conn = ClientConnection("c")
    _, frame = conn.send_request(ApiKey.Metadata, 5, metadata_request())
    data = answer(frame, 1)
    conn.receive_frame(data[4:])
    with pytest.raises(CorrelationIdMismatchError, match="nothing is in flight"):
        conn.receive_frame(data[4:])


def test_sizes_are_checked_before_buffering() -> None:
    conn = ClientConnection("c", max_response_bytes=1000)
    conn.send_request(ApiKey.Metadata, 5, metadata_request())
    conn.receive_data((1001).to_bytes(4, "big"))
    with pytest.raises(InvalidResponseError, match="frame of 1001 bytes"):
        conn.next_response()
    conn.check_frame_size(1000)
    for size in (-1, 3, 1001):
        with pytest.raises(InvalidResponseError, match=f"frame of {size} bytes"):
            conn.check_frame_size(size)


def test_an_undecodable_body_is_an_invalid_response() -> None:
    conn = ClientConnection("c")
    _request, _ = conn.send_request(ApiKey.Metadata, 5, metadata_request())
    with pytest.raises(InvalidResponseError, match="bad Metadata response"):
        conn.receive_frame(b"\0\0\0\1\xff")
    with pytest.raises(InvalidResponseError, match="shorter than its correlation id"):
        conn.receive_frame(b"\0\0")


def test_raw_requests_deliver_the_frame_and_ids_can_be_chosen() -> None:
    conn = ClientConnection("c")
    request, frame = conn.send_request(ApiKey.Metadata, 5, metadata_request(), raw=True,
                                       correlation_id=77)
    assert request is not None
    assert request.correlation_id == 77
    data = answer(frame, 5)
    response = conn.receive_frame(data[4:])
    assert response.body == data[4:]
