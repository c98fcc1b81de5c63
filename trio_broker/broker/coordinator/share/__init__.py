"""Share groups (KIP-932): membership (``group``), each share-partition's delivery state
(``partition``) and the coordinator over both and the members' share sessions
(``coordinator``). The handlers in ``trio_broker.broker.apis.share`` call it. See
docs/share-groups.md.
"""

from __future__ import annotations

from .coordinator import ShareConfig, ShareCoordinator, ShareSession
from .group import HeartbeatAnswer, ShareGroup, ShareMember
from .partition import AcknowledgeType, AcquiredRange, Acquisition, RecordState, SharePartition

__all__ = ["AcknowledgeType", "AcquiredRange", "Acquisition", "HeartbeatAnswer", "RecordState",
           "ShareConfig", "ShareCoordinator", "ShareGroup", "ShareMember", "SharePartition",
           "ShareSession"]
