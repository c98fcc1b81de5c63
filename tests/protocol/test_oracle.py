"""Byte-for-byte agreement with kafka-python's codec on every (message, version) both define.

For each request, response and consumer-protocol payload, hypothesis draws messages from our
schema (every field of the version, nulls, tagged fields, boundary integers); then:
- our encoder and kafka-python's produce the same bytes;
- our decoder reads those bytes back to an equal message;
- kafka-python's decoder reads our bytes to the same message (converted back to our classes).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.protocol.kp_oracle import KP_CLASSES, from_kp, messages, shared_versions, to_kp
from trio_broker.protocol import codec
from trio_broker.protocol.messages import decode_data, encode_data
from trio_broker.protocol.schema import load, message_names

CASES = [(name, v) for name in sorted(set(message_names()) & set(KP_CLASSES))
         for v in shared_versions(name)]
ORACLE = settings(max_examples=8, deadline=None, derandomize=True,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _ours(name: str, version: int, message: Any) -> bytes:
    schema = load(name)
    assert schema is not None
    if schema.kind == "data":
        return encode_data(message, version)
    parts: list[Any] = []
    codec.encode_into(schema, version, message, parts.append)
    return b"".join(parts)


def _theirs(name: str, version: int, message: Any) -> bytes:
    schema = load(name)
    assert schema is not None
    kp = to_kp(message, schema.root, KP_CLASSES[name], version)
    if schema.kind == "data":
        return bytes(kp.encode(version=version, header=True))
    return bytes(kp.encode(version=version))


def test_the_oracle_covers_every_version_of_every_shared_message() -> None:
    names = {name for name, _ in CASES}
    assert len(names) == 106  # 52 APIs' requests and responses, two consumer-protocol payloads
    for name in names:
        schema = load(name)
        assert schema is not None
        assert {v for n, v in CASES if n == name} == set(range(schema.versions.min,
                                                               schema.versions.max + 1)), name


@pytest.mark.parametrize(("name", "version"), CASES, ids=[f"{n}-v{v}" for n, v in CASES])
@ORACLE
@given(data=st.data())
def test_same_bytes_as_kafka_python_both_ways(name: str, version: int, data: st.DataObject
                                              ) -> None:
    schema = load(name)
    assert schema is not None
    message = data.draw(messages(schema, version))
    ours = _ours(name, version, message)
    assert ours == _theirs(name, version, message)
    if schema.kind == "data":
        got_version, back = decode_data(name, ours)
        assert got_version == version
        kp_back = KP_CLASSES[name].decode(ours, header=True)
    else:
        back, end = codec.decode(schema, version, ours)
        assert end == len(ours)
        kp_back = KP_CLASSES[name].decode(ours, version=version)
    assert back == message
    assert from_kp(kp_back, schema.root, version) == message
