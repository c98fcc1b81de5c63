"""The field-level schemas of the proxy's OpenAPI document: request bodies, query parameters,
success statuses and response bodies, per operation, as Confluent's spec names them.

Why data apart from ``openapi.py``: this is what a client may rely on, written once; the
property-based test (tests/rest_proxy/test_schemathesis.py) calls every operation with bodies
generated from these schemas and checks each answer against them, so a shape that drifts from
what the routes return fails the suite.
"""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]

STRING: Schema = {"type": "string"}
NULLABLE_STRING: Schema = {"type": "string", "nullable": True}
INTEGER: Schema = {"type": "integer"}
NULLABLE_INTEGER: Schema = {"type": "integer", "nullable": True}
BOOLEAN: Schema = {"type": "boolean"}
NULLABLE_BOOLEAN: Schema = {"type": "boolean", "nullable": True}
RELATED: Schema = {"type": "object", "required": ["related"],
                   "properties": {"related": STRING}}
NULLABLE_RELATED: Schema = {**RELATED, "nullable": True}


def obj(required: tuple[str, ...] = (), **properties: Schema) -> Schema:
    out: Schema = {"type": "object", "properties": properties}
    if required:
        out["required"] = list(required)
    return out


def array(items: Schema, **extra: Any) -> Schema:
    return {"type": "array", "items": items, **extra}


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def resource(kinds: tuple[str, ...], **fields: Schema) -> Schema:
    """Confluent's resource: a ``kind``, ``metadata`` (``self``, ``resource_name``), fields."""
    return obj(("kind", "metadata", *fields), kind={"type": "string", "enum": list(kinds)},
               metadata=obj(("self",), self=STRING, resource_name=NULLABLE_STRING), **fields)


def listing(kind: str, item: str) -> Schema:
    return obj(("kind", "metadata", "data"), kind={"type": "string", "enum": [kind]},
               metadata=obj(("self",), self=STRING, next=NULLABLE_STRING),
               data=array(ref(item)))


_CONFIG_KINDS = ("KafkaTopicConfig", "KafkaBrokerConfig", "KafkaClusterConfig")
_ACL_ENUMS = {
    "resource_type": ["UNKNOWN", "ANY", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID",
                      "DELEGATION_TOKEN", "USER"],
    "pattern_type": ["UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED"],
    "operation": ["UNKNOWN", "ANY", "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER",
                  "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS",
                  "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS"],
    "permission": ["UNKNOWN", "ANY", "DENY", "ALLOW"],
}
_ACL_FIELDS = ("resource_type", "resource_name", "pattern_type", "principal", "host",
               "operation", "permission")
_PRODUCE_DATA = obj(
    type={"type": "string", "enum": ["JSON", "BINARY", "STRING", "AVRO", "PROTOBUF",
                                     "JSONSCHEMA"]},
    data={}, subject=STRING,
    subject_name_strategy={"type": "string", "enum": ["TOPIC_NAME", "RECORD_NAME",
                                                      "TOPIC_RECORD_NAME"]},
    schema_id=INTEGER, schema_version=INTEGER, schema=STRING)
_REPORT_DATA = {**obj(("type", "size"), type=STRING, size=INTEGER, subject=STRING,
                      schema_id=INTEGER, schema_version=INTEGER), "nullable": True}
_TOPIC_PARTITION = obj(("topic", "partition"), topic=STRING, partition=INTEGER)
_PRODUCE_RECORD = obj(partition_id=NULLABLE_INTEGER, headers=array(obj(
    ("name",), name=STRING, value=NULLABLE_STRING)), key=_PRODUCE_DATA, value=_PRODUCE_DATA,
    timestamp={"type": "string", "format": "date-time"})

