"""minikafka acls: kafka-acls.sh's --add, --remove and --list, with its options.

    minikafka acls --bootstrap-server HOST:PORT --command-config admin.properties --add \\
        --allow-principal User:alice --operation Read --operation Describe --topic orders
    minikafka acls ... --add --allow-principal User:alice --consumer --topic orders --group billing
    minikafka acls ... --add --allow-principal User:alice --producer --topic orders --resource-pattern-type prefixed
    minikafka acls ... --remove --force --allow-principal User:alice --operation Read --topic orders
    minikafka acls ... --list [--topic orders] [--principal User:alice]

Operations and resource types are spelled as Kafka spells them (Read, AlterConfigs,
TransactionalId; case and underscores do not matter).  A binding Kafka would refuse (an operation
the resource type does not have, a principal that is not Type:name) is refused before anything is
sent (exit 2).  --remove asks for confirmation unless --force.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from minikafka.security.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    from_pascal,
    pascal,
)
from minikafka.tools.admin import add_connection_arguments, check, connect, run_tool
from minikafka.tools.client import Cluster, RequestFailed, ToolError
from protocol import ErrorCode

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
Op = AclOperation
# The operations each resource type has (Kafka's AclCommand).
VALID_OPERATIONS = {
    ResourceType.TOPIC: {Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER, Op.DESCRIBE_CONFIGS,
                         Op.ALTER_CONFIGS, Op.ALL},
    ResourceType.GROUP: {Op.READ, Op.DESCRIBE, Op.DELETE, Op.ALL},
    ResourceType.CLUSTER: {Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE,
                           Op.ALTER, Op.DESCRIBE, Op.ALL},
    ResourceType.TRANSACTIONAL_ID: {Op.DESCRIBE, Op.WRITE, Op.ALL},
    ResourceType.DELEGATION_TOKEN: {Op.DESCRIBE, Op.ALL},
    ResourceType.USER: {Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS, Op.ALL},
}
NAMED_OPERATIONS = [op for op in AclOperation if op not in (Op.UNKNOWN, Op.ANY)]


def pattern_text(pattern: ResourcePattern) -> str:
    """A resource pattern as kafka-acls.sh prints it."""
    return (f"ResourcePattern(resourceType={pattern.resource_type.name}, name={pattern.name}, "
            f"patternType={pattern.pattern_type.name})")


def entry_text(entry: AccessControlEntry) -> str:
    return (f"(principal={entry.principal}, host={entry.host}, operation={entry.operation.name}, "
            f"permissionType={entry.permission.name})")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_arguments(parser)
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--add", action="store_true", help="add ACLs")
    action.add_argument("--remove", action="store_true", help="remove ACLs")
    action.add_argument("--list", action="store_true", help="list ACLs")
    parser.add_argument("--topic", action="append", default=[], metavar="TOPIC", help="a topic (repeatable; * is all)")
    parser.add_argument("--group", action="append", default=[], metavar="GROUP", help="a consumer group (repeatable)")
    parser.add_argument("--transactional-id", action="append", default=[], metavar="ID",
                        help="a transactional id (repeatable)")
    parser.add_argument("--cluster", action="store_true", help="the cluster")
    parser.add_argument("--user-principal", action="append", default=[], metavar="USER",
                        help="a user, for CreateTokens and DescribeTokens (repeatable)")
    parser.add_argument("--resource-pattern-type", default=None, metavar="TYPE",
                        help="literal (the default of --add and --remove), prefixed; --list also any (its "
                             "default) and match (every ACL that applies to the resource)")
    parser.add_argument("--allow-principal", action="append", default=[], metavar="TYPE:NAME",
                        help="who is allowed (User:alice, User:*; repeatable)")
    parser.add_argument("--deny-principal", action="append", default=[], metavar="TYPE:NAME",
                        help="who is denied (repeatable)")
    parser.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                        help="from where --allow-principal is allowed (default: * , every host)")
    parser.add_argument("--deny-host", action="append", default=[], metavar="HOST",
                        help="from where --deny-principal is denied (default: *)")
    parser.add_argument("--operation", action="append", default=[], metavar="OPERATION",
                        help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, AlterConfigs, "
                             "DescribeConfigs, IdempotentWrite, CreateTokens, DescribeTokens or All (the default; "
                             "repeatable)")
    parser.add_argument("--principal", action="append", default=[], metavar="TYPE:NAME",
                        help="with --list: only the ACLs of this principal (repeatable)")
    parser.add_argument("--producer", action="store_true",
                        help="what a producer needs: Write, Describe and Create on --topic (Write and Describe "
                             "on --transactional-id; with --idempotent also IdempotentWrite on the cluster)")
    parser.add_argument("--consumer", action="store_true",
                        help="what a consumer needs: Read and Describe on --topic, Read on --group")
    parser.add_argument("--idempotent", action="store_true", help="with --producer: IdempotentWrite on the cluster")
    parser.add_argument("--force", action="store_true", help="with --remove: do not ask for confirmation")


def run(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr,
        confirm: TextIO = sys.stdin) -> int:
    return run_tool(lambda: _run(args, out, confirm), err)


def _run(args: argparse.Namespace, out: TextIO, confirm: TextIO) -> int:
    if not (args.add or args.remove or args.list):
        raise ToolError("no action: use --add, --remove or --list")
    if (args.producer or args.consumer or args.idempotent) and not args.add:
        raise ToolError("--producer, --consumer and --idempotent go with --add")
    if args.list:
        if args.allow_principal or args.deny_principal or args.operation:
            raise ToolError("--list takes --principal, not --allow-principal, --deny-principal or --operation")
        pattern_type = _pattern_type(args.resource_pattern_type or "any", listing=True)
        filters = [(p, principal) for p in _patterns(args, pattern_type, required=False)
                   for principal in (args.principal or [None])]
        for _, principal in filters:
            if principal is not None:
                _principal(principal, "--principal")
        cluster = connect(args, "minikafka-acls")
        try:
            return _list(cluster, filters, out)
        finally:
            cluster.close()
    if args.principal:
        raise ToolError("--principal goes with --list; --add and --remove take --allow-principal or --deny-principal")
    pattern_type = _pattern_type(args.resource_pattern_type or "literal", listing=False)
    bindings = _bindings(args, pattern_type)
    cluster = connect(args, "minikafka-acls")
    try:
        if args.add:
            return _add(cluster, bindings, out)
        return _remove(cluster, args, bindings, pattern_type, out, confirm)
    finally:
        cluster.close()


def _pattern_type(text: str, listing: bool) -> PatternType:
    allowed = ("literal", "prefixed", "any", "match") if listing else ("literal", "prefixed")
    if text.lower() not in allowed:
        raise ToolError(f"--resource-pattern-type: {text!r} is not one of {', '.join(allowed)}"
                        + ("" if listing else " (any and match only filter --list)"))
    return PatternType[text.upper()]


def _principal(text: str, option: str) -> str:
    kind, colon, name = text.partition(":")
    if not colon or not kind or not name:
        raise ToolError(f"{option}: {text!r} is not TYPE:NAME (User:alice, or User:* for everyone)")
    return text


def _operation(text: str) -> AclOperation:
    try:
        operation = AclOperation(from_pascal(AclOperation, text))
    except ValueError:
        operation = AclOperation.UNKNOWN
    if operation not in NAMED_OPERATIONS:
        raise ToolError(f"--operation: {text!r} is not one of "
                        + ", ".join(pascal(op.name) for op in NAMED_OPERATIONS))
    return operation


def _patterns(args: argparse.Namespace, pattern_type: PatternType, required: bool) -> list[ResourcePattern | None]:
    """The resources the options name; none (listing) means every ACL."""
    found: list[ResourcePattern | None] = []
    for resource_type, names in ((ResourceType.TOPIC, args.topic), (ResourceType.GROUP, args.group),
                                 (ResourceType.TRANSACTIONAL_ID, args.transactional_id),
                                 (ResourceType.USER, args.user_principal)):
        for name in names:
            if not name:
                raise ToolError(f"--{_option(resource_type)}: a name is needed")
            found.append(ResourcePattern(resource_type, name, pattern_type))
    if args.cluster:
        found.append(ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, pattern_type))
    if not found:
        if required:
            raise ToolError("name a resource: --topic, --group, --transactional-id, --cluster or --user-principal")
        return [None]
    return found


def _option(resource_type: ResourceType) -> str:
    return {ResourceType.USER: "user-principal"}.get(resource_type, resource_type.name.lower().replace("_", "-"))


def _bindings(args: argparse.Namespace, pattern_type: PatternType) -> list[tuple[ResourcePattern, AccessControlEntry]]:
    """The ACLs --add makes or --remove takes away, checked as Kafka's tool checks them."""
    patterns = [p for p in _patterns(args, pattern_type, required=True) if p is not None]
    entries: list[tuple[str, str, AclPermissionType]] = []
    for principals, hosts, permission, option in (
            (args.allow_principal, args.allow_host, AclPermissionType.ALLOW, "--allow-principal"),
            (args.deny_principal, args.deny_host, AclPermissionType.DENY, "--deny-principal")):
        if hosts and not principals:
            raise ToolError(f"{'--allow-host' if permission == AclPermissionType.ALLOW else '--deny-host'} "
                            f"needs {option}")
        for principal in principals:
            for host in hosts or ["*"]:
                entries.append((_principal(principal, option), host, permission))
    if not entries:
        if args.add:
            raise ToolError("--add needs --allow-principal or --deny-principal")
        return [(p, AccessControlEntry("", "", AclOperation.ANY, AclPermissionType.ANY)) for p in patterns]
    by_resource: dict[ResourcePattern, set[AclOperation]] = {}
    if args.producer or args.consumer:
        if args.operation:
            raise ToolError("--producer and --consumer choose the operations; leave out --operation")
        if args.consumer and not (args.topic and args.group):
            raise ToolError("--consumer needs --topic and --group")
        if args.producer and not (args.topic or args.transactional_id):
            raise ToolError("--producer needs --topic or --transactional-id")
        for pattern in patterns:
            operations: set[AclOperation] = set()
            if pattern.resource_type == ResourceType.TOPIC:
                operations |= {Op.WRITE, Op.DESCRIBE, Op.CREATE} if args.producer else set()
                operations |= {Op.READ, Op.DESCRIBE} if args.consumer else set()
            elif pattern.resource_type == ResourceType.GROUP and args.consumer:
                operations.add(Op.READ)
            elif pattern.resource_type == ResourceType.TRANSACTIONAL_ID and args.producer:
                operations |= {Op.WRITE, Op.DESCRIBE}
            if operations:
                by_resource[pattern] = operations
        if args.producer and args.idempotent:
            cluster = ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)
            by_resource[cluster] = {Op.IDEMPOTENT_WRITE}
    else:
        if args.idempotent:
            raise ToolError("--idempotent goes with --producer")
        operations = {_operation(text) for text in args.operation} or {Op.ALL}
        for pattern in patterns:
            wrong = sorted(operations - VALID_OPERATIONS[pattern.resource_type])
            if wrong:
                raise ToolError(f"--operation {pascal(wrong[0].name)} does not apply to a "
                                f"{pascal(pattern.resource_type.name)}; it has "
                                + ", ".join(sorted(pascal(op.name) for op in VALID_OPERATIONS[pattern.resource_type])))
            by_resource[pattern] = set(operations)
    return [(pattern, AccessControlEntry(principal, host, operation, permission))
            for pattern, operations in by_resource.items()
            for principal, host, permission in entries
            for operation in sorted(operations)]


