"""Cluster metadata: topics, their partitions and configs, producer-id blocks, security
(users' SCRAM credentials and ACLs) and client quotas, in the text forms Kafka keeps in ZooKeeper.

``MetadataStore`` is the one interface the controller keeps its state behind. The embedded mode
uses ``LocalMetadataStore``: a JSON document written atomically to every healthy log dir, so the
metadata survives the loss of any one dir; on start the newest readable copy wins.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from minikafka.storage.dir_io import guard
from minikafka.storage.errors import KafkaStorageError
from minikafka.storage.failure_channel import LogDirFailureChannel

log = logging.getLogger(__name__)

METADATA_FILE = "minikafka-metadata.json"
PRODUCER_ID_BLOCK_SIZE = 1000


NO_LEADER = -1


@dataclass(frozen=True)
class PartitionState:
    """One partition as the controller records it. A value: change it with dataclasses.replace."""

    leader: int  # NO_LEADER while no replica can lead (e.g. its data is on a failed log dir)
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    # Brokers whose replica has not been created yet (KIP-112's isNewReplica): only these may
    # create it empty. Any other broker that cannot find its replica has lost it and must say
    # so; `minikafka log-dirs --recreate` puts a broker back here to accept the loss.
    new_replicas: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for name in ("replicas", "isr", "new_replicas"):
            object.__setattr__(self, name, tuple(getattr(self, name)))


@dataclass(frozen=True)
class TopicState:
    """A topic as the controller records it. A value: change it with dataclasses.replace."""

    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionState]
    configs: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "topic_id": str(self.topic_id),
            "configs": self.configs,
            "partitions": {
                str(p): {"leader": s.leader, "leader_epoch": s.leader_epoch, "replicas": list(s.replicas),
                         "isr": list(s.isr), "new_replicas": list(s.new_replicas)}
                for p, s in sorted(self.partitions.items())
            },
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> TopicState:
        return cls(
            name=doc["name"],
            topic_id=uuid.UUID(doc["topic_id"]),
            configs=dict(doc.get("configs", {})),
            partitions={int(p): PartitionState(**s) for p, s in doc["partitions"].items()},
        )


class MetadataStore(ABC):
    """Where the controller's state lives. Only the controller calls it."""

    @abstractmethod
    def load(self) -> None: ...

    @property
    @abstractmethod
    def cluster_id(self) -> str: ...

    @abstractmethod
    def topics(self) -> dict[str, TopicState]: ...

    @abstractmethod
    def topic_by_id(self, topic_id: uuid.UUID) -> TopicState | None: ...

    @abstractmethod
    def put_topic(self, topic: TopicState) -> None: ...

    @abstractmethod
    def delete_topic(self, name: str) -> None: ...

    @abstractmethod
    def allocate_producer_id_block(self) -> range: ...

    @abstractmethod
    def broker_configs(self) -> dict[str, dict[str, str]]:
        """Dynamic broker configs as given: {broker id as text, or "" for cluster defaults: {key: value}}."""

    @abstractmethod
    def put_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        """Replace the dynamic configs of one broker (or of the cluster defaults, entity "")."""

    @abstractmethod
    def log_dir_requests(self, broker_id: int) -> dict[tuple[str, int], str]:
        """The log dir asked (AlterReplicaLogDirs) for each replica of ``broker_id`` that did not
        exist yet: the placement memory of moves (KIP-113), kept until the replica is created."""

    @abstractmethod
    def put_log_dir_request(self, broker_id: int, topic: str, partition: int, log_dir: str | None) -> None:
        """Remember the dir asked for a replica not created yet, or forget it (None)."""

    @abstractmethod
    def user_configs(self) -> dict[str, dict[str, str]]:
        """{user name: {SCRAM mechanism: credential text}}, as Kafka's /config/users/<user> holds them."""

    @abstractmethod
    def put_user_configs(self, user: str, configs: dict[str, str]) -> None:
        """Replace one user's credentials (none: the user goes)."""

    @abstractmethod
    def quota_configs(self) -> dict[str, dict[str, str]]:
        """{entity path as in Kafka's /config ("users/alice", "clients/<default>",
        "users/alice/clients/app"): {quota key: value}}."""

    @abstractmethod
    def put_quota_configs(self, entity_path: str, configs: dict[str, str]) -> None:
        """Replace the quotas of one entity (none: the entity goes)."""

    @abstractmethod
    def acl_entries(self) -> dict[str, list[dict[str, str]]]:
        """{resource pattern ("Topic:LITERAL:orders"): its entries as Kafka's /kafka-acl JSON has them}."""

    @abstractmethod
    def put_acl_entries(self, pattern: str, entries: list[dict[str, str]]) -> None:
        """Replace the entries of one resource pattern (none: the pattern goes)."""


