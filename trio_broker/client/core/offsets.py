"""ListOffsets, OffsetCommit and OffsetFetch: building the requests and reading the answers.

Why together: all three speak in per-partition offsets, and every face needs them: the consumer
resets positions and commits, the admin client and the console tools ask for log ends and
committed offsets, the Spark source plans ranges with them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ...protocol.api_keys import ApiKey, request_class
from ...protocol.errors import ErrorCode
from ...protocol.messages import make_request
from .structs import OffsetAndMetadata, OffsetAndTimestamp, TopicPartition

_LIST: Any = request_class(ApiKey.ListOffsets)
_COMMIT: Any = request_class(ApiKey.OffsetCommit)
_FETCH: Any = request_class(ApiKey.OffsetFetch)

#: isolation levels (Kafka's ``IsolationLevel``)
READ_UNCOMMITTED = 0
READ_COMMITTED = 1


def _by_topic(items: Iterable[tuple[TopicPartition, Any]]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for tp, entry in items:
        out.setdefault(tp.topic, []).append(entry)
    return out


# --- ListOffsets ---------------------------------------------------------------------------

def list_offsets_request(version: int, timestamps: Mapping[TopicPartition, int], *,
                         isolation_level: int = READ_UNCOMMITTED,
                         timeout_ms: int = 30_000) -> Any:
    """One entry per partition: a timestamp in ms, or ``EARLIEST``/``LATEST``/...

    ``timeout_ms`` (v10+) bounds a lookup in remote (tiered) storage, as Java's client sets it.
    """
    part = _LIST.ListOffsetsTopic.ListOffsetsPartition
    topics = _by_topic((tp, part(partition_index=tp.partition, current_leader_epoch=-1,
                                 timestamp=ts, max_num_offsets=1))
                       for tp, ts in timestamps.items())
    return make_request(ApiKey.ListOffsets, version, replica_id=-1,
                        isolation_level=isolation_level, timeout_ms=timeout_ms,
                        topics=[_LIST.ListOffsetsTopic(name=t, partitions=p)
                                for t, p in topics.items()])


def parse_list_offsets(response: Any) -> dict[TopicPartition, tuple[int, OffsetAndTimestamp]]:
    """{partition: (error code, (offset, timestamp))}; offset -1 when no record qualifies."""
    out: dict[TopicPartition, tuple[int, OffsetAndTimestamp]] = {}
    for topic in response.topics:
        for part in topic.partitions:
            out[TopicPartition(topic.name, part.partition_index)] = (
                part.error_code, OffsetAndTimestamp(part.offset, part.timestamp))
    return out


# --- OffsetCommit ---------------------------------------------------------------------------

def offset_commit_request(version: int, group_id: str,
                          offsets: Mapping[TopicPartition, OffsetAndMetadata | tuple[int, Any]],
                          *, generation: int = -1, member_id: str = "",
                          group_instance_id: str | None = None) -> Any:
    """Commit ``offsets`` (the next offsets to read); generation -1 and member "" commit
    outside a group generation (a consumer that assigned partitions itself)."""
    part = _COMMIT.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    topics = _by_topic((tp, part(partition_index=tp.partition, committed_offset=offset,
                                 committed_leader_epoch=-1, commit_timestamp=-1,
                                 committed_metadata=metadata))
                       for tp, (offset, metadata) in offsets.items())
    return make_request(ApiKey.OffsetCommit, version, group_id=group_id,
                        generation_id_or_member_epoch=generation, member_id=member_id,
                        group_instance_id=group_instance_id, retention_time_ms=-1,
                        topics=[_COMMIT.OffsetCommitRequestTopic(name=t, partitions=p)
                                for t, p in topics.items()])


def parse_offset_commit(response: Any) -> dict[TopicPartition, int]:
    """{partition: error code}"""
    return {TopicPartition(topic.name, part.partition_index): part.error_code
            for topic in response.topics for part in topic.partitions}


# --- OffsetFetch ----------------------------------------------------------------------------

def offset_fetch_request(version: int, group_id: str,
                         partitions: Iterable[TopicPartition] | None) -> Any:
    """The group's committed offsets for ``partitions`` (None: every partition it committed,
    v2+). v8+ asks in a list of groups (KIP-709); this asks for one."""
    by_topic: dict[str, list[int]] | None = None
    if partitions is not None:
        by_topic = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
    if version >= 8:
        group = _FETCH.OffsetFetchRequestGroup
        return make_request(ApiKey.OffsetFetch, version, require_stable=False, groups=[group(
            group_id=group_id, member_id=None, member_epoch=-1,
            topics=None if by_topic is None else [
                group.OffsetFetchRequestTopics(name=t, partition_indexes=p)
                for t, p in by_topic.items()])])
    topics = None if by_topic is None else [
        _FETCH.OffsetFetchRequestTopic(name=t, partition_indexes=p) for t, p in by_topic.items()]
    return make_request(ApiKey.OffsetFetch, version, group_id=group_id, topics=topics,
                        require_stable=False)


def parse_offset_fetch(response: Any) -> tuple[int, dict[TopicPartition, OffsetAndMetadata]]:
    """(first error code, {partition: committed}); partitions never committed are absent.
    A v8+ answer (a list of groups) is read for the one group asked for."""
    if response.groups:
        response = response.groups[0]
    code = getattr(response, "error_code", 0) or ErrorCode.NONE
    committed: dict[TopicPartition, OffsetAndMetadata] = {}
    for topic in response.topics or ():
        for part in topic.partitions or ():
            code = code or part.error_code
            if part.committed_offset >= 0:
                committed[TopicPartition(topic.name, part.partition_index)] = (
                    OffsetAndMetadata(part.committed_offset, part.metadata))
    return code, committed


__all__ = ["READ_COMMITTED", "READ_UNCOMMITTED", "list_offsets_request", "offset_commit_request",
           "offset_fetch_request", "parse_list_offsets", "parse_offset_commit",
           "parse_offset_fetch"]
