"""A share consumer's requests and its acknowledgement bookkeeping (KIP-932), sans I/O:
ShareGroupHeartbeat, ShareFetch and ShareAcknowledge built and read, and which offsets of each
partition are delivered, waiting for an acknowledgement, or acknowledged and waiting to be sent.

Why the bookkeeping here: both acknowledgement modes of Kafka's ``KafkaShareConsumer``
(``share.acknowledgement.mode``) come down to one table. ``implicit``: every record handed to
the application is accepted when the next records are fetched (or at commit, or at close).
``explicit``: the application acknowledges each record (accept, release, reject) and must have
done so before more records are fetched. In both, an offset the broker said was acquired but
that no record was handed out for (a control record of a transaction, a record removed by
compaction) is acknowledged as a gap, as the Java client does, so its lock does not have to
run out.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from ...protocol.api_keys import ApiKey, request_class
from ...protocol.messages import make_request
from .errors import UnsupportedVersionError
from .structs import ConsumerRecord, TopicPartition

_HB: Any = request_class(ApiKey.ShareGroupHeartbeat)
_SF: Any = request_class(ApiKey.ShareFetch)
_SA: Any = request_class(ApiKey.ShareAcknowledge)

#: ShareSessionEpoch: 0 opens a share session, -1 closes it
INITIAL_SESSION_EPOCH = 0
FINAL_SESSION_EPOCH = -1
#: ShareGroupHeartbeat member epochs: 0 joins, -1 leaves
JOIN_EPOCH = 0
LEAVE_EPOCH = -1

__all__ = ["AcknowledgeType", "Acknowledgements", "ShareConsumerRecord", "ack_batches",
           "share_acknowledge_request", "share_fetch_request", "share_group_heartbeat_request"]


class AcknowledgeType(enum.IntEnum):
    """Kafka's ``AcknowledgeType`` (the ids ShareFetch and ShareAcknowledge carry)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    #: KIP-1222 (ShareAcknowledge v2): keep the record, its acquisition lock restarted
    RENEW = 4


