"""Every operation each resource type supports (KIP-430's answer without an authorizer).

Why kept apart from ``authz``: clients that ask (``include_*_authorized_operations``) get these
sets when authorization is off (Kafka's ``AclEntry.supportedOperations``); with an authorizer
``authz.operations`` narrows them to the principal's. The codec reads and writes such a field
as the set of ``AclOperation`` codes.
"""

from __future__ import annotations

from ..security.acl import SUPPORTED_OPERATIONS, ResourceType
from ..security.acl import Operation as AclOperation

__all__ = ["CLUSTER_OPERATIONS", "GROUP_OPERATIONS", "TOPIC_OPERATIONS", "AclOperation"]

TOPIC_OPERATIONS = frozenset(int(o) for o in SUPPORTED_OPERATIONS[ResourceType.TOPIC])
GROUP_OPERATIONS = frozenset(int(o) for o in SUPPORTED_OPERATIONS[ResourceType.GROUP])
CLUSTER_OPERATIONS = frozenset(int(o) for o in SUPPORTED_OPERATIONS[ResourceType.CLUSTER])
