"""Share-group admin requests (KIP-932): ShareGroupDescribe and the share group offset APIs
(DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets), built and read as
Kafka's ``Admin`` does for ``kafka-share-groups.sh``.

Why plain tuples out: a tool prints them and a test compares them; a share-partition never
initialized has start offset -1 and no lag (None), and so does every partition of a broker too
old to answer lag (DescribeShareGroupOffsets v0).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from ...protocol.api_keys import ApiKey, request_class
from ...protocol.messages import make_request
from .structs import TopicPartition

_DESCRIBE: Any = request_class(ApiKey.DescribeShareGroupOffsets)
_ALTER: Any = request_class(ApiKey.AlterShareGroupOffsets)
_DELETE: Any = request_class(ApiKey.DeleteShareGroupOffsets)

__all__ = ["SharePartitionOffset", "alter_share_group_offsets_request",
           "delete_share_group_offsets_request", "describe_share_group_offsets_request",
           "parse_alter_share_group_offsets", "parse_delete_share_group_offsets",
           "parse_describe_share_group_offsets", "share_group_describe_request"]


class SharePartitionOffset(NamedTuple):
    #: the share-partition start offset, -1 when never initialized
    start_offset: int
    leader_epoch: int | None
    #: records not yet delivered for good (KIP-1226); None when unknown
    lag: int | None
    error: int


def share_group_describe_request(version: int, group_ids: Iterable[str]) -> Any:
    return make_request(ApiKey.ShareGroupDescribe, version, group_ids=list(group_ids),
                        include_authorized_operations=False)


def describe_share_group_offsets_request(version: int, group_id: str,
                                         partitions: Iterable[TopicPartition] | None) -> Any:
    """``partitions`` None: every share-partition the group has initialized."""
    group_cls = _DESCRIBE.DescribeShareGroupOffsetsRequestGroup
    topics = None
    if partitions is not None:
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        topics = [group_cls.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=p)
                  for t, p in sorted(by_topic.items())]
    return make_request(ApiKey.DescribeShareGroupOffsets, version,
                        groups=[group_cls(group_id=group_id, topics=topics)])


def parse_describe_share_group_offsets(body: Any, version: int) -> tuple[
        int, str | None, dict[TopicPartition, SharePartitionOffset]]:
    """(group error code, its message, offsets by partition) of the first group."""
    [group] = body.groups
    out = {}
    for t in group.topics:
        for p in t.partitions:
            started = p.start_offset >= 0 and not p.error_code
            lag = p.lag if version >= 1 and started and p.lag >= 0 else None
            out[TopicPartition(t.topic_name, p.partition_index)] = SharePartitionOffset(
                p.start_offset, p.leader_epoch if started else None, lag, p.error_code)
    return group.error_code, group.error_message, out


def alter_share_group_offsets_request(version: int, group_id: str,
                                      offsets: Mapping[TopicPartition, int]) -> Any:
    topic_cls = _ALTER.AlterShareGroupOffsetsRequestTopic
    by_topic: dict[str, list[Any]] = {}
    for tp, offset in sorted(offsets.items()):
        by_topic.setdefault(tp.topic, []).append(
            topic_cls.AlterShareGroupOffsetsRequestPartition(partition_index=tp.partition,
                                                             start_offset=offset))
    return make_request(ApiKey.AlterShareGroupOffsets, version, group_id=group_id, topics=[
        topic_cls(topic_name=t, partitions=p) for t, p in by_topic.items()])


def parse_alter_share_group_offsets(
        body: Any) -> tuple[int, str | None, dict[TopicPartition, int]]:
    """(top-level error code, its message, error code by partition)."""
    return body.error_code, body.error_message, {
        TopicPartition(t.topic_name, p.partition_index): p.error_code
        for t in body.responses for p in t.partitions}


def delete_share_group_offsets_request(version: int, group_id: str,
                                       topics: Iterable[str]) -> Any:
    return make_request(ApiKey.DeleteShareGroupOffsets, version, group_id=group_id, topics=[
        _DELETE.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics])


def parse_delete_share_group_offsets(
        body: Any) -> tuple[int, str | None, dict[str, tuple[int, str | None]]]:
    """(top-level error code, its message, (error code, message) by topic)."""
    return body.error_code, body.error_message, {
        t.topic_name: (t.error_code, t.error_message) for t in body.responses}