COMPONENTS: dict[str, Schema] = {
    "Error": obj(("error_code", "message"), error_code=INTEGER, message=NULLABLE_STRING),
    "Resource": obj(("kind", "metadata"), kind=STRING, metadata=obj(
        ("self",), self=STRING, resource_name=NULLABLE_STRING)),
    "Cluster": resource(("KafkaCluster",), cluster_id=STRING, controller=NULLABLE_RELATED,
                        acls=RELATED, brokers=RELATED, broker_configs=RELATED,
                        consumer_groups=RELATED, topics=RELATED,
                        partition_reassignments=RELATED),
    "Broker": resource(("KafkaBroker",), cluster_id=STRING, broker_id=INTEGER,
                       host=NULLABLE_STRING, port=NULLABLE_INTEGER, rack=NULLABLE_STRING,
                       configs=RELATED, partition_replicas=RELATED),
    "Topic": resource(("KafkaTopic",), cluster_id=STRING, topic_name=STRING,
                      is_internal=BOOLEAN, replication_factor=INTEGER,
                      partitions_count=INTEGER, partitions=RELATED, configs=RELATED,
                      partition_reassignments=RELATED, authorized_operations=array(STRING)),
    "Partition": resource(("KafkaPartition",), cluster_id=STRING, topic_name=STRING,
                          partition_id=INTEGER, leader=NULLABLE_RELATED, replicas=RELATED,
                          reassignment=RELATED),
    "Config": resource(_CONFIG_KINDS, cluster_id=STRING, name=STRING, value=NULLABLE_STRING,
                       is_default=BOOLEAN, is_read_only=BOOLEAN, is_sensitive=BOOLEAN,
                       source=STRING, synonyms=array(obj(
                           ("name", "value", "source"), name=STRING, value=NULLABLE_STRING,
                           source=STRING))),
    "Replica": resource(("KafkaReplica",), cluster_id=STRING, topic_name=STRING,
                        partition_id=INTEGER, broker_id=INTEGER, is_leader=BOOLEAN,
                        is_in_sync=BOOLEAN, broker=RELATED),
    "Reassignment": resource(("KafkaReassignment",), cluster_id=STRING, topic_name=STRING,
                             partition_id=INTEGER, adding_replicas=array(INTEGER),
                             removing_replicas=array(INTEGER)),
    "ConsumerGroup": resource(("KafkaConsumerGroup",), cluster_id=STRING,
                              consumer_group_id=STRING, is_simple=BOOLEAN,
                              partition_assignor=STRING, state=STRING, type=STRING,
                              is_mixed_consumer_group=BOOLEAN, coordinator=NULLABLE_RELATED,
                              consumers=RELATED, lag_summary=RELATED),
    "Consumer": resource(("KafkaConsumer",), cluster_id=STRING, consumer_group_id=STRING,
                         consumer_id=STRING, instance_id=NULLABLE_STRING, client_id=STRING,
                         assignments=RELATED),
    "ConsumerLag": resource(("KafkaConsumerLag",), cluster_id=STRING,
                            consumer_group_id=STRING, topic_name=STRING,
                            partition_id=INTEGER, current_offset=INTEGER,
                            log_end_offset=INTEGER, lag=INTEGER, consumer_id=STRING,
                            instance_id=NULLABLE_STRING, client_id=STRING),
    "ConsumerGroupLagSummary": resource(
        ("KafkaConsumerGroupLagSummary",), cluster_id=STRING, consumer_group_id=STRING,
        max_lag_consumer_id=STRING, max_lag_instance_id=NULLABLE_STRING,
        max_lag_client_id=STRING, max_lag_topic_name=STRING, max_lag_partition_id=INTEGER,
        max_lag=INTEGER, total_lag=INTEGER, max_lag_consumer=NULLABLE_RELATED,
        max_lag_partition=NULLABLE_RELATED),
    "Acl": obj(("kind", "metadata", "cluster_id", *_ACL_FIELDS),
               kind={"type": "string", "enum": ["KafkaAcl"]},
               metadata=obj(("self",), self=STRING), cluster_id=STRING,
               **{f: STRING for f in _ACL_FIELDS}),
    "ProduceReport": obj(("error_code",), error_code=INTEGER, message=NULLABLE_STRING,
                         cluster_id=STRING, topic_name=STRING, partition_id=INTEGER,
                         offset=INTEGER, timestamp=NULLABLE_STRING, key=_REPORT_DATA,
                         value=_REPORT_DATA),
}
for _name, _item, _kind in (
        ("ClusterList", "Cluster", "KafkaClusterList"), ("BrokerList", "Broker",
                                                          "KafkaBrokerList"),
        ("TopicList", "Topic", "KafkaTopicList"),
        ("PartitionList", "Partition", "KafkaPartitionList"),
        ("ReplicaList", "Replica", "KafkaReplicaList"),
        ("ReassignmentList", "Reassignment", "KafkaReassignmentList"),
        ("ConsumerGroupList", "ConsumerGroup", "KafkaConsumerGroupList"),
        ("ConsumerList", "Consumer", "KafkaConsumerList"),
        ("ConsumerLagList", "ConsumerLag", "KafkaConsumerLagList"),
        ("AclList", "Acl", "KafkaAclList")):
    COMPONENTS[_name] = listing(_kind, _item)
