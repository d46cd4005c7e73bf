"""Where users' SCRAM credentials and ACLs live, in Kafka's own forms.

``SecurityStore`` is the interface; ``EmbeddedSecurityStore`` keeps them in the embedded broker's
metadata store, ``ZkSecurityStore`` in ZooKeeper with Kafka's layout:

- ``/config/users/<user>``: ``{"version":1,"config":{"SCRAM-SHA-256":"salt=...,stored_key=...,
  server_key=...,iterations=4096"}}``, the user name URL-encoded (Kafka's Sanitizer); a change is
  announced as ``/config/changes/config_change_<seq>`` with ``"entity_path":"users/<user>"``.
- ``/kafka-acl/<ResourceType>/<name>`` (LITERAL) and ``/kafka-acl-extended/prefixed/<ResourceType>/
  <name>`` (PREFIXED): ``{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
  "operation":"Read","host":"*"}]}``; a change is announced under ``/kafka-acl-changes``
  (``Topic:name``) or ``/kafka-acl-extended-changes`` (JSON), ``acl_changes_<seq>``.

Updates are read-modify-write of one user or one resource pattern; in ZooKeeper the write is
conditional on the version read, and retried when another broker changed the znode meanwhile.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any

from kazoo.exceptions import NodeExistsError

from minikafka.metadata.store import MetadataStore
from minikafka.security.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    from_pascal,
    pascal,
)
from minikafka.security.scram import HASHES, ScramCredential, ScramError
from minikafka.zk.kafka_zk import KafkaZk, StaleState
from minikafka.zk.sanitizer import desanitize, sanitize

log = logging.getLogger(__name__)

# user -> {mechanism: credential}
Credentials = dict[str, dict[str, ScramCredential]]
AclEntries = frozenset[AccessControlEntry]
CredentialChange = Callable[[dict[str, ScramCredential]], dict[str, ScramCredential]]
AclChange = Callable[[AclEntries], AclEntries]

ACL_ROOT = "/kafka-acl"
PREFIXED_ACL_ROOT = "/kafka-acl-extended/prefixed"
ACL_CHANGES = "/kafka-acl-changes"
PREFIXED_ACL_CHANGES = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"
USERS = "users"
# Kafka's brokers delete change notifications older than this.
NOTIFICATION_EXPIRY_MS = 15 * 60 * 1000


# ---- Kafka's text forms --------------------------------------------------------------------

def encode_entry(entry: AccessControlEntry) -> dict[str, str]:
    return {"principal": entry.principal, "permissionType": pascal(entry.permission.name),
            "operation": pascal(entry.operation.name), "host": entry.host}


def decode_entry(doc: dict[str, Any]) -> AccessControlEntry:
    return AccessControlEntry(str(doc["principal"]), str(doc["host"]),
                              AclOperation(from_pascal(AclOperation, str(doc["operation"]))),
                              AclPermissionType(from_pascal(AclPermissionType, str(doc["permissionType"]))))


def parse_pattern(text: str) -> ResourcePattern:
    """``Topic:LITERAL:orders`` (ResourcePattern's str) back to a pattern."""
    kind, pattern_type, name = text.split(":", 2)
    return ResourcePattern(ResourceType(from_pascal(ResourceType, kind)), name,
                           PatternType[pattern_type])


def decode_credentials(user: str, configs: dict[str, str]) -> dict[str, ScramCredential]:
    found = {}
    for mechanism, text in configs.items():
        if mechanism not in HASHES:
            continue
        try:
            found[mechanism] = ScramCredential.decode(text)
        except ScramError as exc:
            log.error("ignoring the %s credential of user %s: %s", mechanism, user, exc)
    return found


def encode_credentials(credentials: dict[str, ScramCredential]) -> dict[str, str]:
    return {mechanism: credential.encode() for mechanism, credential in sorted(credentials.items())}


def merge_credentials(configs: Mapping[str, str], credentials: dict[str, ScramCredential]) -> dict[str, str]:
    """A user's configs with its SCRAM credentials replaced: the other keys of the znode
    (Kafka's client quotas, such as producer_byte_rate) are another tool's and stay."""
    kept = {key: value for key, value in configs.items() if key not in HASHES}
    return kept | encode_credentials(credentials)


# ---- the stores ------------------------------------------------------------------------------

class SecurityStore(ABC):
    """The credentials and ACLs of the cluster. Event-loop thread only."""

    @abstractmethod
    async def credentials(self) -> Credentials: ...

    @abstractmethod
    async def update_credentials(self, user: str, change: CredentialChange) -> dict[str, ScramCredential]:
        """Apply ``change`` to the user's current credentials and store the result (empty: the user
        goes); the result."""

    @abstractmethod
    async def acls(self) -> dict[ResourcePattern, AclEntries]: ...

    @abstractmethod
    async def update_acls(self, pattern: ResourcePattern, change: AclChange) -> AclEntries:
        """Apply ``change`` to the pattern's current entries and store the result; the result."""


class EmbeddedSecurityStore(SecurityStore):
    """In the embedded broker's metadata store (its JSON copy in every log dir)."""

    def __init__(self, store: MetadataStore) -> None:
        self._store = store

    async def credentials(self) -> Credentials:
        return {user: decode_credentials(user, configs) for user, configs in self._store.user_configs().items()}

    async def update_credentials(self, user: str, change: CredentialChange) -> dict[str, ScramCredential]:
        current = decode_credentials(user, self._store.user_configs().get(user, {}))
        updated = change(current)
        self._store.put_user_configs(user, encode_credentials(updated))
        return updated

    async def acls(self) -> dict[ResourcePattern, AclEntries]:
        return {parse_pattern(key): frozenset(decode_entry(e) for e in entries)
                for key, entries in self._store.acl_entries().items()}

    async def update_acls(self, pattern: ResourcePattern, change: AclChange) -> AclEntries:
        current = frozenset(decode_entry(e) for e in self._store.acl_entries().get(str(pattern), []))
        updated = change(current)
        self._store.put_acl_entries(str(pattern), [encode_entry(e) for e in sorted(updated, key=str)])
        return updated


def acl_path(pattern: ResourcePattern) -> str:
    root = ACL_ROOT if pattern.pattern_type == PatternType.LITERAL else PREFIXED_ACL_ROOT
    return f"{root}/{pascal(pattern.resource_type.name)}/{pattern.name}"


class ZkSecurityStore(SecurityStore):
    """In ZooKeeper, Kafka's layout (see the module docstring)."""

    def __init__(self, zk: KafkaZk) -> None:
        self.zk = zk

    async def credentials(self) -> Credentials:
        found: Credentials = {}
        for child in await self.zk.children(f"/config/{USERS}"):
            user = await self.user_credentials(child)
            if user is not None:
                found[desanitize(child)] = user
        return found

    async def user_credentials(self, sanitized: str) -> dict[str, ScramCredential] | None:
        configs = await self.zk.entity_configs(USERS, sanitized)
        # A user whose znode holds only quotas has no credential.
        return (decode_credentials(desanitize(sanitized), configs) if configs else None) or None

    async def update_credentials(self, user: str, change: CredentialChange) -> dict[str, ScramCredential]:
        configs = await self.zk.entity_configs(USERS, sanitize(user)) or {}
        updated = change(decode_credentials(user, configs))
        # Written with its change notification, which every broker (this one too) watches.
        await self.zk.set_entity_configs(USERS, sanitize(user), merge_credentials(configs, updated))
        return updated

    async def acls(self) -> dict[ResourcePattern, AclEntries]:
        found: dict[ResourcePattern, AclEntries] = {}
        for root, pattern_type in ((ACL_ROOT, PatternType.LITERAL), (PREFIXED_ACL_ROOT, PatternType.PREFIXED)):
            for kind in await self.zk.children(root):
                try:
                    resource_type = ResourceType(from_pascal(ResourceType, kind))
                except ValueError:
                    log.warning("ignoring ACLs of unknown resource type %s/%s", root, kind)
                    continue
                for name in await self.zk.children(f"{root}/{kind}"):
                    pattern = ResourcePattern(resource_type, name, pattern_type)
                    entries, _ = await self._read(pattern)
                    if entries:
                        found[pattern] = entries
        return found

    async def read_acls(self, pattern: ResourcePattern) -> AclEntries:
        return (await self._read(pattern))[0]

    async def _read(self, pattern: ResourcePattern) -> tuple[AclEntries, int | None]:
        path = acl_path(pattern)
        got = await self.zk.get(path)
        if got is None:
            return frozenset(), None
        try:
            doc = json.loads(got[0].decode() or "{}")
            entries = frozenset(decode_entry(e) for e in doc.get("acls") or [])
        except (ValueError, KeyError, TypeError) as exc:
            log.error("ignoring unreadable ACLs in %s: %s", path, exc)
            entries = frozenset()
        return entries, int(got[1].version)

    async def update_acls(self, pattern: ResourcePattern, change: AclChange) -> AclEntries:
        path = acl_path(pattern)
        while True:
            current, version = await self._read(pattern)
            updated = change(current)
            data = json.dumps({"version": 1, "acls": [encode_entry(e) for e in sorted(updated, key=str)]},
                              separators=(",", ":")).encode()
            try:
                if version is None:
                    if not updated:
                        return updated
                    await self.zk.create(path, data, makepath=True)
                elif updated:
                    await self.zk.set(path, data, version)
                else:
                    await self.zk.delete(path, version=version)
            except (StaleState, NodeExistsError):
                continue  # another broker changed this pattern's ACLs meanwhile: apply ours to theirs
            break
        await self._announce(pattern)
        return updated

    async def _announce(self, pattern: ResourcePattern) -> None:
        if pattern.pattern_type == PatternType.LITERAL:
            path, data = ACL_CHANGES, f"{pascal(pattern.resource_type.name)}:{pattern.name}".encode()
        else:
            path, data = PREFIXED_ACL_CHANGES, json.dumps(
                {"version": 1, "resourceType": pascal(pattern.resource_type.name), "name": pattern.name,
                 "patternType": pascal(pattern.pattern_type.name)}).encode()
        await self.zk.create(f"{path}/{ACL_CHANGE_PREFIX}", data, sequence=True, makepath=True)


def decode_acl_change(root: str, data: bytes) -> ResourcePattern:
    """The resource pattern a change notification names."""
    text = data.decode()
    if root == ACL_CHANGES:
        kind, _, name = text.partition(":")
        return ResourcePattern(ResourceType(from_pascal(ResourceType, kind)), name, PatternType.LITERAL)
    doc = json.loads(text)
    return ResourcePattern(ResourceType(from_pascal(ResourceType, str(doc["resourceType"]))), str(doc["name"]),
                           PatternType(from_pascal(PatternType, str(doc["patternType"]))))


class AclChangeListener:
    """Follows ``/kafka-acl-changes`` and ``/kafka-acl-extended-changes``: each new notification's
    resource pattern is read again and handed to ``on_change`` (pattern, entries). Notifications
    older than 15 minutes are deleted, as Kafka's brokers do. Event-loop thread only."""

    def __init__(self, store: ZkSecurityStore, on_change: Callable[[ResourcePattern, AclEntries], None]) -> None:
        self._store = store
        self._zk = store.zk
        self._on_change = on_change
        # root -> {notification read: its creation time (ms)}
        self._seen: dict[str, dict[str, int]] = {ACL_CHANGES: {}, PREFIXED_ACL_CHANGES: {}}
        self._tasks: set[asyncio.Task[None]] = set()
        self._watches: dict[str, Callable[[], None]] = {}

    async def start(self) -> None:
        """Take the notifications already there as read (the full load saw their effect), and watch."""
        for root in self._seen:
            await self._zk.ensure_path(root)
            self._seen[root] = {}
            for child in await self._zk.children(root, self._watch(root)):
                got = await self._zk.get(f"{root}/{child}")
                if got is not None:
                    self._seen[root][child] = int(got[1].ctime)

    def _watch(self, root: str) -> Callable[[], None]:
        """The one watch of ``root`` (the same callable each time, so that setting it again in a
        new session does not make ZooKeeper's client hold it twice)."""
        found = self._watches.get(root)
        if found is None:
            def fired() -> None:
                task = asyncio.get_running_loop().create_task(self._process(root))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            found = self._watches[root] = fired
        return found

    async def _process(self, root: str) -> None:
        try:
            children = await self._zk.children(root, self._watch(root))
            seen = self._seen[root]
            for child in children:
                if child not in seen:
                    await self._read(root, child)
            expired = time.time() * 1000 - NOTIFICATION_EXPIRY_MS
            for child, created in list(seen.items()):
                if child not in children:
                    del seen[child]
                elif created < expired:
                    await self._zk.delete(f"{root}/{child}")
        except Exception as exc:  # ZooKeeper gone: the session's return reloads everything
            log.warning("could not read ACL change notifications: %s", exc)

    async def _read(self, root: str, child: str) -> None:
        path = f"{root}/{child}"
        got = await self._zk.get(path)
        if got is None:
            return
        self._seen[root][child] = int(got[1].ctime)
        try:
            pattern = decode_acl_change(root, got[0])
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring unreadable ACL change notification %s: %s", path, exc)
            return
        self._on_change(pattern, await self._store.read_acls(pattern))

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
