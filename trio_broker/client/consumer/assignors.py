"""Partition assignors: who in a consumer group owns which partition.

The group leader runs one over every member's subscription (the ConsumerProtocol payloads,
``protocol.consumer_protocol``). Range and roundrobin reproduce the Java client's results, so a
mixed group agrees on who owns what.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

#: member id -> topic -> partitions
GroupAssignment = dict[str, dict[str, list[int]]]


class RangeAssignor:
    """Per topic, consecutive partition ranges to members sorted by id (Java's ``range``)."""

    name = "range"

    @staticmethod
    def assign(subscriptions: Mapping[str, Iterable[str]],
               partitions_per_topic: Mapping[str, int]) -> GroupAssignment:
        result: GroupAssignment = {member: {} for member in subscriptions}
        members_by_topic: dict[str, list[str]] = defaultdict(list)
        for member, topics in subscriptions.items():
            for topic in set(topics):
                if topic in partitions_per_topic:
                    members_by_topic[topic].append(member)
        for topic, members in members_by_topic.items():
            members.sort()
            count = partitions_per_topic[topic]
            per_member, extra = divmod(count, len(members))
            start = 0
            for index, member in enumerate(members):
                length = per_member + (1 if index < extra else 0)
                if length:
                    result[member][topic] = list(range(start, start + length))
                start += length
        return result


class RoundRobinAssignor:
    """All partitions in (topic, partition) order dealt to subscribed members in turn."""

    name = "roundrobin"

    @staticmethod
    def assign(subscriptions: Mapping[str, Iterable[str]],
               partitions_per_topic: Mapping[str, int]) -> GroupAssignment:
        result: GroupAssignment = {member: {} for member in subscriptions}
        members = sorted(subscriptions)
        if not members:
            return result
        subscribed = {member: set(topics) for member, topics in subscriptions.items()}
        all_topics = sorted({t for topics in subscribed.values() for t in topics
                             if t in partitions_per_topic})
        turn = 0
        for topic in all_topics:
            for partition in range(partitions_per_topic[topic]):
                # next member (cyclically) subscribed to this topic
                for _ in range(len(members)):
                    member = members[turn % len(members)]
                    turn += 1
                    if topic in subscribed[member]:
                        result[member].setdefault(topic, []).append(partition)
                        break
        return result


ASSIGNORS = {cls.name: cls for cls in (RangeAssignor, RoundRobinAssignor)}
