"""Quota entities and keys as Kafka names them, and Kafka's checks of an AlterClientQuotas entry.

An entity is a user, a client id, or both (KIP-55); either may be Kafka's default entity,
"<default>" in ZooKeeper paths and null on the wire. In ZooKeeper (and in the embedded broker's
metadata store) each lives under its entity path: ``users/<user>``, ``clients/<client-id>``,
``users/<user>/clients/<client-id>``, names sanitized as Kafka's Sanitizer does."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from minikafka.zk.sanitizer import desanitize, sanitize

DEFAULT = "<default>"  # Kafka's ConfigEntityName.Default
USER, CLIENT_ID, IP = "user", "client-id", "ip"
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
# Kafka's QuotaConfigs for users and client ids, and whether each is a whole number (LONG).
QUOTA_KEYS: dict[str, bool] = {PRODUCER_BYTE_RATE: True, CONSUMER_BYTE_RATE: True, REQUEST_PERCENTAGE: False,
                               CONTROLLER_MUTATION_RATE: False}


class QuotaError(ValueError):
    """An entity or a quota Kafka would refuse (INVALID_REQUEST), with the reason."""


@dataclass(frozen=True)
class QuotaEntity:
    """``user`` and ``client_id``: a name, DEFAULT, or None when the entity has no such part."""

    user: str | None = None
    client_id: str | None = None

    @property
    def path(self) -> str:
        """Kafka's entity path under /config."""
        if self.user is not None and self.client_id is not None:
            return f"users/{_sanitized(self.user)}/clients/{_sanitized(self.client_id)}"
        if self.user is not None:
            return f"users/{_sanitized(self.user)}"
        return f"clients/{_sanitized(self.client_id or DEFAULT)}"

    @classmethod
    def from_path(cls, path: str) -> QuotaEntity:
        parts = path.split("/")
        if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients":
            return cls(_desanitized(parts[1]), _desanitized(parts[3]))
        if len(parts) == 2 and parts[0] in ("users", "clients"):
            name = _desanitized(parts[1])
            return cls(user=name) if parts[0] == "users" else cls(client_id=name)
        raise QuotaError(f"not a quota entity path: {path}")

    def wire(self) -> list[tuple[str, str | None]]:
        """(entity type, name or None for the default) as DescribeClientQuotas answers them."""
        parts = [(USER, self.user), (CLIENT_ID, self.client_id)]
        return [(kind, None if name == DEFAULT else name) for kind, name in parts if name is not None]

    def __str__(self) -> str:
        return ", ".join(f"{kind}={name if name is not None else DEFAULT}" for kind, name in self.wire())


def _sanitized(name: str) -> str:
    return DEFAULT if name == DEFAULT else sanitize(name)


def _desanitized(name: str) -> str:
    return DEFAULT if name == DEFAULT else desanitize(name)


def entity_from_wire(parts: Iterable[tuple[str, str | None]]) -> QuotaEntity:
    """An AlterClientQuotas entity ((entity type, name or None for the default)...), checked as
    Kafka checks it."""
    found: dict[str, str] = {}
    for kind, name in parts:
        if kind in found:
            raise QuotaError(f"Duplicate {kind} entity type in the client quota entity")
        if kind == IP:
            raise QuotaError("IP quotas (connection_creation_rate) are not supported by minikafka")
        if kind not in (USER, CLIENT_ID):
            raise QuotaError(f"Unhandled client quota entity type: {kind}")
        if name is not None and not name and kind == USER:
            raise QuotaError("The user of a client quota entity cannot be empty")
        found[kind] = DEFAULT if name is None else name
    if not found:
        raise QuotaError("Invalid empty client quota entity")
    return QuotaEntity(found.get(USER), found.get(CLIENT_ID))


def checked_value(key: str, value: float) -> str:
    """The text stored for a quota value, as Kafka writes it (a LONG key as a whole number)."""
    whole = QUOTA_KEYS.get(key)
    if whole is None:
        raise QuotaError(f"Invalid configuration key {key}")
    if not value > 0:
        raise QuotaError(f"Quota {key} must be greater than 0, not {value}")
    if whole:
        if abs(round(value) - value) > 1e-6:
            raise QuotaError(f"Configuration {key} must be a Long value")
        return str(round(value))
    return repr(float(value))


def quota_values(configs: Mapping[str, str]) -> dict[str, float]:
    """The quotas among an entity's configs (a user's znode also holds its SCRAM credentials)."""
    found = {}
    for key, text in configs.items():
        if key in QUOTA_KEYS:
            try:
                found[key] = float(text)
            except ValueError:
                continue
    return found
