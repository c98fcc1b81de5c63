"""Partition assignors: who in a consumer group owns which partition.

The group leader runs one over every member's subscription (the ConsumerProtocol payloads,
``protocol.consumer_protocol``). Range and roundrobin reproduce the Java client's results, so a
mixed group agrees on who owns what.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from ...core.groups import range_assign

#: member id -> topic -> partitions
GroupAssignment = dict[str, dict[str, list[int]]]


class RangeAssignor:
    """Per topic, consecutive partition ranges to members sorted by id (Java's ``range``)."""

    name = "range"

    @staticmethod
    def assign(subscriptions: Mapping[str, Iterable[str]],
               partitions_per_topic: Mapping[str, int]) -> GroupAssignment:
        return range_assign(subscriptions, partitions_per_topic)


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



class CooperativeStickyAssignor:
    """Kafka's ``cooperative-sticky``: a balanced assignment that keeps every partition with
    its owner where balance allows, and that never moves a partition in one step (KIP-429).

    Each member keeps the partitions it owns (from its v1+ subscription; on a conflict the
    claim of the later generation wins) up to its quota, the rest go to the least loaded
    subscribed member. Then, as Java's ``ConsumerCoordinator`` does for cooperative
    protocols, a partition that would change owner is left out of this generation's
    assignment: its owner revokes it, rejoins, and the next rebalance hands it over. With
    equal subscriptions the result is balanced to within one partition; with differing ones
    the balance is best-effort.
    """

    name = "cooperative-sticky"
    cooperative = True

    @staticmethod
    def assign(subscriptions: Mapping[str, Iterable[str]],
               partitions_per_topic: Mapping[str, int],
               owned: Mapping[str, Mapping[str, Iterable[int]]] | None = None,
               generations: Mapping[str, int] | None = None) -> GroupAssignment:
        owned = owned or {}
        generations = generations or {}
        subscribed = {m: {t for t in topics if t in partitions_per_topic}
                      for m, topics in subscriptions.items()}
        members = sorted(subscribed)
        all_partitions = sorted((t, p) for t in set().union(*subscribed.values())
                                for p in range(partitions_per_topic[t])) if members else []
        previous: dict[tuple[str, int], str] = {}
        for member in sorted(members, key=lambda m: (generations.get(m, -1), m)):
            for topic, parts in owned.get(member, {}).items():
                for p in parts:
                    if topic in subscribed[member] and 0 <= p < partitions_per_topic[topic]:
                        previous[(topic, p)] = member  # later generations overwrite
        result: dict[str, list[tuple[str, int]]] = {m: [] for m in members}
        if members:
            low, extra = divmod(len(all_partitions), len(members))
            by_owner: dict[str, list[tuple[str, int]]] = defaultdict(list)
            for tp, member in sorted(previous.items()):
                by_owner[member].append(tp)
            for member in sorted(members, key=lambda m: (-len(by_owner[m]), m)):
                quota = low + (1 if extra > 0 else 0)
                kept = by_owner[member][:quota]
                if len(kept) > low:
                    extra -= 1
                result[member] = kept
            taken = {tp for kept in result.values() for tp in kept}
            for tp in all_partitions:
                if tp in taken:
                    continue
                eligible = [m for m in members if tp[0] in subscribed[m]]
                if eligible:
                    result[min(eligible, key=lambda m: (len(result[m]), m))].append(tp)
        out: GroupAssignment = {m: {} for m in subscriptions}
        for member, tps in result.items():
            for topic, p in tps:
                if previous.get((topic, p), member) != member:
                    continue  # owned by another member still: handed over next generation
                out[member].setdefault(topic, []).append(p)
        for assigned in out.values():
            for plist in assigned.values():
                plist.sort()
        return out


ASSIGNORS = {cls.name: cls for cls in (RangeAssignor, RoundRobinAssignor,
                                       CooperativeStickyAssignor)}
