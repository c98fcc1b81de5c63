"""The share groups page (KIP-932): each share group's members and, per share-partition, where
delivery stands: the start offset, the next offset never acquired, the records in flight and
those acquired now, and the lag (KIP-1226, as DescribeShareGroupOffsets answers it).

Why read the coordinator's state and not ask over the wire as the consumer group pages do: the
records in flight and acquired are delivery state no Kafka API describes. The console runs on
the broker's own Trio loop, so the read is a consistent snapshot between two requests; a
logged-in user sees only the groups the ACLs let them DESCRIBE, as ShareGroupDescribe would.
"""

from __future__ import annotations

from typing import NamedTuple

from starlette.requests import Request
from starlette.responses import Response

from ..coordinator.share import RecordState
from ..security.acl import Operation, ResourceType
from .sessions import Session
from .web import console_of, page, render, session_may


class ShareMemberRow(NamedTuple):
    member_id: str
    client_id: str
    client_host: str
    partitions: list[str]


class SharePartitionRow(NamedTuple):
    topic: str
    partition: int
    start_offset: int
    end_offset: int
    in_flight: int
    acquired: int
    lag: int


class ShareGroupRow(NamedTuple):
    group_id: str
    state: str
    epoch: int
    members: list[ShareMemberRow]
    partitions: list[SharePartitionRow]


def _may_describe(request: Request, session: Session, group_id: str) -> bool:
    return session_may(request, session, Operation.DESCRIBE, ResourceType.GROUP, group_id)


def share_group_rows(request: Request, session: Session) -> list[ShareGroupRow]:
    state = console_of(request).state
    shares, logs = state.shares, state.logs
    rows = []
    for group_id, group in sorted(shares.groups.items()):
        if not _may_describe(request, session, group_id):
            continue
        members = [ShareMemberRow(m.member_id, m.client_id, m.client_host, sorted(
            f"{logs.topic_name(tid) or tid}-{p}" for tid, parts in m.assignment.items()
            for p in parts)) for m in sorted(group.members.values(), key=lambda m: m.member_id)]
        partitions = []
        for (gid, topic_id, partition), sp in shares.partitions.items():
            topic = logs.topic_name(topic_id)
            if gid != group_id or topic is None:
                continue
            states = [r.state for r in sp.in_flight.values()]
            partitions.append(SharePartitionRow(
                topic, partition, sp.start_offset, sp.end_offset,
                sum(s in (RecordState.AVAILABLE, RecordState.ACQUIRED) for s in states),
                states.count(RecordState.ACQUIRED), shares.lag(sp, topic_id, partition)))
        rows.append(ShareGroupRow(group_id, group.state, group.group_epoch, members,
                                  sorted(partitions)))
    return rows


@page
async def share_groups(request: Request, session: Session) -> Response:
    return render(request, "share_groups.html", session,
                  groups=share_group_rows(request, session))


__all__ = ["share_group_rows", "share_groups"]
