"""The hand-encoded answer to a one-partition produce is byte for byte the generic encoder's."""

from __future__ import annotations

import pytest

from trio_broker.broker.apis import produce
from trio_broker.protocol.errors import ErrorCode
from trio_broker.protocol.messages import Encoded, RequestHeader, encode_response, error_codes


def _topic(name: str, error: int, base: int, append_time: int, log_start: int):
    part = produce._part(7, error, base, append_time, log_start)
    return produce._TopicResp(name=name, topic_id=None, partition_responses=[part])


@pytest.mark.parametrize("version", range(3, 13))
@pytest.mark.parametrize("name", ["t", "bench-requests", "x" * 126, "y" * 127, "é" * 100])
@pytest.mark.parametrize("error", [ErrorCode.NONE, ErrorCode.NOT_ENOUGH_REPLICAS])
def test_one_partition_answer_is_the_generic_encoding(version, name, error):
    topic = _topic(name, error, 2**40 + 3, 1_700_000_000_123, 5)
    fast = produce._one_partition_answer(version, topic)
    assert isinstance(fast, Encoded)
    generic = produce._R(responses=[topic], throttle_time_ms=0)
    header = RequestHeader(api_key=0, api_version=version, correlation_id=99, client_id="c",
                           flexible=version >= 9, body_offset=0)
    assert encode_response(header, fast) == encode_response(header, generic)
    assert error_codes(fast) == error_codes(generic, 3) == [error]


def test_other_answers_take_the_generic_encoder():
    two = _topic("t", 0, 1, -1, 0)
    two.partition_responses.append(produce._part(8, 0, 2, -1, 0))
    assert produce._one_partition_answer(7, two) is None
    with_message = _topic("t", 0, 1, -1, 0)
    with_message.partition_responses[0].error_message = "no"
    assert produce._one_partition_answer(8, with_message) is None
    assert produce._one_partition_answer(2, _topic("t", 0, 1, -1, 0)) is None  # v0-v2 layouts
    assert produce._one_partition_answer(13, _topic("t", 0, 1, -1, 0)) is None  # topic ids
