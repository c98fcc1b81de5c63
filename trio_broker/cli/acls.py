"""``trio-broker acls --add|--remove|--list``: Kafka's ``kafka-acls`` over CreateAcls,
DeleteAcls and DescribeAcls.

Why Kafka's options: a runbook line such as ``kafka-acls --bootstrap-server B --add
--allow-principal User:alice --operation Read --topic orders --group billing`` works once
``kafka-acls`` is replaced by ``trio-broker acls``: principals and hosts to allow or deny,
operations (default All), resources (``--topic``, ``--group``, ``--transactional-id``,
``--cluster``, each repeatable), ``--resource-pattern-type`` and the ``--producer`` /
``--consumer`` conveniences. The listing is printed as Kafka prints it.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..broker.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    validate_binding,
)
from ..client.core.errors import error_for, error_name
from ..protocol.api_keys import ApiKey, request_class
from ..protocol.messages import make_request
from .base import CommandError, Tool, UsageError
from .connect import add_client_arguments, open_client

_OPERATIONS = {o.name.replace("_", "").lower(): o for o in Operation
               if o not in (Operation.UNKNOWN, Operation.ANY)}
_PATTERNS = {p.name.lower(): p for p in PatternType if p is not PatternType.UNKNOWN}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = "Add, remove or list ACLs (Kafka's kafka-acls)."
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="create ACLs")
    action.add_argument("--remove", action="store_true", help="delete matching ACLs")
    action.add_argument("--list", action="store_true", help="list ACLs")
    for flag, what in (("--allow-principal", "principal to allow (User:name)"),
                       ("--deny-principal", "principal to deny (User:name)"),
                       ("--allow-host", "host the allowed principals may come from (default *)"),
                       ("--deny-host", "host the denied principals are denied from (default *)"),
                       ("--operation", "Read, Write, Create, Delete, Alter, Describe, "
                                       "ClusterAction, DescribeConfigs, AlterConfigs, "
                                       "IdempotentWrite, All (default All)"),
                       ("--topic", "a topic (* for all)"), ("--group", "a group (* for all)"),
                       ("--transactional-id", "a transactional id (* for all)")):
        parser.add_argument(flag, action="append", default=[], metavar="VALUE",
                            help=what + "; repeatable")
    parser.add_argument("--cluster", action="store_true", help="the cluster resource")
    parser.add_argument("--resource-pattern-type", default="literal", metavar="TYPE",
                        type=str.lower, choices=sorted(_PATTERNS),
                        help="literal or prefixed (with --list and --remove also any or "
                             "match); default literal")
    parser.add_argument("--principal", action="append", default=[], metavar="PRINCIPAL",
                        help="with --list: only the ACLs of this principal; repeatable")
    parser.add_argument("--producer", action="store_true",
                        help="WRITE, DESCRIBE and CREATE on the topics (and WRITE, DESCRIBE "
                             "on the transactional ids)")
    parser.add_argument("--consumer", action="store_true",
                        help="READ and DESCRIBE on the topics, READ on the groups")
    parser.add_argument("--idempotent", action="store_true",
                        help="with --producer: IDEMPOTENT_WRITE on the cluster")
    parser.add_argument("--force", action="store_true",
                        help="accepted for kafka-acls compatibility (nothing is asked)")
    add_client_arguments(parser)
    parser.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                        help="socket timeout per request (default 10)")


def _resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    found = [(ResourceType.TOPIC, t) for t in args.topic]
    found += [(ResourceType.GROUP, g) for g in args.group]
    found += [(ResourceType.TRANSACTIONAL_ID, x) for x in args.transactional_id]
    if args.cluster:
        found.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return found


def _operation(name: str) -> Operation:
    key = name.replace("_", "").replace("-", "").lower()
    if key not in _OPERATIONS:
        raise UsageError(f"unknown --operation {name!r}: one of "
                         f"{', '.join(sorted(o.name for o in _OPERATIONS.values()))}")
    return _OPERATIONS[key]


def _operations_by_resource(args: argparse.Namespace
                            ) -> list[tuple[ResourceType, str, list[Operation]]]:
    """Each resource with the operations to grant on it (the conveniences add their own)."""
    resources = _resources(args)
    if not (args.producer or args.consumer):
        operations = [_operation(o) for o in args.operation] or [Operation.ALL]
        return [(rtype, name, operations) for rtype, name in resources]
    if args.operation:
        raise UsageError("--operation cannot be combined with --producer or --consumer")
    if not args.topic:
        raise UsageError("--producer and --consumer need --topic")
    if args.consumer and not args.group:
        raise UsageError("--consumer needs --group")
    out: list[tuple[ResourceType, str, list[Operation]]] = []
    for rtype, name in resources:
        ops: list[Operation] = []
        if rtype is ResourceType.TOPIC:
            ops += [Operation.WRITE, Operation.DESCRIBE, Operation.CREATE] if args.producer else []
            ops += [Operation.READ, Operation.DESCRIBE] if args.consumer else []
        elif rtype is ResourceType.GROUP and args.consumer:
            ops = [Operation.READ]
        elif rtype is ResourceType.TRANSACTIONAL_ID and args.producer:
            ops = [Operation.WRITE, Operation.DESCRIBE]
        if ops:
            out.append((rtype, name, list(dict.fromkeys(ops))))
    if args.producer and args.idempotent:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME, [Operation.IDEMPOTENT_WRITE]))
    return out


def _entries(args: argparse.Namespace) -> list[tuple[str, str, Permission]]:
    """(principal, host, permission) of every --allow/--deny-principal."""
    entries = []
    for principals, hosts, permission in (
            (args.allow_principal, args.allow_host, Permission.ALLOW),
            (args.deny_principal, args.deny_host, Permission.DENY)):
        for principal in principals:
            entries += [(principal, host, permission) for host in hosts or ["*"]]
    return entries


def bindings(args: argparse.Namespace) -> list[AclBinding]:
    """The ACLs ``--add`` creates."""
    pattern = _PATTERNS[args.resource_pattern_type]
    if pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise UsageError("--add needs --resource-pattern-type literal or prefixed")
    entries = _entries(args)
    if not entries:
        raise UsageError("--add needs --allow-principal or --deny-principal")
    by_resource = _operations_by_resource(args)
    if not by_resource:
        raise UsageError("name a resource: --topic, --group, --transactional-id or --cluster")
    out = [AclBinding(rtype, name, pattern, principal, host, op, permission)
           for rtype, name, ops in by_resource for op in ops
           for principal, host, permission in entries]
    for binding in out:
        problem = validate_binding(binding)
        if problem:
            raise UsageError(problem)
    return out


def filters(args: argparse.Namespace) -> list[AclFilter]:
    """The filters ``--list`` (every ACL without a resource) and ``--remove`` match with."""
    pattern = _PATTERNS[args.resource_pattern_type]
    if args.list:
        resources: list[tuple[ResourceType, str | None]] = list(_resources(args)) or [
            (ResourceType.ANY, None)]
        return [AclFilter(rtype, name, pattern if name is not None else PatternType.ANY,
                          principal)
                for rtype, name in resources for principal in args.principal or [None]]
    if not _resources(args):
        raise UsageError("--remove needs a resource: --topic, --group, --transactional-id or "
                         "--cluster")
    chosen = args.operation or args.producer or args.consumer
    entries: list[tuple[str | None, str | None, Permission]] = [
        *_entries(args)] or [(None, None, Permission.ANY)]
    return [AclFilter(rtype, name, pattern, principal, host, op, permission)
            for rtype, name, ops in _operations_by_resource(args)
            for op in (ops if chosen else [Operation.ANY])
            for principal, host, permission in entries]


def _filter_fields(f: AclFilter, version: int) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "resource_type_filter": int(f.resource_type), "resource_name_filter": f.name,
        "principal_filter": f.principal, "host_filter": f.host,
        "operation": int(f.operation), "permission_type": int(f.permission)}
    if version >= 1:
        fields["pattern_type_filter"] = int(f.pattern_type)
    return fields


def run(args: argparse.Namespace) -> int:
    with open_client(args, timeout_s=args.timeout) as client:
        conn = client.any_connection()
        if args.add:
            return _add(conn, bindings(args))
        if args.remove:
            return _remove(conn, filters(args))
        return _list(conn, filters(args))


def _add(conn: Any, acls: list[AclBinding]) -> int:
    cls = request_class(ApiKey.CreateAcls).AclCreation

    def build(version: int) -> Any:
        return make_request(ApiKey.CreateAcls, version, creations=[cls(
            resource_type=int(b.resource_type), resource_name=b.name,
            resource_pattern_type=int(b.pattern_type), principal=b.principal, host=b.host,
            operation=int(b.operation), permission_type=int(b.permission)) for b in acls])

    answer = conn.request(ApiKey.CreateAcls, build)
    for binding, result in zip(acls, answer.results, strict=True):
        if result.error_code:
            raise error_for(result.error_code, f"cannot add {_entry_text(binding)} on "
                            f"{_pattern_text(binding)}: {error_name(result.error_code)}"
                            + (f": {result.error_message}" if result.error_message else ""))
    for binding in acls:
        print(f"Adding ACLs for resource `{_pattern_text(binding)}`: \n \t{_entry_text(binding)}")
    return 0


def _remove(conn: Any, acl_filters: list[AclFilter]) -> int:
    cls = request_class(ApiKey.DeleteAcls).DeleteAclsFilter
    answer = conn.request(ApiKey.DeleteAcls, lambda v: make_request(
        ApiKey.DeleteAcls, v, filters=[cls(**_filter_fields(f, v)) for f in acl_filters]))
    removed = 0
    for result in answer.filter_results:
        if result.error_code:
            raise error_for(result.error_code, f"cannot remove ACLs: "
                            f"{error_name(result.error_code)}"
                            + (f": {result.error_message}" if result.error_message else ""))
        for m in result.matching_acls:
            removed += 1
            binding = AclBinding(ResourceType(m.resource_type), m.resource_name,
                                 PatternType(m.pattern_type), m.principal, m.host,
                                 Operation(m.operation), Permission(m.permission_type))
            print(f"Removed ACL for resource `{_pattern_text(binding)}`: "
                  f"{_entry_text(binding)}")
    if not removed:
        print("No ACL matched.")
    return 0


def _list(conn: Any, acl_filters: list[AclFilter]) -> int:
    shown: dict[tuple[int, str, int], list[Any]] = {}
    for f in acl_filters:
        answer = conn.request(ApiKey.DescribeAcls, lambda v, f=f: make_request(
            ApiKey.DescribeAcls, v, **_filter_fields(f, v)))
        if answer.error_code:
            raise CommandError(f"cannot list ACLs: {error_name(answer.error_code)}"
                               + (f": {answer.error_message}" if answer.error_message else ""))
        for r in answer.resources:
            entries = shown.setdefault((r.resource_type, r.resource_name, r.pattern_type), [])
            entries += [a for a in r.acls if a not in entries]
    for (rtype, name, pattern), entries in sorted(shown.items()):
        print(f"Current ACLs for resource `ResourcePattern(resourceType="
              f"{ResourceType(rtype).name}, name={name}, patternType="
              f"{PatternType(pattern).name})`: ")
        for a in entries:
            print(f" \t(principal={a.principal}, host={a.host}, operation="
                  f"{Operation(a.operation).name}, permissionType="
                  f"{Permission(a.permission_type).name})")
        print()
    return 0


def _pattern_text(b: AclBinding) -> str:
    return (f"ResourcePattern(resourceType={b.resource_type.name}, name={b.name}, "
            f"patternType={b.pattern_type.name})")


def _entry_text(b: AclBinding) -> str:
    return (f"(principal={b.principal}, host={b.host}, operation={b.operation.name}, "
            f"permissionType={b.permission.name})")


ACLS = Tool(add_arguments, run)