def _add(cluster: Cluster, bindings: list[tuple[ResourcePattern, AccessControlEntry]], out: TextIO) -> int:
    creations = [{"resource_type": p.resource_type, "resource_name": p.name, "resource_pattern_type": p.pattern_type,
                  "principal": e.principal, "host": e.host, "operation": e.operation,
                  "permission_type": e.permission} for p, e in bindings]
    response = cluster.ask_any(CREATE_ACLS, {"creations": creations})
    failed = [(binding, r) for binding, r in zip(bindings, response.results, strict=True) if r.error_code]
    for pattern in dict.fromkeys(p for p, _ in bindings):
        added = [e for (p, e), r in zip(bindings, response.results, strict=True) if p == pattern and not r.error_code]
        if added:
            out.write(f"Adding ACLs for resource `{pattern_text(pattern)}`: \n"
                      + "".join(f" \t{entry_text(e)} \n" for e in added) + "\n")
    if failed:
        (pattern, entry), result = failed[0]
        _check_security(result.error_code)
        check(f"{len(failed)} ACL(s) not added; the first, {entry_text(entry)} on {pattern_text(pattern)}",
              result.error_code, result.error_message)
    return 0


def _check_security(error_code: int) -> None:
    if error_code == ErrorCode.SECURITY_DISABLED:
        raise RequestFailed("the broker has no authorizer, so it keeps no ACLs: set authorizer.class.name="
                            "kafka.security.authorizer.AclAuthorizer in its server.properties")