class LocalMetadataStore(MetadataStore):
    """Embedded-mode metadata: one JSON document, a copy in every healthy log dir.

    Each write bumps a version number and replaces the file in every dir with temp + fsync +
    rename; a dir that fails the write is reported to the failure channel and skipped. ``load``
    reads every copy and keeps the one with the highest version.
    """

    def __init__(self, log_dirs: list[str], failure_channel: LogDirFailureChannel, cluster_id: str = "") -> None:
        self._log_dirs = log_dirs
        self._failure_channel = failure_channel
        self._version = 0
        self._cluster_id = cluster_id
        self._topics: dict[str, TopicState] = {}
        self._topics_by_id: dict[uuid.UUID, TopicState] = {}  # Produce/Fetch v13+ name topics by id
        self._next_producer_id = 0
        self._broker_configs: dict[str, dict[str, str]] = {}
        self._log_dir_requests: dict[str, list[dict[str, Any]]] = {}  # broker id -> [{topic, partition, log_dir}]
        self._users: dict[str, dict[str, str]] = {}
        self._quotas: dict[str, dict[str, str]] = {}
        self._acls: dict[str, list[dict[str, str]]] = {}

    def load(self, refresh: bool = True) -> None:
        """Read the newest copy; with ``refresh``, write it back to every healthy dir."""
        newest: dict[str, Any] | None = None
        for log_dir in self._live_dirs():
            path = os.path.join(log_dir, METADATA_FILE)
            try:
                with guard(log_dir, self._failure_channel):
                    if not os.path.exists(path):
                        continue
                    with open(path, encoding="utf-8") as f:
                        text = f.read()
                doc = json.loads(text)
                if not isinstance(doc, dict) or not isinstance(doc.get("version"), int):
                    raise ValueError("no version")
            except KafkaStorageError:
                continue
            except ValueError:
                log.warning("metadata copy %s is unreadable (torn write?); using the other copies", path)
                continue
            if newest is None or doc["version"] > newest["version"]:
                newest = doc
        if newest is not None:
            self._version = newest["version"]
            self._cluster_id = self._cluster_id or newest["cluster_id"]
            self._topics = {t["name"]: TopicState.from_json(t) for t in newest["topics"]}
            self._topics_by_id = {t.topic_id: t for t in self._topics.values()}
            self._next_producer_id = newest["next_producer_id"]
            self._broker_configs = {entity: dict(c) for entity, c in newest.get("broker_configs", {}).items()}
            self._log_dir_requests = {broker: list(entries)
                                      for broker, entries in newest.get("log_dir_requests", {}).items()}
            self._users = {user: dict(configs) for user, configs in newest.get("users", {}).items()}
            self._acls = {pattern: list(entries) for pattern, entries in newest.get("acls", {}).items()}
            self._quotas = {entity: dict(configs) for entity, configs in newest.get("quotas", {}).items()}
        if not self._cluster_id:
            self._cluster_id = _new_cluster_id()
        # Every healthy dir gets the newest copy, including a dir that was just replaced.
        if refresh:
            self._write()

    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    def topics(self) -> dict[str, TopicState]:
        return self._topics

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicState | None:
        return self._topics_by_id.get(topic_id)

    def put_topic(self, topic: TopicState) -> None:
        self._topics[topic.name] = topic
        self._topics_by_id[topic.topic_id] = topic
        self._write()

    def delete_topic(self, name: str) -> None:
        deleted = self._topics.pop(name, None)
        if deleted is not None:
            self._topics_by_id.pop(deleted.topic_id, None)
        self._write()

    def broker_configs(self) -> dict[str, dict[str, str]]:
        return self._broker_configs

    def put_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        if configs:
            self._broker_configs[entity] = dict(configs)
        else:
            self._broker_configs.pop(entity, None)
        self._write()

    def log_dir_requests(self, broker_id: int) -> dict[tuple[str, int], str]:
        return {(e["topic"], e["partition"]): e["log_dir"] for e in self._log_dir_requests.get(str(broker_id), [])}

    def put_log_dir_request(self, broker_id: int, topic: str, partition: int, log_dir: str | None) -> None:
        requests = self.log_dir_requests(broker_id)
        if log_dir is None:
            if requests.pop((topic, partition), None) is None:
                return
        else:
            requests[(topic, partition)] = log_dir
        entries = [{"topic": t, "partition": p, "log_dir": d} for (t, p), d in sorted(requests.items())]
        if entries:
            self._log_dir_requests[str(broker_id)] = entries
        else:
            self._log_dir_requests.pop(str(broker_id), None)
        self._write()

    def user_configs(self) -> dict[str, dict[str, str]]:
        return self._users

    def put_user_configs(self, user: str, configs: dict[str, str]) -> None:
        if configs:
            self._users[user] = dict(configs)
        else:
            self._users.pop(user, None)
        self._write()

    def quota_configs(self) -> dict[str, dict[str, str]]:
        return self._quotas

    def put_quota_configs(self, entity_path: str, configs: dict[str, str]) -> None:
        if configs:
            self._quotas[entity_path] = dict(configs)
        else:
            self._quotas.pop(entity_path, None)
        self._write()

    def acl_entries(self) -> dict[str, list[dict[str, str]]]:
        return self._acls

    def put_acl_entries(self, pattern: str, entries: list[dict[str, str]]) -> None:
        if entries:
            self._acls[pattern] = list(entries)
        else:
            self._acls.pop(pattern, None)
        self._write()

    def allocate_producer_id_block(self) -> range:
        start = self._next_producer_id
        self._next_producer_id += PRODUCER_ID_BLOCK_SIZE
        self._write()
        return range(start, start + PRODUCER_ID_BLOCK_SIZE)

    def _live_dirs(self) -> list[str]:
        return [d for d in self._log_dirs if not self._failure_channel.is_offline(d)]

    def _write(self) -> None:
        self._version += 1
        text = json.dumps(
            {
                "version": self._version,
                "cluster_id": self._cluster_id,
                "next_producer_id": self._next_producer_id,
                "broker_configs": self._broker_configs,
                "log_dir_requests": self._log_dir_requests,
                "users": self._users,
                "acls": self._acls,
                "quotas": self._quotas,
                "topics": [t.to_json() for t in self._topics.values()],
            },
            indent=1,
        )
        written = 0
        for log_dir in self._live_dirs():
            try:
                with guard(log_dir, self._failure_channel):
                    _atomic_write(os.path.join(log_dir, METADATA_FILE), text)
                written += 1
            except KafkaStorageError as exc:
                log.error("could not write cluster metadata to %s: %s", log_dir, exc)
        if written == 0:
            raise KafkaStorageError(",".join(self._log_dirs), None, OSError("no log dir could store metadata"))


def _atomic_write(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _new_cluster_id() -> str:
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
