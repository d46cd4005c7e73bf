"""A client certificate's subject as Kafka writes it, ssl.principal.mapping.rules, and JAAS values."""

import pytest

from minikafka.security.jaas import parse_jaas_config
from minikafka.security.principal import (
    ANONYMOUS,
    KafkaPrincipal,
    NoMappingRule,
    distinguished_name,
    parse_mapping_rules,
    principal_of_certificate,
)

CERT = {"subject": ((("countryName", "NL"),), (("organizationName", "Acme, Inc."),),
                    (("organizationalUnitName", "eng"),), (("commonName", "client-1"),))}


def test_subject_is_rfc_2253_most_specific_first_with_escapes():
    assert distinguished_name(CERT) == r"CN=client-1,OU=eng,O=Acme\, Inc.,C=NL"
    multi = {"subject": ((("commonName", "a"), ("userId", "7")), (("emailAddress", "a@b.c"),))}
    # Java writes an attribute it has no keyword for as its OID and DER value: an IA5String "a@b.c".
    assert distinguished_name(multi) == "1.2.840.113549.1.9.1=#16056140622e63,CN=a+UID=7"


@pytest.mark.parametrize("rules,expected", [
    ("DEFAULT", r"CN=client-1,OU=eng,O=Acme\, Inc.,C=NL"),
    ("RULE:^CN=(.*?),OU=(.*?),.*$/$1@$2/", "client-1@eng"),
    ("RULE:^CN=(.*?),OU=(.*?),.*$/$1/U, DEFAULT", "CLIENT-1"),
    ("RULE:^CN=nobody,.*$/x/, RULE:^CN=([^,]*),.*$/$1/L", "client-1"),
])
def test_mapping_rules(rules, expected):
    assert principal_of_certificate(CERT, parse_mapping_rules(rules)) == KafkaPrincipal("User", expected)


def test_no_rule_applies_and_no_certificate():
    with pytest.raises(NoMappingRule, match="CN=client-1"):
        principal_of_certificate(CERT, parse_mapping_rules("RULE:^CN=other$/x/"))
    assert principal_of_certificate(None, parse_mapping_rules("DEFAULT")) == ANONYMOUS


@pytest.mark.parametrize("bad", ["RULE:^CN=(.*$/x/", "RULE:nothing", "DEFAULTS"])
def test_bad_rules_are_refused(bad):
    with pytest.raises(ValueError):
        parse_mapping_rules(bad)


def test_jaas_plain_users_and_credentials():
    module = parse_jaas_config('org.apache.kafka.common.security.plain.PlainLoginModule required '
                               'username="admin" password="a\\"b;c" user_admin="x" user_bob=y;')
    assert module.plain_users == {"admin": "x", "bob": "y"}
    assert module.credentials == ("admin", 'a"b;c')


@pytest.mark.parametrize("bad", ['x required a="b"', 'x required a=;', 'x required; y required;', 'x',
                                 'x always;', 'x required a "b";'])
def test_bad_jaas_values_are_refused(bad):
    with pytest.raises(ValueError):
        parse_jaas_config(bad)
