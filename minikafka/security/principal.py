"""Principals: who a connection is, as Kafka names it (``User:alice``), and how a TLS client
certificate's subject becomes one (``ssl.principal.mapping.rules``). Pure functions."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

USER_TYPE = "User"


@dataclass(frozen=True)
class KafkaPrincipal:
    """A principal type and name; ``str()`` is Kafka's ``User:name``."""

    type: str
    name: str

    def __str__(self) -> str:
        return f"{self.type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``Type:name`` (the name may hold colons); ValueError otherwise."""
        kind, sep, name = text.partition(":")
        if not sep or not kind or not name:
            raise ValueError(f"{text!r} is not a principal of the form Type:name (User:alice)")
        return cls(kind, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


def user(name: str) -> KafkaPrincipal:
    return KafkaPrincipal(USER_TYPE, name)


# Java's X500Principal keywords in RFC 2253 output; other attributes come out as OID=#hex.
_KEYWORDS = {"commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
             "organizationName": "O", "organizationalUnitName": "OU", "streetAddress": "STREET",
             "domainComponent": "DC", "userId": "UID"}
_OIDS = {"emailAddress": "1.2.840.113549.1.9.1", "serialNumber": "2.5.4.5", "title": "2.5.4.12",
         "givenName": "2.5.4.42", "surname": "2.5.4.4", "initials": "2.5.4.43", "pseudonym": "2.5.4.65",
         "generationQualifier": "2.5.4.44", "dnQualifier": "2.5.4.46", "name": "2.5.4.41"}
# DER string tags of those attributes: an email address is an IA5String, serialNumber and
# dnQualifier PrintableStrings, the rest UTF8Strings as OpenSSL writes them.
_DER_TAGS = {"emailAddress": 0x16, "serialNumber": 0x13, "dnQualifier": 0x13}


def distinguished_name(certificate: dict[str, Any]) -> str:
    """The certificate's subject as Java's ``X500Principal.getName()`` writes it (RFC 2253:
    most specific RDN first, ``CN=client,OU=eng,O=acme,C=NL``), the string Kafka's rules see."""
    rdns = []
    for rdn in reversed(certificate.get("subject", ())):
        rdns.append("+".join(_attribute(name, value) for name, value in rdn))
    return ",".join(rdns)


def _attribute(name: str, value: str) -> str:
    keyword = _KEYWORDS.get(name)
    if keyword is not None:
        return f"{keyword}={_escape(value)}"
    encoded = value.encode()
    der = bytes([_DER_TAGS.get(name, 0x0C)]) + _der_length(len(encoded)) + encoded
    return f"{_OIDS.get(name, name)}=#{der.hex()}"


def _der_length(length: int) -> bytes:
    if length < 0x80:
        return bytes([length])
    size = (length.bit_length() + 7) // 8
    return bytes([0x80 | size]) + length.to_bytes(size, "big")


def _escape(value: str) -> str:
    escaped = re.sub(r'([,+"\\<>;])', r"\\\1", value)
    if escaped.startswith(("#", " ")):
        escaped = "\\" + escaped
    if escaped.endswith(" ") and not escaped.endswith("\\ "):
        escaped = escaped[:-1] + "\\ "
    return escaped


@dataclass(frozen=True)
class MappingRule:
    """One rule of ``ssl.principal.mapping.rules``: DEFAULT (the DN as it is), or
    ``RULE:pattern/replacement/`` with an optional L or U to change the case."""

    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        result = self.pattern.sub(self.replacement, dn)
        return result.lower() if self.case == "L" else result.upper() if self.case == "U" else result


# Kafka's SslPrincipalMapper grammar.
_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?)[^,]*?)\s*(?:,\s*|$)")


def parse_mapping_rules(text: str) -> tuple[MappingRule, ...]:
    """The rules of ``ssl.principal.mapping.rules``; ValueError names the part that is wrong."""
    rules: list[MappingRule] = []
    position, text = 0, text.strip()
    while position < len(text):
        match = _RULE.match(text, position)
        if match is None or match.end() == position:
            raise ValueError(f"cannot read a rule at {text[position:]!r} (expected DEFAULT or "
                             "RULE:pattern/replacement/[LU])")
        position = match.end()
        if match.group(1):
            rules.append(MappingRule(None))
            continue
        try:
            pattern = re.compile(match.group(2))
        except re.error as exc:
            raise ValueError(f"rule pattern {match.group(2)!r} is not a regular expression: {exc}") from None
        # Java's $1 back-references, Python's \g<1>.
        replacement = re.sub(r"(?<!\\)\$(\d+)", r"\\g<\1>", match.group(3))
        rules.append(MappingRule(pattern, replacement, match.group(4)))
    return tuple(rules) or (MappingRule(None),)


class NoMappingRule(ValueError):
    """No rule of ssl.principal.mapping.rules applies to a certificate's subject."""


def principal_of_certificate(certificate: dict[str, Any] | None, rules: tuple[MappingRule, ...]) -> KafkaPrincipal:
    """The principal of a TLS client: its certificate's mapped subject, ANONYMOUS without one."""
    if not certificate:
        return ANONYMOUS
    dn = distinguished_name(certificate)
    for rule in rules:
        name = rule.apply(dn)
        if name is not None:
            return user(name)
    raise NoMappingRule(f"no rule of ssl.principal.mapping.rules applies to {dn!r}")