def _remove(cluster: Cluster, args: argparse.Namespace, bindings: list[tuple[ResourcePattern, AccessControlEntry]],
            pattern_type: PatternType, out: TextIO, confirm: TextIO) -> int:
    if not args.force:
        out.write("Are you sure you want to remove ACLs: \n" + "".join(
            f" \t{entry_text(e) if e.principal else '(every ACL)'} \n from resource filter `{pattern_text(p)}`? "
            "(y/n)\n" for p, e in bindings))
        out.flush()
        if confirm.readline().strip().lower() not in ("y", "yes"):
            raise RequestFailed("nothing removed (not confirmed; --force removes without asking)")
    filters = []
    for pattern, entry in bindings:
        anything = not entry.principal
        filters.append({"resource_type_filter": pattern.resource_type, "resource_name_filter": pattern.name,
                        "pattern_type_filter": pattern_type,
                        "principal_filter": None if anything else entry.principal,
                        "host_filter": None if anything else entry.host, "operation": entry.operation,
                        "permission_type": entry.permission})
    response = cluster.ask_any(DELETE_ACLS, {"filters": filters})
    removed = 0
    for result in response.filter_results:
        _check_security(result.error_code)
        check("ACLs not removed", result.error_code, result.error_message)
        for acl in result.matching_acls:
            check("an ACL was not removed", acl.error_code, acl.error_message)
            removed += 1
            out.write(f"Removed ACL {entry_text(_entry(acl))} from resource "
                      f"`{pattern_text(_pattern(acl, acl.pattern_type))}`.\n")
    if not removed:
        out.write("No ACL matched; nothing removed.\n")
    return 0


