"""Authorized operations in Metadata and Describe* answers (KIP-430), without an authorizer.

Why: clients that ask (``include_*_authorized_operations``) show or check these sets; with no
authorizer Kafka answers every operation the resource type supports (``AuthHelper`` with no
authorizer, ``AclEntry.supportedOperations``). The codec reads and writes such a field as the set
of ``AclOperation`` codes; an ACL authorizer will narrow these sets per principal.
"""

from __future__ import annotations

import enum


class AclOperation(enum.IntEnum):
    """Kafka's ``AclOperation`` codes (the bit numbers of the 32-bit field)."""

    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


_O = AclOperation
TOPIC_OPERATIONS = frozenset({_O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER,
                              _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS})
GROUP_OPERATIONS = frozenset({_O.READ, _O.DESCRIBE, _O.DELETE})
CLUSTER_OPERATIONS = frozenset({_O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS,
                                _O.ALTER_CONFIGS, _O.IDEMPOTENT_WRITE, _O.ALTER, _O.DESCRIBE})


def topic_operations() -> frozenset[int]:
    """What a client may do with a topic (every supported operation: no authorizer)."""
    return TOPIC_OPERATIONS


def cluster_operations() -> frozenset[int]:
    """What a client may do with the cluster (every supported operation: no authorizer)."""
    return CLUSTER_OPERATIONS