COMPONENTS["ConfigList"] = obj(("kind", "metadata", "data"), kind={
    "type": "string", "enum": [f"{k}List" for k in _CONFIG_KINDS]}, metadata=obj(
        ("self",), self=STRING, next=NULLABLE_STRING), data=array(ref("Config")))

#: request bodies: (media types, schema)
_CONFIG_CHANGES = obj(("data",), data=array(obj(
    ("name",), name=STRING, value=NULLABLE_STRING,
    operation={"type": "string", "enum": ["SET", "DELETE"]})), validate_only=NULLABLE_BOOLEAN)
_V2_RECORDS = obj(("records",), records=array(obj(key={}, value={}, partition=INTEGER),
                                              minItems=1),
                  key_schema=STRING, key_schema_id=INTEGER, value_schema=STRING,
                  value_schema_id=INTEGER)
_V2 = ("application/vnd.kafka.v2+json",)
_V2_FORMATS = tuple(f"application/vnd.kafka.{f}.v2+json"
                    for f in ("json", "binary", "avro", "protobuf", "jsonschema"))
_PARTITIONS = obj(("partitions",), partitions=array(_TOPIC_PARTITION))
#: v2 consumer settings whose names are not Python identifiers
_CONSUMER_SETTINGS: dict[str, Schema] = {
    "auto.offset.reset": {"type": "string", "enum": ["earliest", "latest", "none"]},
    # a string in Confluent's model; Jackson takes a JSON boolean for it too
    "auto.commit.enable": {"enum": ["true", "false", True, False]}}
