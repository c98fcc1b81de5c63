"""The schemas against an independent transcription (kafka-python's classes), the version table,
the format's parser, and the generated stub."""

from __future__ import annotations

import pytest

from tests.protocol.kp_oracle import KP_CLASSES, kp_layout, our_layout, shared_versions
from trio_broker.protocol import stubgen
from trio_broker.protocol.api_keys import SUPPORTED_VERSIONS, kafka_range
from trio_broker.protocol.schema import MessageSchema, _parse, load, message_names
from trio_broker.protocol.structs import class_for
from trio_broker.protocol.versions import KAFKA_VERSIONS, ApiKey

#: every API a Kafka 3.9, 4.1 or 4.2 (share groups) broker answers to clients that this project
#: implements or will
COVERED = [0, 1, 2, 3, *range(8, 38), *range(42, 52), 55, 57, 60, 61, 65, 66, 68, 69, 71, 72,
           74, 75, 76, 77, 78, 79, 90, 91, 92]
SHARED = sorted(set(message_names()) & set(KP_CLASSES))


def test_every_covered_api_has_a_request_and_a_response_schema() -> None:
    assert sorted(int(k) for k in KAFKA_VERSIONS) == COVERED
    for key in COVERED:
        name = ApiKey(key).name
        for kind in ("Request", "Response"):
            schema = load(name + kind)
            assert schema is not None, name + kind
            assert schema.versions == kafka_range(key)
    assert load("ConsumerProtocolSubscription") is not None
    assert load("ConsumerProtocolAssignment") is not None


def test_the_schemas_cover_every_advertised_version() -> None:
    for key, advertised in SUPPORTED_VERSIONS.items():
        covered = kafka_range(key)
        assert covered.min <= advertised.min, key.name
        assert advertised.max <= covered.max, key.name


@pytest.mark.parametrize("key", COVERED, ids=[ApiKey(k).name for k in COVERED])
def test_version_table_agrees_with_kafka_python_where_both_know_the_api(key: int) -> None:
    table = KAFKA_VERSIONS[ApiKey(key)]
    assert table.kafka_3_9.min <= table.kafka_3_9.max
    assert table.kafka_4_1.min <= table.kafka_4_1.max
    kp = KP_CLASSES.get(ApiKey(key).name + "Request")
    if kp is None:
        return  # the KIP-848 and telemetry APIs: worked examples in test_worked_examples.py
    flexible = kp._flexible_versions
    assert table.flexible_from == (flexible[0] if flexible and flexible[0] >= 0 else None)
    # kafka-python ships a newer Kafka's definitions: never fewer versions than Kafka 4.1
    assert kp._valid_versions[1] >= table.kafka_4_1.max
    assert kp._valid_versions[0] == table.kafka_4_1.min or key == ApiKey.ListConfigResources


@pytest.mark.parametrize("name", SHARED)
def test_fields_match_kafka_python_in_every_shared_version(name: str) -> None:
    ours = load(name)
    assert ours is not None
    kp = KP_CLASSES[name]
    versions = shared_versions(name)
    assert versions, name
    for v in versions:
        assert our_layout(ours.root, v) == kp_layout(kp._json["fields"], v), f"{name} v{v}"


@pytest.mark.parametrize("name", SHARED)
def test_defaults_match_kafka_python(name: str) -> None:
    ours = load(name)
    assert ours is not None
    class_for(ours)
    checked = _compare_defaults(ours.root.fields, KP_CLASSES[name]._struct._fields, name)
    assert checked


def _compare_defaults(ours: list, theirs: tuple, where: str) -> int:
    by_name = {f.name: f for f in theirs}
    checked = 0
    for field in ours:
        kp_field = by_name.get(field.name)
        if kp_field is None:
            continue  # a field only in versions kafka-python's newer definitions dropped
        if field.struct is not None:
            inner = kp_field.array_of if field.is_array else kp_field
            checked += _compare_defaults(field.struct.fields, inner._fields, where)
            if field.is_array or field.default is None or field.tag is not None:
                # (kafka-python has no default for a plain struct; ours is a fresh instance)
                assert field.default_value() == kp_field.default, f"{where}.{field.name}"
            continue
        assert field.default_value() == kp_field.default, f"{where}.{field.name}"
        checked += 1
    return checked


def test_the_committed_stub_is_what_the_schemas_generate() -> None:
    assert stubgen.STUB.read_text() == stubgen.render(), (
        "message_types.pyi is stale: run python -m trio_broker.protocol.stubgen")


def test_nested_struct_classes_are_attributes_under_kafkas_struct_names() -> None:
    from trio_broker.protocol.message_types import FetchRequest, ProduceResponse

    part = ProduceResponse.TopicProduceResponse.PartitionProduceResponse(index=2)
    assert (part.index, part.base_offset, part.log_append_time_ms) == (2, 0, -1)
    assert part.record_errors == []
    assert part.record_errors is not (
        ProduceResponse.TopicProduceResponse.PartitionProduceResponse().record_errors)
    assert FetchRequest().max_bytes == 0x7FFFFFFF
    assert FetchRequest[11] is FetchRequest
    assert part == ProduceResponse.TopicProduceResponse.PartitionProduceResponse(index=2)
    assert "PartitionProduceResponse(index=2," in repr(part)
    with pytest.raises(TypeError):
        ProduceResponse.TopicProduceResponse.PartitionProduceResponse(nope=1)  # type: ignore[call-arg]


def _schema(text: str) -> MessageSchema:
    return _parse(text)


def test_parser_reads_versions_nullability_tags_and_defaults() -> None:
    schema = _schema("""HeartbeatRequest
  group_id string
  generation_id int32 1+ =-1
  member_id string 0-2 null=1+
  entries []Entry 3+ tag=4
    key string
  # a comment line
  more []Entry 4
""")
    root = schema.root
    names = [f.name for f in root.fields]
    assert names == ["group_id", "generation_id", "member_id", "entries", "more"]
    gen, member, entries, more = root.fields[1:]
    assert (gen.versions, gen.default) == ((1, 4), -1)
    assert (member.versions, member.nullable(0), member.nullable(1)) == ((0, 2), False, True)
    assert (entries.tagged(3), entries.tag) == (True, 4)
    assert entries.struct is more.struct
    assert [f.name for f in schema.structs["Entry"].fields] == ["key"]


@pytest.mark.parametrize(("text", "error"), [
    ("HeartbeatRequest\n  group_id string wat\n", "unknown token"),
    ("HeartbeatRequest\n  group_id string\n      deep int32\n", "unexpected indentation"),
])
def test_parser_refuses_what_it_does_not_understand(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        _schema(text)
