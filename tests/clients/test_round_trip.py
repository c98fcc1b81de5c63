"""A round trip for every advertised (API, version), generated.

Request: built by the client core's builder where the core builds that API at that version
(``client_core.versions.CLIENT_VERSIONS``), otherwise drawn field by field from the schema with
the codec's message classes; encoded as a client sends it, then decoded by the broker's header
and body decoders, which must give back the same message. Response: drawn from the schema the
way a handler fills ``ctx.response(**fields)``, encoded by the broker's ``encode_response`` for
that request's header, then decoded by the client core's frame parser (``decode_response``, as
``client_core.connection`` uses it), which must give back the same message. Values come from
hypothesis: boundary integers, odd strings, nulls where the version allows them, real batches.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.hostile.fuzz import API_VERSIONS, record_batches, request_bodies, response_bodies
from trio_broker.broker.apis.registry import advertised_versions
from trio_broker.client.core import (
    admin,
    fetch,
    groups,
    metadata,
    offsets,
    produce,
    share_consumer,
    share_groups,
)
from trio_broker.client.core.structs import OffsetAndMetadata, TopicPartition
from trio_broker.client.core.versions import CLIENT_VERSIONS, api_versions_request
from trio_broker.protocol.api_keys import ApiKey
from trio_broker.protocol.messages import (
    decode_request_body,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
)
from trio_broker.protocol.schema import StructSchema, message_schema

ROUND_TRIP = settings(deadline=None, max_examples=4, database=None,
                      suppress_health_check=list(HealthCheck))

NAMES = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1,
                max_size=12)
I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
PARTS = st.lists(st.tuples(NAMES, st.integers(0, 2**31 - 1)), min_size=1, max_size=4,
                 unique=True).map(lambda ps: [TopicPartition(t, p) for t, p in ps])

Build = Callable[[int, st.DataObject], Any]


def _produce(v: int, d: st.DataObject) -> Any:
    batches = d.draw(st.lists(st.tuples(NAMES, st.integers(0, 100), record_batches()),
                              min_size=1, max_size=3))
    return produce.produce_request(v, batches, acks=d.draw(st.sampled_from([-1, 0, 1])),
                                   timeout_ms=d.draw(I32))


def _fetch(v: int, d: st.DataObject) -> Any:
    entries = [(tp.topic, fetch.fetch_entry(tp.partition, d.draw(I64), d.draw(I32)))
               for tp in d.draw(PARTS)]
    return fetch.fetch_request(v, entries, max_wait_ms=d.draw(I32),
                               min_bytes=d.draw(I32), max_bytes=d.draw(I32))


def _commit(v: int, d: st.DataObject) -> Any:
    committed = {tp: OffsetAndMetadata(d.draw(I64), d.draw(st.none() | NAMES))
                 for tp in d.draw(PARTS)}
    return offsets.offset_commit_request(v, d.draw(NAMES), committed,
                                         generation=d.draw(I32), member_id=d.draw(NAMES))


#: API -> the client core's builder, drawing its arguments
BUILDERS: dict[int, Build] = {
    ApiKey.Produce: _produce,
    ApiKey.Fetch: _fetch,
    ApiKey.ListOffsets: lambda v, d: offsets.list_offsets_request(
        v, {tp: d.draw(I64) for tp in d.draw(PARTS)}),
    ApiKey.Metadata: lambda v, d: metadata.metadata_request(
        v, d.draw(st.none() | st.lists(NAMES, max_size=3)), allow_auto_create=d.draw(
            st.booleans())),
    ApiKey.OffsetCommit: _commit,
    ApiKey.OffsetFetch: lambda v, d: offsets.offset_fetch_request(
        v, d.draw(NAMES), d.draw(PARTS) if v < 2 else d.draw(st.none() | PARTS)),
    ApiKey.FindCoordinator: lambda v, d: groups.find_coordinator_request(v, d.draw(NAMES)),
    ApiKey.JoinGroup: lambda v, d: groups.join_group_request(
        v, d.draw(NAMES), d.draw(st.just("") | NAMES), session_timeout_ms=d.draw(I32),
        rebalance_timeout_ms=d.draw(I32),
        protocols=d.draw(st.lists(st.tuples(NAMES, st.binary(max_size=32)), min_size=1,
                                  max_size=3))),
    ApiKey.SyncGroup: lambda v, d: groups.sync_group_request(
        v, d.draw(NAMES), d.draw(I32), d.draw(NAMES), protocol_name=d.draw(NAMES),
        assignments=d.draw(st.dictionaries(NAMES, st.binary(max_size=32), max_size=3))),
    ApiKey.Heartbeat: lambda v, d: groups.heartbeat_request(
        v, d.draw(NAMES), d.draw(I32), d.draw(NAMES)),
    ApiKey.LeaveGroup: lambda v, d: groups.leave_group_request(v, d.draw(NAMES), d.draw(NAMES)),
    ApiKey.DescribeGroups: lambda v, d: groups.describe_groups_request(
        v, d.draw(st.lists(NAMES, max_size=3))),
    ApiKey.ListGroups: lambda v, d: groups.list_groups_request(v),
    ApiKey.DeleteGroups: lambda v, d: groups.delete_groups_request(
        v, d.draw(st.lists(NAMES, max_size=3))),
    ApiKey.ApiVersions: lambda v, d: api_versions_request(v),
    ApiKey.CreateTopics: lambda v, d: admin.create_topics_request(
        v, [admin.NewTopic(n, d.draw(st.integers(-1, 100)), d.draw(st.integers(-1, 3)),
                           d.draw(st.dictionaries(NAMES, st.none() | NAMES, max_size=2)))
            for n in d.draw(st.lists(NAMES, max_size=3))], timeout_ms=d.draw(I32)),
    ApiKey.DeleteTopics: lambda v, d: admin.delete_topics_request(
        v, d.draw(st.lists(NAMES, max_size=3)), timeout_ms=d.draw(I32)),
    ApiKey.CreatePartitions: lambda v, d: admin.create_partitions_request(
        v, d.draw(st.dictionaries(NAMES, st.integers(1, 1000), max_size=3)),
        timeout_ms=d.draw(I32)),
    ApiKey.DescribeConfigs: lambda v, d: admin.describe_configs_request(
        v, [(2, n) for n in d.draw(st.lists(NAMES, max_size=3))]),
    ApiKey.AlterConfigs: lambda v, d: admin.alter_configs_request(
        v, 2, d.draw(NAMES), d.draw(st.dictionaries(NAMES, NAMES, max_size=3))),
    ApiKey.InitProducerId: lambda v, d: produce.init_producer_id_request(v),
    ApiKey.ShareGroupHeartbeat: lambda v, d: share_consumer.share_group_heartbeat_request(
        v, d.draw(NAMES), d.draw(NAMES), d.draw(st.integers(-1, 2**31 - 1)),
        d.draw(st.none() | st.lists(NAMES, max_size=3))),
    ApiKey.ShareFetch: lambda v, d: share_consumer.share_fetch_request(
        v, d.draw(NAMES), d.draw(NAMES), d.draw(I32),
        partitions=d.draw(st.lists(st.tuples(st.uuids(), st.integers(0, 100)), max_size=3)),
        acks=d.draw(st.dictionaries(st.tuples(st.uuids(), st.integers(0, 100)), st.dictionaries(
            st.integers(0, 2**40), st.integers(0, 3), max_size=5), max_size=2)),
        forgotten=d.draw(st.lists(st.tuples(st.uuids(), st.integers(0, 100)), max_size=2)),
        max_wait_ms=d.draw(I32), min_bytes=d.draw(I32), max_bytes=d.draw(I32),
        max_records=d.draw(st.integers(0, 2**15 - 1))),
    ApiKey.ShareAcknowledge: lambda v, d: share_consumer.share_acknowledge_request(
        v, d.draw(NAMES), d.draw(NAMES), d.draw(I32), d.draw(st.dictionaries(
            st.tuples(st.uuids(), st.integers(0, 100)), st.dictionaries(
                st.integers(0, 2**40), st.integers(0, 3), max_size=5), max_size=2))),
    ApiKey.ShareGroupDescribe: lambda v, d: share_groups.share_group_describe_request(
        v, d.draw(st.lists(NAMES, max_size=3))),
    ApiKey.DescribeShareGroupOffsets: lambda v, d: (
        share_groups.describe_share_group_offsets_request(v, d.draw(NAMES), d.draw(
            st.none() | st.lists(st.builds(TopicPartition, NAMES, st.integers(0, 100)),
                                 max_size=3)))),
    ApiKey.AlterShareGroupOffsets: lambda v, d: share_groups.alter_share_group_offsets_request(
        v, d.draw(NAMES), d.draw(st.dictionaries(
            st.builds(TopicPartition, NAMES, st.integers(0, 100)), I64, max_size=3))),
    ApiKey.DeleteShareGroupOffsets: lambda v, d: (
        share_groups.delete_share_group_offsets_request(v, d.draw(NAMES),
                                                        d.draw(st.lists(NAMES, max_size=3)))),
}


def same(a: Any, b: Any, struct: StructSchema, version: int, path: str = "") -> None:
    """``a`` and ``b`` agree on every field ``version`` carries (a field the version lacks is
    not on the wire: a decoder fills in Kafka's default, a builder may have set anything)."""
    for field in struct.fields_in(version):
        x, y, where = getattr(a, field.name), getattr(b, field.name), f"{path}.{field.name}"
        if field.struct is None or x is None or y is None:
            assert x == y or (x != x and y != y), (where, x, y)  # NaN reads back as NaN
        elif field.is_array:
            assert len(x) == len(y), (where, x, y)
            for i, (xi, yi) in enumerate(zip(x, y, strict=True)):
                same(xi, yi, field.struct, version, f"{where}[{i}]")
        else:
            same(x, y, field.struct, version, where)


def _root(api_key: int, kind: str) -> StructSchema:
    schema = message_schema(api_key, kind)
    assert schema is not None
    return schema.root


def _request(api_key: int, version: int, data: st.DataObject) -> Any:
    build = BUILDERS.get(api_key)
    if build is not None and version in CLIENT_VERSIONS.get(api_key, ()):
        return build(version, data)
    return data.draw(request_bodies(api_key, version))


@pytest.mark.parametrize(("api_key", "version"), API_VERSIONS,
                         ids=[f"{ApiKey(k).name}-v{v}" for k, v in API_VERSIONS])
@ROUND_TRIP
@given(data=st.data())
def test_request_and_response_round_trip(api_key: int, version: int,
                                         data: st.DataObject) -> None:
    body = _request(api_key, version, data)
    client_id = data.draw(st.none() | NAMES)
    correlation_id = data.draw(I32)
    frame = encode_request(api_key, version, correlation_id, client_id, body)
    header = decode_request_header(frame[4:])
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        api_key, version, correlation_id, client_id)
    same(decode_request_body(header, frame[4:]), body, _root(api_key, "request"), version)

    response = data.draw(response_bodies(api_key, version))
    if api_key == ApiKey.ApiVersions:
        response.error_code = 0  # an error answer is v0's layout by design (KIP-511)
    answer = encode_response(header, response)
    got_id, decoded = decode_response(api_key, version, answer[4:])
    assert got_id == correlation_id
    same(decoded, response, _root(api_key, "response"), version)


def test_every_advertised_version_is_generated() -> None:
    expected = sorted((int(k), v) for k, r in advertised_versions().items()
                      for v in range(r.min, r.max + 1))
    assert expected == API_VERSIONS
    # the client core's builders are used at every version they build; these APIs of the core
    # are drawn from the schema here (their builders are exercised by their rooms' tests)
    assert {ApiKey(k).name for k in CLIENT_VERSIONS if k not in BUILDERS} == {
        "SaslHandshake", "SaslAuthenticate", "DeleteRecords", "IncrementalAlterConfigs",
        "OffsetDelete", "DescribeCluster", "ConsumerGroupHeartbeat", "ConsumerGroupDescribe",
        "DescribeLogDirs", "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn", "TxnOffsetCommit",
        "DescribeTransactions", "ListTransactions", "CreateAcls", "DescribeAcls", "DeleteAcls",
        "ListConfigResources", "ListPartitionReassignments"}
