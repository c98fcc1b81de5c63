"""Consumer groups (classic protocol) and committed offsets.

The public face of the coordinator layer; the API handlers in ``trio_broker.apis.groups`` and
``trio_broker.apis.offsets`` translate requests into calls on ``GroupCoordinator``.
"""

from __future__ import annotations

from .coordinator import (
    OFFSETS_DIR_NAME,
    GroupCoordinator,
    GroupSummary,
    MemberSummary,
    OffsetCommitEntry,
)
from .group import JoinResult, SyncResult
from .offset_log import OffsetAndMetadata, OffsetLog
from .states import GroupState, IllegalStateTransition

__all__ = ["OFFSETS_DIR_NAME", "GroupCoordinator", "GroupState", "GroupSummary",
           "IllegalStateTransition", "JoinResult", "MemberSummary", "OffsetAndMetadata",
           "OffsetCommitEntry", "OffsetLog", "SyncResult"]