class ShareConsumerRecord(NamedTuple):
    """A record as a share consumer gets it: ``ConsumerRecord``'s fields and how many times it
    has been delivered (2 or more: an earlier delivery was released or its lock ran out)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    delivery_count: int


def share_group_heartbeat_request(version: int, group_id: str, member_id: str, epoch: int,
                                  topics: Iterable[str] | None) -> Any:
    return make_request(ApiKey.ShareGroupHeartbeat, version, group_id=group_id,
                        member_id=member_id, member_epoch=epoch,
                        subscribed_topic_names=None if topics is None else sorted(topics))


def ack_batches(acks: Mapping[int, int]) -> list[tuple[int, int, list[int]]]:
    """Offset -> type as (first offset, last offset, [type]) runs of one type."""
    out: list[tuple[int, int, list[int]]] = []
    for offset in sorted(acks):
        kind = acks[offset]
        if out and out[-1][1] == offset - 1 and out[-1][2] == [kind]:
            out[-1] = (out[-1][0], offset, [kind])
        else:
            out.append((offset, offset, [kind]))
    return out


def share_fetch_request(version: int, group_id: str, member_id: str, epoch: int, *,
                        partitions: Iterable[tuple[uuid.UUID, int]],
                        acks: Mapping[tuple[uuid.UUID, int], Mapping[int, int]],
                        forgotten: Iterable[tuple[uuid.UUID, int]] = (), max_wait_ms: int,
                        min_bytes: int, max_bytes: int, max_records: int) -> Any:
    """``partitions`` named (those the session gains) and those with ``acks`` to send."""
    topic_cls, part_cls = _SF.FetchTopic, _SF.FetchTopic.FetchPartition
    batch_cls = part_cls.AcknowledgementBatch
    by_topic: dict[uuid.UUID, dict[int, Any]] = {}
    for tid, p in {*partitions, *acks}:
        by_topic.setdefault(tid, {})[p] = part_cls(partition_index=p, acknowledgement_batches=[
            batch_cls(first_offset=f, last_offset=la, acknowledge_types=t)
            for f, la, t in ack_batches(acks.get((tid, p), {}))])
    gone: dict[uuid.UUID, list[int]] = {}
    for tid, p in forgotten:
        gone.setdefault(tid, []).append(p)
    fields: dict[str, Any] = {}
    if version >= 2:
        fields["share_acquire_mode"] = 0  # batch-optimized, Kafka's default
    return make_request(
        ApiKey.ShareFetch, version, group_id=group_id, member_id=member_id,
        share_session_epoch=epoch, max_wait_ms=max_wait_ms, min_bytes=min_bytes,
        max_bytes=max_bytes, max_records=max_records, batch_size=max_records,
        topics=[topic_cls(topic_id=tid, partitions=[parts[p] for p in sorted(parts)])
                for tid, parts in sorted(by_topic.items(), key=str)],
        forgotten_topics_data=[_SF.ForgottenTopic(topic_id=tid, partitions=sorted(ps))
                               for tid, ps in gone.items()], **fields)


def share_acknowledge_request(version: int, group_id: str, member_id: str, epoch: int,
                              acks: Mapping[tuple[uuid.UUID, int], Mapping[int, int]]) -> Any:
    topic_cls, part_cls = _SA.AcknowledgeTopic, _SA.AcknowledgeTopic.AcknowledgePartition
    by_topic: dict[uuid.UUID, list[Any]] = {}
    for (tid, p), offsets in sorted(acks.items(), key=str):
        by_topic.setdefault(tid, []).append(part_cls(partition_index=p, acknowledgement_batches=[
            part_cls.AcknowledgementBatch(first_offset=f, last_offset=la, acknowledge_types=t)
            for f, la, t in ack_batches(offsets)]))
    renew = any(kind == AcknowledgeType.RENEW for offsets in acks.values()
                for kind in offsets.values())
    if renew and version < 2:
        raise UnsupportedVersionError("renewing acquisition locks needs ShareAcknowledge v2 "
                                      "(Kafka 4.2)")
    fields: dict[str, Any] = {"is_renew_ack": renew} if version >= 2 else {}
    return make_request(ApiKey.ShareAcknowledge, version, group_id=group_id,
                        member_id=member_id, share_session_epoch=epoch,
                        topics=[topic_cls(topic_id=tid, partitions=parts)
                                for tid, parts in by_topic.items()], **fields)


def acquired_records(records: list[ConsumerRecord],
                     ranges: Iterable[tuple[int, int, int]],
                     ) -> tuple[list[ShareConsumerRecord], list[int]]:
    """The records inside the acquired ranges (first, last, delivery count), with their
    delivery counts, and the acquired offsets no record was found for (gaps)."""
    by_offset = {r.offset: r for r in records}
    out: list[ShareConsumerRecord] = []
    gaps: list[int] = []
    for first, last, count in ranges:
        for offset in range(first, last + 1):
            record = by_offset.get(offset)
            if record is None:
                gaps.append(offset)
            else:
                out.append(ShareConsumerRecord(*record, delivery_count=count))
    return out, gaps


class Acknowledgements:
    """Per partition: offsets handed to the application and not yet acknowledged
    (``delivered``), and acknowledgements waiting to be sent (``pending``: offset -> type)."""

    def __init__(self, *, implicit: bool) -> None:
        self.implicit = implicit
        self.delivered: dict[TopicPartition, set[int]] = {}
        self.pending: dict[TopicPartition, dict[int, int]] = {}

    def handed_out(self, record: ShareConsumerRecord) -> None:
        self.delivered.setdefault(TopicPartition(record.topic, record.partition),
                                  set()).add(record.offset)

    def gaps(self, tp: TopicPartition, offsets: Iterable[int]) -> None:
        self.pending.setdefault(tp, {}).update(dict.fromkeys(offsets, AcknowledgeType.GAP))

    def acknowledge(self, tp: TopicPartition, offset: int, kind: AcknowledgeType) -> bool:
        """False when the record was not handed out or is already acknowledged. A renewed
        record stays handed out: it still needs its final acknowledgement."""
        held = self.delivered.get(tp)
        if held is None or offset not in held:
            return False
        if kind != AcknowledgeType.RENEW:
            held.discard(offset)
        self.pending.setdefault(tp, {})[offset] = int(kind)
        return True

    def unacknowledged(self) -> int:
        return sum(len(offsets) for offsets in self.delivered.values())

    def accept_delivered(self) -> None:
        """Implicit mode: every record handed out is accepted."""
        for tp, offsets in self.delivered.items():
            self.pending.setdefault(tp, {}).update(dict.fromkeys(offsets, AcknowledgeType.ACCEPT))
        self.delivered.clear()

    def take(self, partitions: Iterable[TopicPartition] | None = None,
             ) -> dict[TopicPartition, dict[int, int]]:
        """The pending acknowledgements of ``partitions`` (None: all), removed."""
        wanted = list(self.pending) if partitions is None else [
            tp for tp in partitions if tp in self.pending]
        return {tp: self.pending.pop(tp) for tp in wanted if self.pending.get(tp)}

    def forget(self, tp: TopicPartition) -> None:
        """A partition no longer assigned: its records go back by their locks running out."""
        self.delivered.pop(tp, None)
        self.pending.pop(tp, None)
