"""Consumer groups (classic protocol) and committed offsets.

The public face of the coordinator layer: ``GroupCoordinator`` (``coordinator.py``) over group
membership (``membership.GroupMetadataManager``) and committed offsets
(``offsets.OffsetMetadataManager``). The API handlers in ``trio_broker.broker.apis.groups`` and
``trio_broker.broker.apis.offsets`` translate requests into calls on ``GroupCoordinator``.
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
