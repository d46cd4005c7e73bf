"""The authorizer's rules (Kafka's AclAuthorizer), filters, and the text forms of the stores."""

import pytest

from minikafka.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AuthorizerSettings,
    PatternType,
    ResourcePattern,
    ResourceType,
    authorize,
    authorize_any,
    binding_error,
    parse_super_users,
    select,
)
from minikafka.security.principal import user
from minikafka.security.stores import decode_acl_change, decode_entry, encode_entry, parse_pattern
from minikafka.zk.sanitizer import sanitize

ALICE, BOB = user("alice"), user("bob")
OP, PERM, RT, PT = AclOperation, AclPermissionType, ResourceType, PatternType
SETTINGS = AuthorizerSettings(frozenset({"User:admin"}), allow_if_no_acl=False)


def binding(resource_type, name, pattern, principal, operation, permission=PERM.ALLOW, host="*"):
    return AclBinding(ResourcePattern(resource_type, name, pattern),
                      AccessControlEntry(principal, host, operation, permission))


def with_added(acls, bindings):
    """The table with ``bindings`` added."""
    changed = dict(acls)
    for b in bindings:
        changed[b.pattern] = changed.get(b.pattern, frozenset()) | {b.entry}
    return changed


def table(*bindings):
    return with_added({}, bindings)


def test_nothing_without_an_acl_but_for_super_users_or_allow_everyone():
    assert not authorize({}, SETTINGS, ALICE, "1.2.3.4", OP.READ, RT.TOPIC, "t")
    assert authorize({}, SETTINGS, user("admin"), "1.2.3.4", OP.READ, RT.TOPIC, "t")
    assert authorize({}, AuthorizerSettings(frozenset(), True), ALICE, "1.2.3.4", OP.READ, RT.TOPIC, "t")
    # allow.everyone.if.no.acl.found only holds while no ACL names the resource at all.
    acls = table(binding(RT.TOPIC, "t", PT.LITERAL, "User:bob", OP.READ))
    assert not authorize(acls, AuthorizerSettings(frozenset(), True), ALICE, "1.2.3.4", OP.READ, RT.TOPIC, "t")


def test_literal_wildcard_and_prefixed_patterns():
    acls = table(binding(RT.TOPIC, "orders", PT.LITERAL, "User:alice", OP.WRITE),
                 binding(RT.TOPIC, "logs-", PT.PREFIXED, "User:alice", OP.READ),
                 binding(RT.GROUP, "*", PT.LITERAL, "User:*", OP.READ))
    assert authorize(acls, SETTINGS, ALICE, "h", OP.WRITE, RT.TOPIC, "orders")
    assert not authorize(acls, SETTINGS, ALICE, "h", OP.WRITE, RT.TOPIC, "orders2")
    assert authorize(acls, SETTINGS, ALICE, "h", OP.READ, RT.TOPIC, "logs-app")
    assert not authorize(acls, SETTINGS, ALICE, "h", OP.READ, RT.TOPIC, "log")
    assert authorize(acls, SETTINGS, BOB, "h", OP.READ, RT.GROUP, "any-group")
    assert not authorize(acls, SETTINGS, BOB, "h", OP.READ, RT.TOPIC, "logs-app")


def test_a_deny_beats_an_allow_and_hosts_matter():
    acls = table(binding(RT.TOPIC, "t", PT.LITERAL, "User:*", OP.ALL),
                 binding(RT.TOPIC, "t", PT.PREFIXED, "User:alice", OP.WRITE, PERM.DENY),
                 binding(RT.TOPIC, "u", PT.LITERAL, "User:alice", OP.READ, host="10.0.0.1"))
    assert authorize(acls, SETTINGS, ALICE, "h", OP.READ, RT.TOPIC, "t")
    assert not authorize(acls, SETTINGS, ALICE, "h", OP.WRITE, RT.TOPIC, "t")
    assert authorize(acls, SETTINGS, BOB, "h", OP.WRITE, RT.TOPIC, "t")
    assert authorize(acls, SETTINGS, ALICE, "10.0.0.1", OP.READ, RT.TOPIC, "u")
    assert not authorize(acls, SETTINGS, ALICE, "10.0.0.2", OP.READ, RT.TOPIC, "u")


def test_implied_operations():
    acls = table(binding(RT.TOPIC, "t", PT.LITERAL, "User:alice", OP.WRITE),
                 binding(RT.TOPIC, "t", PT.LITERAL, "User:bob", OP.ALTER_CONFIGS))
    assert authorize(acls, SETTINGS, ALICE, "h", OP.DESCRIBE, RT.TOPIC, "t")
    assert not authorize(acls, SETTINGS, ALICE, "h", OP.DESCRIBE_CONFIGS, RT.TOPIC, "t")
    assert authorize(acls, SETTINGS, BOB, "h", OP.DESCRIBE_CONFIGS, RT.TOPIC, "t")
    assert not authorize(acls, SETTINGS, BOB, "h", OP.DESCRIBE, RT.TOPIC, "t")


