"""ACLs and the authorizer's rules, as Kafka's AclAuthorizer has them. Pure code, no I/O.

An ACL binding is a resource pattern (a resource type, a name, LITERAL or PREFIXED; the literal
name ``*`` means every resource of the type) and an entry (a principal or ``User:*``, a host or
``*``, an operation, ALLOW or DENY). An action is allowed when the principal is a super user, or
when no ACL names the resource and ``allow.everyone.if.no.acl.found`` is on, or when some ALLOW
matches and no DENY does: a deny always beats an allow. DESCRIBE is implied by READ, WRITE,
DELETE and ALTER, DESCRIBE_CONFIGS by ALTER_CONFIGS.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from minikafka.security.principal import KafkaPrincipal


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


class AclOperation(enum.IntEnum):
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


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"
# The operations that imply another one (Kafka's AclAuthorizer).
IMPLIED_BY = {AclOperation.DESCRIBE: (AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                                      AclOperation.DELETE, AclOperation.ALTER),
              AclOperation.DESCRIBE_CONFIGS: (AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS)}


def pascal(name: str) -> str:
    """TRANSACTIONAL_ID -> TransactionalId: how Kafka spells enum values in ZooKeeper and logs."""
    return "".join(part.capitalize() for part in name.split("_"))


def from_pascal(enum_type: type[enum.IntEnum], text: str) -> enum.IntEnum:
    for member in enum_type:
        if pascal(member.name).lower() == text.replace("_", "").lower():
            return member
    raise ValueError(f"{text!r} is not a {enum_type.__name__}")


@dataclass(frozen=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __str__(self) -> str:
        return f"{pascal(self.resource_type.name)}:{self.pattern_type.name}:{self.name}"


@dataclass(frozen=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    def __str__(self) -> str:
        return (f"{self.principal} has {pascal(self.permission.name)} permission for operations: "
                f"{pascal(self.operation.name)} from hosts: {self.host}")


@dataclass(frozen=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    def __str__(self) -> str:
        return f"(pattern={self.pattern}, entry={self.entry})"


def binding_error(binding: AclBinding) -> str | None:
    """Why CreateAcls must refuse a binding (Kafka's words), None if it is acceptable."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY) \
            or pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED) \
            or entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY) \
            or entry.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return f"Invalid ACL creation: {binding} contains an UNKNOWN or ANY element"
    if not pattern.name:
        return "Invalid ACL creation: the resource name must not be empty"
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    try:
        KafkaPrincipal.parse(entry.principal)
    except ValueError as exc:
        return f"Invalid ACL creation: {exc}"
    if not entry.host:
        return "Invalid ACL creation: the host must not be empty (* for every host)"
    return None


@dataclass(frozen=True)
class AclBindingFilter:
    """DescribeAcls' and DeleteAcls' filter: None names and ANY values match everything; a MATCH
    pattern type matches the patterns that would apply to the named resource."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission: AclPermissionType

    def error(self) -> str | None:
        if ResourceType.UNKNOWN == self.resource_type or self.pattern_type == PatternType.UNKNOWN \
                or self.operation == AclOperation.UNKNOWN or self.permission == AclPermissionType.UNKNOWN:
            return "The filter contains UNKNOWN elements"
        return None

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, pattern.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        if pattern.pattern_type == PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD
        return self.name.startswith(pattern.name)

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        return ((self.principal is None or self.principal == entry.principal)
                and (self.host is None or self.host == entry.host)
                and self.operation in (AclOperation.ANY, entry.operation)
                and self.permission in (AclPermissionType.ANY, entry.permission))

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)


AclTable = Mapping[ResourcePattern, frozenset[AccessControlEntry]]


@dataclass(frozen=True)
class AuthorizerSettings:
    super_users: frozenset[str]
    allow_if_no_acl: bool


def parse_super_users(text: str) -> frozenset[str]:
    """``super.users``: principals separated by semicolons; ValueError names a bad one."""
    users = [item.strip() for item in text.split(";") if item.strip()]
    for item in users:
        KafkaPrincipal.parse(item)
    return frozenset(users)


def matching_entries(acls: AclTable, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
    """The entries of every pattern that applies to a resource: its literal name, the literal
    wildcard of its type, and each prefix pattern the name starts with."""
    found: list[AccessControlEntry] = []
    for pattern in (ResourcePattern(resource_type, name, PatternType.LITERAL),
                    ResourcePattern(resource_type, WILDCARD, PatternType.LITERAL)):
        found.extend(acls.get(pattern, ()))
    for length in range(1, len(name) + 1):
        found.extend(acls.get(ResourcePattern(resource_type, name[:length], PatternType.PREFIXED), ()))
    return found


def _entry_applies(entry: AccessControlEntry, principal: str, host: str) -> bool:
    return entry.principal in (principal, WILDCARD_PRINCIPAL) and entry.host in (host, WILDCARD)


def authorize(acls: AclTable, settings: AuthorizerSettings, principal: KafkaPrincipal, host: str,
              operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
    """Kafka's AclAuthorizer decision for one action on one (literal) resource."""
    who = str(principal)
    if who in settings.super_users:
        return True
    entries = matching_entries(acls, resource_type, name)
    if not entries:
        return settings.allow_if_no_acl
    applying = [e for e in entries if _entry_applies(e, who, host)]
    if any(e.permission == AclPermissionType.DENY and e.operation in (operation, AclOperation.ALL) for e in applying):
        return False
    allowing = IMPLIED_BY.get(operation, (operation,))
    return any(e.permission == AclPermissionType.ALLOW and (e.operation in allowing or e.operation == AclOperation.ALL)
               for e in applying)


def authorize_any(acls: AclTable, settings: AuthorizerSettings, principal: KafkaPrincipal, host: str,
                  operation: AclOperation, resource_type: ResourceType) -> bool:
    """Kafka's authorizeByResourceType (KIP-679): may the principal do ``operation`` on some
    resource of the type, that is, is there an ALLOW not overruled by a DENY of a wider pattern."""
    if authorize(acls, settings, principal, host, operation, resource_type, "hardcode"):
        return True
    who = str(principal)
    denied_literal: set[str] = set()
    denied_prefixes: set[str] = set()
    allowed: list[ResourcePattern] = []
    for pattern, entries in acls.items():
        if pattern.resource_type != resource_type:
            continue
        for entry in entries:
            if not _entry_applies(entry, who, host) or entry.operation not in (operation, AclOperation.ALL):
                continue
            if entry.permission == AclPermissionType.DENY:
                if pattern.pattern_type == PatternType.LITERAL and pattern.name == WILDCARD:
                    return False
                (denied_literal if pattern.pattern_type == PatternType.LITERAL else denied_prefixes).add(pattern.name)
            elif entry.permission == AclPermissionType.ALLOW:
                if pattern.pattern_type == PatternType.LITERAL and pattern.name == WILDCARD:
                    return True
                allowed.append(pattern)
    for pattern in allowed:
        if pattern.pattern_type == PatternType.LITERAL and pattern.name in denied_literal:
            continue
        if not any(pattern.name[:length] in denied_prefixes for length in range(1, len(pattern.name) + 1)):
            return True
    return False


def select(acls: AclTable, wanted: AclBindingFilter) -> list[AclBinding]:
    """The bindings a filter matches, in a stable order."""
    return [AclBinding(pattern, entry) for pattern, entries in sorted(acls.items(), key=lambda i: str(i[0]))
            for entry in sorted(entries, key=str) if wanted.matches(AclBinding(pattern, entry))]
