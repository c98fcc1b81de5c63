"""The produce body's pieces without a broker: concatenated JSON cut anywhere, timestamps."""

from __future__ import annotations

import json

import pytest

from trio_broker.broker.rest_proxy.errors import RestError
from trio_broker.broker.rest_proxy.records import (
    JsonStream,
    format_timestamp,
    parse_record,
    parse_timestamp,
)

VALUES = [{"value": {"type": "STRING", "data": "é\u2603\"\\"}, "partition_id": 1},
          {"key": {"type": "JSON", "data": [True, False, None, 1.5e3, "\u00e9"]}},
          {"headers": [{"name": "h", "value": None}]}]


@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_values_cut_at_every_byte(ensure_ascii: bool) -> None:
    text = " \r\n".join(json.dumps(v, ensure_ascii=ensure_ascii) for v in VALUES).encode()
    for cut in range(len(text) + 1):
        stream = JsonStream(1 << 20)
        stream.feed(text[:cut])
        found = stream.values(final=False)
        stream.feed(text[cut:])
        found += stream.values(final=True)
        assert found == VALUES, cut


def test_an_invalid_value_ends_the_stream() -> None:
    stream = JsonStream(1 << 20)
    stream.feed(b'{"a": 1} {"a": oops} {"a": 2}')
    first, error = stream.values(final=False)
    assert first == {"a": 1}
    assert isinstance(error, RestError)
    assert error.status == 400
    assert stream.broken
    truncated = JsonStream(1 << 20)
    truncated.feed(b'{"a": "no end')
    assert truncated.values(final=False) == []
    [error] = truncated.values(final=True)
    assert isinstance(error, RestError)


def test_a_value_over_the_bound_is_413() -> None:
    stream = JsonStream(64)
    stream.feed(b'{"value": "' + b"x" * 100)
    [error] = stream.values(final=False)
    assert isinstance(error, RestError)
    assert error.status == 413


def test_timestamps_as_java_instant_writes_them() -> None:
    assert parse_timestamp("2021-02-05T19:14:42Z") == 1612552482000
    assert parse_timestamp("2021-02-05T19:14:42.123Z") == 1612552482123
    assert parse_timestamp("2021-02-05T20:14:42.123+01:00") == 1612552482123
    assert format_timestamp(1612552482000) == "2021-02-05T19:14:42Z"
    assert format_timestamp(1612552482123) == "2021-02-05T19:14:42.123Z"


def test_record_formats() -> None:
    record = parse_record({"key": {"type": "BINARY", "data": "AAH/"},
                           "value": {"data": {"a": [1, "é"]}},
                           "headers": [{"name": "h", "value": "aGk="}]})
    assert record.key.data == b"\x00\x01\xff"
    assert (record.value.fmt, record.value.data) == ("JSON", '{"a":[1,"é"]}'.encode())
    assert record.headers == [("h", b"hi")]
    assert parse_record({"value": {"type": "STRING", "data": None}}).value.data is None
    for bad in ({"partition_id": -1}, {"partition_id": True}, {"key": "x"},
                {"value": {"type": "XML"}}, {"value": {"schema_id": "1"}},
                {"value": {"subject_name_strategy": "SUBJECT"}},
                {"headers": [{"value": "aGk="}]}):
        with pytest.raises(RestError):
            parse_record(bad)