def _list(cluster: Cluster, filters: list[tuple[ResourcePattern | None, str | None]], out: TextIO) -> int:
    found: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for pattern, principal in filters:
        body = {"resource_type_filter": pattern.resource_type if pattern else ResourceType.ANY,
                "resource_name_filter": pattern.name if pattern else None,
                "pattern_type_filter": pattern.pattern_type if pattern else PatternType.ANY,
                "principal_filter": principal, "host_filter": None, "operation": AclOperation.ANY,
                "permission_type": AclPermissionType.ANY}
        response = cluster.ask_any(DESCRIBE_ACLS, body)
        _check_security(response.error_code)
        check("ACLs not listed", response.error_code, response.error_message)
        for resource in response.resources:
            key = _pattern(resource, resource.pattern_type)
            for acl in resource.acls:
                entries = found.setdefault(key, [])
                entry = _entry(acl)
                if entry not in entries:
                    entries.append(entry)
    for pattern in sorted(found, key=pattern_text):
        out.write(f"Current ACLs for resource `{pattern_text(pattern)}`: \n"
                  + "".join(f" \t{entry_text(e)} \n" for e in found[pattern]) + "\n")
    return 0


def _pattern(raw: Any, pattern_type: int) -> ResourcePattern:
    return ResourcePattern(ResourceType(raw.resource_type), raw.resource_name, PatternType(pattern_type))


def _entry(raw: Any) -> AccessControlEntry:
    return AccessControlEntry(raw.principal, raw.host, AclOperation(raw.operation),
                              AclPermissionType(raw.permission_type))