def test_authorize_any_resource_of_a_type():
    allowed = table(binding(RT.TOPIC, "orders-", PT.PREFIXED, "User:alice", OP.WRITE))
    assert authorize_any(allowed, SETTINGS, ALICE, "h", OP.WRITE, RT.TOPIC)
    assert not authorize_any(allowed, SETTINGS, BOB, "h", OP.WRITE, RT.TOPIC)
    denied_wider = with_added(allowed, [binding(RT.TOPIC, "ord", PT.PREFIXED, "User:alice", OP.WRITE, PERM.DENY)])
    assert not authorize_any(denied_wider, SETTINGS, ALICE, "h", OP.WRITE, RT.TOPIC)
    denied_all = with_added(allowed, [binding(RT.TOPIC, "*", PT.LITERAL, "User:*", OP.ALL, PERM.DENY)])
    assert not authorize_any(denied_all, SETTINGS, ALICE, "h", OP.WRITE, RT.TOPIC)
    assert authorize_any({}, SETTINGS, user("admin"), "h", OP.WRITE, RT.TOPIC)


def test_filters_match_as_kafkas():
    acls = table(binding(RT.TOPIC, "orders", PT.LITERAL, "User:alice", OP.READ),
                 binding(RT.TOPIC, "*", PT.LITERAL, "User:bob", OP.READ),
                 binding(RT.TOPIC, "ord", PT.PREFIXED, "User:bob", OP.WRITE, PERM.DENY),
                 binding(RT.GROUP, "g", PT.LITERAL, "User:alice", OP.READ))
    every = AclBindingFilter(RT.ANY, None, PT.ANY, None, None, OP.ANY, PERM.ANY)
    assert len(select(acls, every)) == 4
    match = AclBindingFilter(RT.TOPIC, "orders", PT.MATCH, None, None, OP.ANY, PERM.ANY)
    assert len(select(acls, match)) == 3
    literal = AclBindingFilter(RT.TOPIC, "orders", PT.LITERAL, None, None, OP.ANY, PERM.ANY)
    assert [b.entry.principal for b in select(acls, literal)] == ["User:alice"]
    denies = AclBindingFilter(RT.ANY, None, PT.ANY, "User:bob", None, OP.ANY, PERM.DENY)
    assert [b.pattern.name for b in select(acls, denies)] == ["ord"]
    assert AclBindingFilter(RT.UNKNOWN, None, PT.ANY, None, None, OP.ANY, PERM.ANY).error() is not None


@pytest.mark.parametrize("bad", [
    binding(RT.ANY, "t", PT.LITERAL, "User:a", OP.READ),
    binding(RT.TOPIC, "t", PT.MATCH, "User:a", OP.READ),
    binding(RT.TOPIC, "t", PT.LITERAL, "User:a", OP.ANY),
    binding(RT.TOPIC, "t", PT.LITERAL, "User:a", OP.READ, PERM.ANY),
    binding(RT.TOPIC, "t", PT.LITERAL, "alice", OP.READ),
    binding(RT.CLUSTER, "my-cluster", PT.LITERAL, "User:a", OP.ALTER),
    binding(RT.TOPIC, "", PT.LITERAL, "User:a", OP.READ),
])
def test_bindings_create_acls_refuses(bad):
    assert binding_error(bad) is not None


def test_kafkas_text_forms():
    entry = AccessControlEntry("User:alice", "*", OP.DESCRIBE_CONFIGS, PERM.DENY)
    assert encode_entry(entry) == {"principal": "User:alice", "permissionType": "Deny",
                                   "operation": "DescribeConfigs", "host": "*"}
    assert decode_entry(encode_entry(entry)) == entry
    pattern = ResourcePattern(RT.TRANSACTIONAL_ID, "tx:1", PT.PREFIXED)
    assert str(pattern) == "TransactionalId:PREFIXED:tx:1" and parse_pattern(str(pattern)) == pattern
    assert decode_acl_change("/kafka-acl-changes", b"Topic:a:b") == ResourcePattern(RT.TOPIC, "a:b", PT.LITERAL)
    assert decode_acl_change("/kafka-acl-extended-changes", b'{"version":1,"resourceType":"Group","name":"g",'
                             b'"patternType":"PREFIXED"}') == ResourcePattern(RT.GROUP, "g", PT.PREFIXED)
    assert sanitize("a b*c~d/e") == "a%20b%2Ac%7Ed%2Fe"
    assert parse_super_users("User:admin; User:CN=broker,O=acme") == {"User:admin", "User:CN=broker,O=acme"}
    with pytest.raises(ValueError):
        parse_super_users("admin")