BODIES: dict[tuple[str, str], tuple[tuple[str, ...], Schema]] = {
    ("POST", "/v3/clusters/{cluster_id}/topics"): (("application/json",), obj(
        ("topic_name",), topic_name={"type": "string", "minLength": 1},
        partitions_count={"type": "integer", "minimum": -1},  # -1: the broker's default
        replication_factor={"type": "integer", "minimum": -1},
        configs=array(obj(("name",), name=STRING, value=NULLABLE_STRING)),
        validate_only=NULLABLE_BOOLEAN)),
    ("POST", "/v3/clusters/{cluster_id}/acls"): (("application/json",), obj(
        _ACL_FIELDS, **{f: ({"type": "string", "enum": _ACL_ENUMS[f]} if f in _ACL_ENUMS
                            else STRING) for f in _ACL_FIELDS})),
    ("POST", "/v3/clusters/{cluster_id}/acls:batch"): (("application/json",), obj(
        ("data",), data=array(obj(_ACL_FIELDS, **{
            f: ({"type": "string", "enum": _ACL_ENUMS[f]} if f in _ACL_ENUMS else STRING)
            for f in _ACL_FIELDS}), minItems=1))),
    ("POST", "/v3/clusters/{cluster_id}/topics/{topic_name}/records"): (
        ("application/json",), _PRODUCE_RECORD),
    ("POST", "/v3/clusters/{cluster_id}/topics/{topic_name}/records:batch"): (
        ("application/json",), obj(("entries",), entries=array(
            {**_PRODUCE_RECORD, "required": ["id"], "properties": {
                "id": {"type": "string", "minLength": 1}, **_PRODUCE_RECORD["properties"]}},
            minItems=1, maxItems=10))),
    ("POST", "/topics/{topic_name}"): (_V2_FORMATS, _V2_RECORDS),
    ("POST", "/topics/{topic_name}/partitions/{partition_id}"): (_V2_FORMATS, _V2_RECORDS),
    ("POST", "/consumers/{group}"): (_V2, {"type": "object", "nullable": True, "properties": {
        "name": NULLABLE_STRING, "format": {"type": "string", "nullable": True, "enum": [
            "binary", "json", "avro", "protobuf", "jsonschema", None]},
        **_CONSUMER_SETTINGS}}),
    ("POST", "/consumers/{group}/instances/{name}/subscription"): (_V2, obj(
        topics=array(STRING, minItems=1), topic_pattern=STRING)),
    ("POST", "/consumers/{group}/instances/{name}/assignments"): (_V2, _PARTITIONS),
    ("POST", "/consumers/{group}/instances/{name}/positions"): (_V2, obj(
        ("offsets",), offsets=array(obj(("topic", "partition", "offset"), topic=STRING,
                                        partition=INTEGER, offset=INTEGER)))),
    ("POST", "/consumers/{group}/instances/{name}/positions/beginning"): (_V2, _PARTITIONS),
    ("POST", "/consumers/{group}/instances/{name}/positions/end"): (_V2, _PARTITIONS),
    ("POST", "/consumers/{group}/instances/{name}/offsets"): (_V2, {**obj(
        offsets=array(obj(("topic", "partition", "offset"), topic=STRING, partition=INTEGER,
                          offset=INTEGER, metadata=STRING))), "nullable": True}),
}
for _path in ("/v3/clusters/{cluster_id}/topics/{topic_name}/configs",
              "/v3/clusters/{cluster_id}/brokers/{broker_id}/configs",
              "/v3/clusters/{cluster_id}/broker-configs"):
    BODIES[("POST", _path + ":alter")] = (("application/json",), _CONFIG_CHANGES)
    BODIES[("PUT", _path + "/{name}")] = (("application/json",), obj(
        ("value",), value=NULLABLE_STRING))

#: query parameters: name -> schema
_ACL_QUERY = {f: ({"type": "string", "enum": _ACL_ENUMS[f]} if f in _ACL_ENUMS else STRING)
              for f in _ACL_FIELDS}
QUERIES: dict[tuple[str, str], dict[str, Schema]] = {
    ("GET", "/v3/clusters/{cluster_id}/acls"): _ACL_QUERY,
    ("DELETE", "/v3/clusters/{cluster_id}/acls"): {
        name: {**schema, "x-required": True} if name == "resource_type" else schema
        for name, schema in _ACL_QUERY.items()},
    ("GET", "/consumers/{group}/instances/{name}/records"): {
        "timeout": {"type": "integer", "minimum": 0, "maximum": 1000},
        "max_bytes": {"type": "integer", "minimum": 1}},
}

_V2_RECORD = obj(("topic", "key", "value", "partition", "offset"), topic=STRING, key={},
                 value={}, partition=INTEGER, offset=INTEGER)


def response(method: str, path: str) -> tuple[int, tuple[str, ...], Schema | None]:
    """(success status, media types, body schema or None for no body) of an operation."""
    v3 = path.startswith("/v3/")
    if method in ("DELETE", "PUT") and path != "/v3/clusters/{cluster_id}/acls":
        return 204, (), None
    if path.endswith(":alter"):
        return 204, (), None
    if v3:
        return _v3_response(method, path)
    return _v2_response(method, path)


