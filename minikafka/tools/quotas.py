"""minikafka configs for client quotas: kafka-configs.sh's --alter and --describe of users',
client ids' and their defaults' producer_byte_rate, consumer_byte_rate and request_percentage.

    minikafka configs --bootstrap-server HOST:PORT --entity-type clients --entity-name app \\
        --alter --add-config producer_byte_rate=1048576
    minikafka configs --bootstrap-server HOST:PORT --user alice --client app --alter \\
        --add-config request_percentage=200
    minikafka configs --bootstrap-server HOST:PORT --entity-type users --entity-default \\
        --alter --delete-config consumer_byte_rate
    minikafka configs --bootstrap-server HOST:PORT --entity-type users|clients [--entity-name N] --describe

configs.py parses the options and hands the entity here; AlterClientQuotas and
DescribeClientQuotas (KIP-546) do the work, so the broker checks the values as Kafka does."""

from __future__ import annotations

from typing import TextIO

from minikafka.quota.entity import CLIENT_ID, QUOTA_KEYS, USER
from minikafka.tools.admin import check
from minikafka.tools.client import Cluster, ToolError
from protocol import ApiKey, ErrorCode

# (entity type, name or None for the default), as AlterClientQuotas names an entity
EntityParts = list[tuple[str, str | None]]
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2


def is_quota_key(key: str) -> bool:
    return key in QUOTA_KEYS


def words(parts: EntityParts) -> str:
    """Kafka's words for an entity: "user-principal 'alice', the default client-id"."""
    named = {USER: "user-principal", CLIENT_ID: "client-id"}
    return ", ".join(f"{named[kind]} '{name}'" if name is not None else f"the default {named[kind]}"
                     for kind, name in parts)


def alter(cluster: Cluster, parts: EntityParts, adds: dict[str, str], deletes: list[str], out: TextIO) -> int:
    ops = []
    for key, text in adds.items():
        if not is_quota_key(key):
            raise ToolError(f"--add-config: {key} is not a client quota ({', '.join(QUOTA_KEYS)})")
        try:
            ops.append({"key": key, "value": float(text), "remove": False})
        except ValueError:
            raise ToolError(f"--add-config: {key}={text} is not a number") from None
    for key in deletes:
        if not is_quota_key(key):
            raise ToolError(f"--delete-config: {key} is not a client quota ({', '.join(QUOTA_KEYS)})")
        ops.append({"key": key, "value": 0.0, "remove": True})
    entity = [{"entity_type": kind, "entity_name": name} for kind, name in parts]
    response = cluster.ask_any(ApiKey.ALTER_CLIENT_QUOTAS, {"entries": [{"entity": entity, "ops": ops}],
                                                             "validate_only": False})
    (entry,) = response.entries
    check(f"the quotas of {words(parts)} were not changed", entry.error_code, entry.error_message)
    out.write(f"Completed updating config for {words(parts)}.\n")
    return 0


def describe(cluster: Cluster, parts: EntityParts, out: TextIO) -> int:
    """The quotas of the entity, or of every entity of its types (a part whose name is "")."""
    components = [{"entity_type": kind, "match_type": MATCH_ANY if name == "" else
                   MATCH_DEFAULT if name is None else MATCH_EXACT, "match": name or None} for kind, name in parts]
    response = cluster.ask_any(ApiKey.DESCRIBE_CLIENT_QUOTAS, {"components": components, "strict": True})
    if response.error_code != ErrorCode.NONE:
        check(f"the quotas of {words([p for p in parts if p[1] != ''])} were not described", response.error_code,
              response.error_message)
    order = {USER: 0, CLIENT_ID: 1}
    for entry in response.entries or []:
        found = sorted(((e.entity_type, e.entity_name) for e in entry.entity), key=lambda part: order[part[0]])
        # `entry.values` is the mapping's method: the field is read by key.
        values = ", ".join(f"{v.key}={v.value!r}" for v in sorted(entry["values"], key=lambda v: v.key))
        out.write(f"Quota configs for {words(found)} are {values}\n")
    return 0
