"""Consumer groups (the classic protocol and KIP-848's), committed offsets, transactions.

The public face of the coordinator layer: ``GroupCoordinator`` (``coordinator.py``), which the
group and offset handlers call, over classic membership (``membership.GroupMetadataManager``,
``rebalance``, ``group``, ``states``), KIP-848 consumer groups (``consumer_groups``,
``consumer_rebalance``, ``consumer_group``, ``reconciliation`` and the server-side
``assignors``) and committed offsets (``offsets.OffsetMetadataManager``), kept durable in their
own files (``group_store``, ``group_log``, ``offset_log``, ``record_file``); and
``TransactionCoordinator`` (``transactions.py``) over the transactional ids' state
(``txn_metadata``), the transaction log (``txn_log``) and the markers written into partitions
(``txn_markers``). Both append Kafka's records of every durable change to the internal topics
``__consumer_offsets`` and ``__transaction_state`` (``internal_topics``). Each group's own
configs (the GROUP config resource, consumer and share groups alike) are ``group_configs``;
share groups (KIP-932) are the ``share`` package, imported at their first use. The handlers in
``trio_broker.broker.apis`` (``groups``, ``offsets``, ``consumer_groups``, ``transactions``,
``init_producer_id``) translate requests into calls on them. See docs/consumer-groups.md and
docs/transactions.md.

May import storage (markers and coordinator records go into partition logs), config, security
(the bounded matcher for subscribed patterns), ``broker.offload`` and the protocol; never the
server core, a handler or the network.
"""

from __future__ import annotations

from .coordinator import OFFSETS_DIR_NAME, GroupCoordinator
from .group import JoinResult, SyncResult
from .membership import (
    CLASSIC_GROUP_TYPE,
    GroupMetadataManager,
    GroupSummary,
    JoinRequest,
    LeavingMember,
    ListedGroup,
    MemberSummary,
)
from .offset_log import OffsetAndMetadata, OffsetLog
from .offsets import CommitRequest, OffsetCommitEntry, OffsetMetadataManager
from .states import GroupState, IllegalStateTransition

__all__ = ["CLASSIC_GROUP_TYPE", "OFFSETS_DIR_NAME", "CommitRequest", "GroupCoordinator",
           "GroupMetadataManager", "GroupState", "GroupSummary", "IllegalStateTransition",
           "JoinRequest", "JoinResult", "LeavingMember", "ListedGroup", "MemberSummary",
           "OffsetAndMetadata", "OffsetCommitEntry", "OffsetLog", "OffsetMetadataManager",
           "SyncResult"]
