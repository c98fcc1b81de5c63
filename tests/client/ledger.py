"""A rebalance listener that keeps who owns what across members, for group tests."""

from __future__ import annotations

from trio_broker.client import TopicPartition
from trio_broker.client.trio.consumer import ConsumerRebalanceListener


class Ledger(ConsumerRebalanceListener):
    """Who owns what, from every member's callbacks; fails the moment two own one partition."""

    def __init__(self, owners: dict[TopicPartition, str], name: str,
                 revoked: list[TopicPartition]) -> None:
        self.owners, self.name, self.revoked = owners, name, revoked

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        for tp in revoked:
            assert self.owners.pop(tp) == self.name
        self.revoked.extend(revoked)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        for tp in assigned:
            assert tp not in self.owners, f"{tp} owned by {self.owners[tp]} and {self.name}"
            self.owners[tp] = self.name