def _v3_response(method: str, path: str) -> tuple[int, tuple[str, ...], Schema | None]:
    json_ = ("application/json",)
    if path.startswith("/v3/clusters/{cluster_id}/acls"):
        if method == "POST":
            return 201, (), None
        if method == "DELETE":
            return 200, json_, obj(("data",), data=array(ref("Acl")))
        return 200, json_, ref("AclList")
    if method == "POST" and path.endswith("/records"):
        return 200, json_, ref("ProduceReport")
    if method == "POST" and path.endswith("/records:batch"):
        return 207, json_, obj(("successes", "failures"), successes=array(obj(("id",), **{
            "id": STRING, **COMPONENTS["ProduceReport"]["properties"]})), failures=array(obj(
                ("id", "error_code", "message"), id=STRING, error_code=INTEGER,
                message=NULLABLE_STRING)))
    if method == "POST":
        return 201, json_, ref("Topic")
    tail = path.rstrip("/").split("/")
    last, named = tail[-1], tail[-1].startswith("{")
    kinds = {"clusters": "Cluster", "brokers": "Broker", "topics": "Topic",
             "partitions": "Partition", "configs": "Config", "broker-configs": "Config",
             "replicas": "Replica", "partition-replicas": "Replica",
             "reassignment": "Reassignment", "consumer-groups": "ConsumerGroup",
             "consumers": "Consumer", "lags": "ConsumerLag"}
    if last == "lag-summary":
        return 200, json_, ref("ConsumerGroupLagSummary")
    if named:
        kind = "ConsumerLag" if "/lags/" in path else kinds.get(tail[-2])
        return 200, json_, ref(kind) if kind else ref("Resource")
    if last == "reassignment":
        return 200, json_, (ref("ReassignmentList") if "/-/" in path
                            else ref("Reassignment"))
    kind = kinds.get(last)
    return 200, json_, ref(f"{kind}List") if kind else ref("Resource")


def _v2_response(method: str, path: str) -> tuple[int, tuple[str, ...], Schema | None]:
    v2 = ("application/vnd.kafka.v2+json",)
    if path == "/brokers":
        return 200, v2, obj(("brokers",), brokers=array(INTEGER))
    if path == "/topics":
        return 200, v2, array(STRING)
    partition = obj(("partition", "leader", "replicas"), partition=INTEGER, leader=INTEGER,
                    replicas=array(obj(("broker", "leader", "in_sync"), broker=INTEGER,
                                       leader=BOOLEAN, in_sync=BOOLEAN)))
    if path == "/topics/{topic_name}" and method == "GET":
        return 200, v2, obj(("name", "configs", "partitions"), name=STRING,
                            configs={"type": "object"}, partitions=array(partition))
    if method == "GET" and path.startswith("/topics/"):
        if path.endswith("/offsets"):
            return 200, v2, obj(("beginning_offset", "end_offset"), beginning_offset=INTEGER,
                                end_offset=INTEGER)
        return 200, v2, array(partition) if path.endswith("/partitions") else partition
    if path.startswith("/topics/"):
        return 200, v2, obj(("key_schema_id", "value_schema_id", "offsets"),
                            key_schema_id=NULLABLE_INTEGER, value_schema_id=NULLABLE_INTEGER,
                            offsets=array(obj(
                                ("partition", "offset", "error_code", "error"),
                                partition=NULLABLE_INTEGER, offset=NULLABLE_INTEGER,
                                error_code=NULLABLE_INTEGER, error=NULLABLE_STRING)))
    if path == "/consumers/{group}":
        return 200, v2, obj(("instance_id", "base_uri"), instance_id=STRING, base_uri=STRING)
    leaf = path.rsplit("/", 1)[1]
    if method == "POST":
        return (200, (), None) if leaf == "offsets" else (204, (), None)
    if leaf == "records":
        return 200, _V2_FORMATS, array(_V2_RECORD)
    if leaf == "subscription":
        return 200, v2, obj(("topics",), topics=array(STRING))
    if leaf == "assignments":
        return 200, v2, _PARTITIONS
    return 200, v2, obj(("offsets",), offsets=array(obj(
        ("topic", "partition", "offset", "metadata"), topic=STRING, partition=INTEGER,
        offset=INTEGER, metadata=STRING)))


__all__ = ["BODIES", "COMPONENTS", "QUERIES", "response"]
