"""Where client quotas live, in Kafka's own form.

``EmbeddedQuotaStore`` keeps them in the embedded broker's metadata store, ``ZkQuotaStore`` in
ZooKeeper as Kafka's brokers do: ``/config/users/<user>``, ``/config/clients/<client-id>`` and
``/config/users/<user>/clients/<client-id>``, each ``{"version":1,"config":{"producer_byte_rate":
"1048576"}}``, every write announced as ``/config/changes/config_change_<seq>`` with its entity
path, which every broker watches. A user's znode also holds its SCRAM credentials: a quota write
changes the quota keys alone, as a credential write keeps the quotas."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping

from minikafka.metadata.store import MetadataStore
from minikafka.quota.entity import QuotaEntity, quota_values
from minikafka.zk.kafka_zk import KafkaZk

# quota key -> its new text, or None to remove it
QuotaChanges = Mapping[str, str | None]


def _changed(configs: Mapping[str, str], changes: QuotaChanges) -> dict[str, str]:
    updated = dict(configs)
    for key, value in changes.items():
        if value is None:
            updated.pop(key, None)
        else:
            updated[key] = value
    return updated


class QuotaStore(ABC):
    """The client quotas of the cluster. Event-loop thread only."""

    @abstractmethod
    async def all(self) -> dict[QuotaEntity, dict[str, float]]:
        """Every entity with at least one quota."""

    @abstractmethod
    async def entity(self, entity: QuotaEntity) -> dict[str, float]:
        """One entity's quotas (read again, for a change notification)."""

    @abstractmethod
    async def alter(self, entity: QuotaEntity, changes: QuotaChanges) -> None: ...


class EmbeddedQuotaStore(QuotaStore):
    """In the embedded broker's metadata store (its JSON copy in every log dir)."""

    def __init__(self, store: MetadataStore) -> None:
        self._store = store

    async def all(self) -> dict[QuotaEntity, dict[str, float]]:
        return {QuotaEntity.from_path(path): quota_values(configs)
                for path, configs in self._store.quota_configs().items() if quota_values(configs)}

    async def entity(self, entity: QuotaEntity) -> dict[str, float]:
        return quota_values(self._store.quota_configs().get(entity.path, {}))

    async def alter(self, entity: QuotaEntity, changes: QuotaChanges) -> None:
        current = self._store.quota_configs().get(entity.path, {})
        self._store.put_quota_configs(entity.path, _changed(current, changes))


class ZkQuotaStore(QuotaStore):
    """In ZooKeeper, Kafka's layout (see the module docstring)."""

    def __init__(self, zk: KafkaZk) -> None:
        self.zk = zk

    async def all(self) -> dict[QuotaEntity, dict[str, float]]:
        paths = [f"clients/{name}" for name in await self.zk.children("/config/clients")]
        for user in await self.zk.children("/config/users"):
            paths.append(f"users/{user}")
            paths.extend(f"users/{user}/clients/{name}" for name in await self.zk.children(f"/config/users/{user}/clients"))
        found = {}
        for path in paths:
            kind, _, name = path.partition("/")
            values = quota_values(await self.zk.entity_configs(kind, name) or {})
            if values:
                found[QuotaEntity.from_path(path)] = values
        return found

    async def entity(self, entity: QuotaEntity) -> dict[str, float]:
        kind, _, name = entity.path.partition("/")
        return quota_values(await self.zk.entity_configs(kind, name) or {})

    async def alter(self, entity: QuotaEntity, changes: QuotaChanges) -> None:
        kind, _, name = entity.path.partition("/")
        configs = await self.zk.entity_configs(kind, name) or {}
        await self.zk.set_entity_configs(kind, name, _changed(configs, changes))
