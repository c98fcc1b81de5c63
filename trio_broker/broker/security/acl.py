"""Kafka's ACL model: bindings, filters, and the authorizer's decision.

Why Kafka's rules exactly: clients, ``kafka-acls`` scripts and applications' permission tests are
written against them. An ACL binds a resource pattern (type, name, LITERAL or PREFIXED) to an
entry (principal, host, operation, ALLOW/DENY). A request is allowed when the principal is a
super user, or no DENY entry matches and an ALLOW entry matches (an ALLOW of an operation also
allows the operations it implies: READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS
implies DESCRIBE_CONFIGS). A resource no ACL names at all follows
``allow.everyone.if.no.acl.found`` (Kafka's ``StandardAuthorizer``).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import NamedTuple


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
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
    TWO_PHASE_COMMIT = 15


class Permission(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


#: the one name of the cluster resource (Kafka's ``Resource.CLUSTER_NAME``)
CLUSTER_NAME = "kafka-cluster"
#: literal resource name and principal that match every resource / every user
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
ANONYMOUS = "User:ANONYMOUS"
#: Kafka's class names that turn the authorizer on (``authorizer.class.name``)
AUTHORIZER_CLASSES = frozenset({"org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                                "kafka.security.authorizer.AclAuthorizer"})

_O = Operation
#: operation -> the operations whose ALLOW also allows it (Kafka's ``AclEntry`` implications)
_IMPLIED_BY: dict[Operation, frozenset[Operation]] = {
    _O.DESCRIBE: frozenset({_O.DESCRIBE, _O.READ, _O.WRITE, _O.DELETE, _O.ALTER, _O.ALL}),
    _O.DESCRIBE_CONFIGS: frozenset({_O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS, _O.ALL}),
}

#: the operations each resource type supports (Kafka's ``AclEntry.supportedOperations``)
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[Operation]] = {
    ResourceType.TOPIC: frozenset({_O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER,
                                   _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({_O.READ, _O.DESCRIBE, _O.DELETE, _O.DESCRIBE_CONFIGS,
                                   _O.ALTER_CONFIGS}),
    ResourceType.CLUSTER: frozenset({_O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS,
                                     _O.ALTER_CONFIGS, _O.IDEMPOTENT_WRITE, _O.ALTER,
                                     _O.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({_O.DESCRIBE, _O.WRITE, _O.TWO_PHASE_COMMIT}),
    ResourceType.DELEGATION_TOKEN: frozenset({_O.DESCRIBE}),
    ResourceType.USER: frozenset({_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS}),
}


class AclBinding(NamedTuple):
    """One ACL: a resource pattern and an access entry (Kafka's ``AclBinding``)."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def to_json(self) -> dict[str, object]:
        return {"resource_type": self.resource_type.name, "name": self.name,
                "pattern_type": self.pattern_type.name, "principal": self.principal,
                "host": self.host, "operation": self.operation.name,
                "permission": self.permission.name}

    @classmethod
    def from_json(cls, doc: dict[str, str]) -> AclBinding:
        return cls(ResourceType[doc["resource_type"]], doc["name"],
                   PatternType[doc["pattern_type"]], doc["principal"], doc["host"],
                   Operation[doc["operation"]], Permission[doc["permission"]])


def validate_binding(binding: AclBinding) -> str | None:
    """Why Kafka refuses to create ``binding`` (INVALID_REQUEST), or None."""
    if binding.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
        return f"Invalid resource type {binding.resource_type.name}"
    if binding.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {binding.pattern_type.name}"
    if binding.operation in (Operation.ANY, Operation.UNKNOWN):
        return f"Invalid operation {binding.operation.name}"
    if binding.permission in (Permission.ANY, Permission.UNKNOWN):
        return f"Invalid permission type {binding.permission.name}"
    if not binding.name:
        return "Resource name should not be empty"
    if binding.resource_type is ResourceType.CLUSTER and binding.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    kind, colon, name = binding.principal.partition(":")
    if not colon or not kind or not name:
        return f"Could not parse principal from `{binding.principal}` (no colon is found)"
    if not binding.host:
        return "Invalid host: empty"
    if (binding.operation is not Operation.ALL
            and binding.operation not in SUPPORTED_OPERATIONS[binding.resource_type]):
        return (f"Operation {binding.operation.name} is not supported on resource type "
                f"{binding.resource_type.name}")
    return None


class AclFilter(NamedTuple):
    """Kafka's ``AclBindingFilter``: None fields and ANY values match everything."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def invalid(self) -> str | None:
        """Why Kafka refuses this filter (INVALID_REQUEST), or None."""
        for value in (self.resource_type, self.pattern_type, self.operation, self.permission):
            if value == 0:
                return f"Filter has an UNKNOWN element: {type(value).__name__}"
        return None

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type is not ResourceType.ANY and b.resource_type is not self.resource_type:
            return False
        if not self._pattern_matches(b):
            return False
        if self.principal is not None and b.principal != self.principal:
            return False
        if self.host is not None and b.host != self.host:
            return False
        if self.operation is not Operation.ANY and b.operation is not self.operation:
            return False
        return self.permission is Permission.ANY or b.permission is self.permission

    def _pattern_matches(self, b: AclBinding) -> bool:
        pattern = self.pattern_type
        if pattern is PatternType.MATCH:
            # the ACLs that apply to the named resource: exact, wildcard, covering prefixes
            if self.name is None:
                return True
            if b.pattern_type is PatternType.LITERAL:
                return b.name == self.name or b.name == WILDCARD
            return b.pattern_type is PatternType.PREFIXED and self.name.startswith(b.name)
        if pattern is not PatternType.ANY and b.pattern_type is not pattern:
            return False
        return self.name is None or b.name == self.name


class Authorizer:
    """The ACLs in memory and Kafka's decision over them; the store keeps them on disk."""

    def __init__(self, *, super_users: Iterable[str] = (),
                 allow_if_no_acl: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._acls: set[AclBinding] = set()
        #: (resource type, literal name) -> bindings; prefixed bindings by type
        self._literal: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        self._prefixed: dict[ResourceType, list[AclBinding]] = {}

    @property
    def acls(self) -> frozenset[AclBinding]:
        return frozenset(self._acls)

    def replace_all(self, bindings: Iterable[AclBinding]) -> None:
        """Use exactly ``bindings`` from now on (load, add, delete all go through here)."""
        self._acls = set(bindings)
        literal: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        prefixed: dict[ResourceType, list[AclBinding]] = {}
        for b in self._acls:
            if b.pattern_type is PatternType.PREFIXED:
                prefixed.setdefault(b.resource_type, []).append(b)
            else:
                literal.setdefault((b.resource_type, b.name), []).append(b)
        self._literal, self._prefixed = literal, prefixed

    def matching(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        """Every ACL that applies to the resource: literal, wildcard and covering prefixes."""
        found = list(self._literal.get((resource_type, name), ()))
        if name != WILDCARD:
            found += self._literal.get((resource_type, WILDCARD), ())
        found += [b for b in self._prefixed.get(resource_type, ()) if name.startswith(b.name)]
        return found

    def authorize(self, principal: str | None, host: str, operation: Operation,
                  resource_type: ResourceType, name: str) -> bool:
        """Kafka's decision for one action on one resource."""
        principal = principal or ANONYMOUS
        if principal in self.super_users:
            return True
        acls = self.matching(resource_type, name)
        if not acls:
            return self.allow_if_no_acl
        allowing = _IMPLIED_BY.get(operation, frozenset({operation, Operation.ALL}))
        allowed = False
        for b in acls:
            if not _entry_matches(b, principal, host):
                continue
            if b.permission is Permission.DENY:
                if b.operation is operation or b.operation is Operation.ALL:
                    return False  # deny wins
            elif b.operation in allowing:
                allowed = True
        return allowed

    def authorized_operations(self, principal: str | None, host: str,
                              resource_type: ResourceType, name: str) -> frozenset[int]:
        """The operations of the resource type this principal may perform (KIP-430)."""
        return frozenset(int(op) for op in SUPPORTED_OPERATIONS[resource_type]
                         if self.authorize(principal, host, op, resource_type, name))

    def authorize_any(self, principal: str | None, host: str, operation: Operation,
                      resource_type: ResourceType) -> bool:
        """Could the principal perform ``operation`` on some resource of the type?

        Kafka's ``authorizeByResourceType`` (idempotent producers without IDEMPOTENT_WRITE on
        the cluster need WRITE on some topic): an ALLOW of the operation that no DENY of the
        same principal covers."""
        principal = principal or ANONYMOUS
        if principal in self.super_users:
            return True
        of_type = [b for b in self._acls if b.resource_type is resource_type]
        if not of_type:
            return self.allow_if_no_acl
        denied: list[AclBinding] = []
        allows: list[AclBinding] = []
        for b in of_type:
            if not _entry_matches(b, principal, host):
                continue
            if b.operation is not operation and b.operation is not Operation.ALL:
                continue
            (denied if b.permission is Permission.DENY else allows).append(b)
        if any(d.name == WILDCARD and d.pattern_type is PatternType.LITERAL for d in denied):
            return False
        return any(not any(_covers(d, a) for d in denied) for a in allows)


def _covers(deny: AclBinding, allow: AclBinding) -> bool:
    if deny.pattern_type is PatternType.PREFIXED:
        return allow.name.startswith(deny.name)
    return allow.pattern_type is PatternType.LITERAL and allow.name == deny.name


def _entry_matches(b: AclBinding, principal: str, host: str) -> bool:
    if b.principal != principal and not (b.principal == WILDCARD_PRINCIPAL
                                         and principal.startswith("User:")):
        return False
    return b.host == WILDCARD or b.host == host
