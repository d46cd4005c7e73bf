"""Apache Kafka's ZooKeeper layout, read and written from the broker's event loop.

``KafkaZk`` owns one kazoo session. Kazoo runs its own thread; every call here uses kazoo's
asynchronous API and resumes on the asyncio loop, and every watch and session-state callback
is handed to the loop (``call_soon_threadsafe``), so the event loop never blocks on ZooKeeper
and nothing outside kazoo runs on kazoo's thread.

A watch is kazoo's for as long as the connection lasts: when the connection drops (and when the
session expires) kazoo forgets every watch and calls it with a session event. ``KafkaZk`` calls
such a watch only once ZooKeeper is connected again (in the same session or a new one), and so
too a watch whose read failed for want of ZooKeeper: its owner reads again and sets it again then,
rather than read into a connection that is gone and die of a SessionExpiredError.

The znodes and their JSON are Kafka's (so Kafka's own tools can read the cluster):
/cluster/id, /brokers/ids/N, /brokers/topics/T[/partitions/P/state], /controller,
/controller_epoch, /config/{topics,brokers,changes}, /admin/delete_topics, /isr_change_notification,
/log_dir_event_notification, /latest_producer_id_block, /feature.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import EXCEPTIONS as ZOOKEEPER_ERRORS
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    RolledBackError,
    SessionExpiredError,
    UnimplementedError,
)
from kazoo.protocol.paths import _prefix_root as with_chroot
from kazoo.protocol.states import EventType, ZnodeStat

from minikafka.zk.multi_read import NO_NODE, READS_PER_REQUEST, MultiRead, ReadResult

log = logging.getLogger(__name__)

PRODUCER_ID_BLOCK_SIZE = 1000
# Well within ZooKeeper's default request limit (jute.maxbuffer, 1 MiB): three small znodes each.
PARTITIONS_PER_TRANSACTION = 500
DELETES_PER_TRANSACTION = 1000
PERSISTENT_PATHS = ("/brokers/ids", "/brokers/topics", "/brokers/seqid", "/config/topics", "/config/brokers",
                    "/config/changes", "/admin/delete_topics", "/isr_change_notification",
                    "/log_dir_event_notification", "/cluster")
ISR_CHANGE_PREFIX = "isr_change_"
CONFIG_CHANGE_PREFIX = "config_change_"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
LOG_DIR_FAILURE_EVENT = 1  # Kafka's LogDirFailure event type

Watch = Callable[[], None]


class ZooKeeperUnavailable(OSError):
    """ZooKeeper cannot be reached (at startup: within zookeeper.connection.timeout.ms)."""


# What a call raises while this broker has no ZooKeeper session to make it in (ZooKeeper away,
# or the session expired and a new one is not yet made): worth asking again shortly.
ZOOKEEPER_UNAVAILABLE = (ConnectionLoss, ConnectionClosedError, SessionExpiredError, OperationTimeoutError)


@dataclass(frozen=True)
class ReassignmentRequest:
    """What /admin/reassign_partitions asks, read at znode ``version``; ``malformed`` says why
    it could not be read (then it asks nothing)."""

    partitions: dict[tuple[str, int], tuple[int, ...]]
    version: int
    malformed: str | None = None


class StaleState(Exception):
    """A conditional write lost: the znode (or the controller epoch) changed since it was read."""


class BrokerIdTaken(Exception):
    """Another live broker is registered with this broker.id."""


# ---- znode values ------------------------------------------------------------------------

@dataclass(frozen=True)
class LogDirState:
    """One log dir of a broker as its registration lists it (KIP-858's directory ids)."""

    path: str
    directory_id: uuid.UUID | None  # None: the dir failed before its meta.properties could be read
    online: bool


@dataclass(frozen=True)
class BrokerRegistration:
    """/brokers/ids/N. ``epoch`` is the registration's creation zxid (Kafka's broker epoch).

    ``log_dirs`` is KIP-858's adaptation to ZooKeeper: the broker lists its dirs with their
    directory ids and whether they are online, and rewrites the list when one fails, so the
    controller knows which replicas a failed dir held. Kafka's own readers ignore the field."""

    broker_id: int
    endpoints: Mapping[str, tuple[str, int, str]]  # listener name -> (host, port, security protocol)
    rack: str | None = None
    epoch: int = -1
    log_dirs: tuple[LogDirState, ...] = ()

    @property
    def online_dir_ids(self) -> frozenset[uuid.UUID]:
        return frozenset(d.directory_id for d in self.log_dirs if d.online and d.directory_id is not None)

    @property
    def offline_dirs(self) -> tuple[LogDirState, ...]:
        return tuple(d for d in self.log_dirs if not d.online)

    def endpoint(self, listener: str) -> tuple[str, int] | None:
        found = self.endpoints.get(listener)
        return None if found is None else (found[0], found[1])

    def encode(self) -> bytes:
        protocols = {name: protocol for name, (_, _, protocol) in self.endpoints.items()}
        urls = [f"{name}://{host}:{port}" for name, (host, port, _) in self.endpoints.items()]
        plain = next(((h, p) for n, (h, p, s) in self.endpoints.items() if s == "PLAINTEXT"), ("", -1))
        dirs = [{"path": d.path, "id": encode_topic_id(d.directory_id) if d.directory_id else None,
                 "online": d.online} for d in self.log_dirs]
        return _json({"features": {}, "listener_security_protocol_map": protocols, "endpoints": urls,
                      "jmx_port": -1, "host": plain[0], "port": plain[1], "rack": self.rack,
                      "timestamp": str(int(time.time() * 1000)), "version": 5, "log_dirs": dirs})

    @classmethod
    def decode(cls, broker_id: int, data: bytes, epoch: int) -> BrokerRegistration:
        doc = _load(f"/brokers/ids/{broker_id}", data)
        protocols = doc.get("listener_security_protocol_map") or {}
        endpoints: dict[str, tuple[str, int, str]] = {}
        for url in doc.get("endpoints", []):
            name, _, address = url.partition("://")
            host, _, port = address.rpartition(":")
            endpoints[name] = (host.strip("[]"), int(port), protocols.get(name, name))
        dirs = tuple(LogDirState(str(d["path"]), decode_topic_id(d["id"]) if d.get("id") else None,
                                 bool(d.get("online", True))) for d in doc.get("log_dirs") or [])
        return cls(broker_id, endpoints, doc.get("rack"), epoch, dirs)


@dataclass(frozen=True)
class TopicAssignment:
    """/brokers/topics/T: the replicas of each partition, and the topic id."""

    topic_id: uuid.UUID
    partitions: Mapping[int, tuple[int, ...]]
    adding_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    removing_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)

    def encode(self) -> bytes:
        def listed(m: Mapping[int, Sequence[int]]) -> dict[str, list[int]]:
            return {str(p): list(r) for p, r in sorted(m.items())}
        return _json({"partitions": listed(self.partitions), "topic_id": encode_topic_id(self.topic_id),
                      "adding_replicas": listed(self.adding_replicas),
                      "removing_replicas": listed(self.removing_replicas), "version": 3})

    @classmethod
    def decode(cls, path: str, data: bytes) -> TopicAssignment:
        doc = _load(path, data)
        def parsed(m: Mapping[str, Sequence[int]] | None) -> dict[int, tuple[int, ...]]:
            return {int(p): tuple(int(b) for b in r) for p, r in (m or {}).items()}
        raw_id = doc.get("topic_id")
        return cls(decode_topic_id(raw_id) if raw_id else uuid.uuid4(), parsed(doc.get("partitions")),
                   parsed(doc.get("adding_replicas")), parsed(doc.get("removing_replicas")))


@dataclass(frozen=True)
class LeaderIsr:
    """/brokers/topics/T/partitions/P/state."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    # Which log dir (directory id) holds each broker's replica, as the brokers reported it
    # (KIP-858's partition directories); a broker missing here has not reported yet.
    directories: Mapping[int, uuid.UUID] = field(default_factory=dict)

    def encode(self) -> bytes:
        doc: dict[str, Any] = {"controller_epoch": self.controller_epoch, "leader": self.leader, "version": 1,
                               "leader_epoch": self.leader_epoch, "isr": list(self.isr)}
        if self.directories:
            doc["directories"] = {str(b): encode_topic_id(d) for b, d in sorted(self.directories.items())}
        return _json(doc)

    @classmethod
    def decode(cls, path: str, data: bytes) -> LeaderIsr:
        doc = _load(path, data)
        try:
            return cls(int(doc["leader"]), int(doc["leader_epoch"]), tuple(int(b) for b in doc["isr"]),
                       int(doc["controller_epoch"]),
                       {int(b): decode_topic_id(d) for b, d in (doc.get("directories") or {}).items()})
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}: partition state lacks {exc}") from None


def encode_topic_id(topic_id: uuid.UUID) -> str:
    """Kafka writes a Uuid as unpadded URL-safe base64."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def decode_topic_id(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def isr_change_notification(partitions: Sequence[tuple[str, int]]) -> bytes:
    """The body of an /isr_change_notification znode naming ``partitions``."""
    return _json({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})


def _json(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def _load(path: str, data: bytes) -> Any:
    try:
        doc = json.loads(data.decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path} does not hold JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{path} holds {type(doc).__name__}, not a JSON object")
    return doc


REASSIGN_PARTITIONS = "/admin/reassign_partitions"
FEATURE = "/feature"


@dataclass(frozen=True)
class ControllerZnode:
    """/controller. Version 1 names the ZooKeeper-mode controller broker; version 2, written by
    a KRaft controller while a cluster migrates, adds the KRaft controller's epoch."""

    broker_id: int
    kraft_controller_epoch: int | None = None

    @classmethod
    def decode(cls, data: bytes) -> ControllerZnode:
        doc = _load("/controller", data)
        try:
            kraft_epoch = doc.get("kraftControllerEpoch")
            return cls(int(doc["brokerid"]), None if kraft_epoch is None or int(kraft_epoch) < 0 else int(kraft_epoch))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"/controller holds no broker id: {doc}") from exc


FEATURE_DISABLED, FEATURE_ENABLED = 0, 1


@dataclass(frozen=True)
class FeatureZnode:
    """/feature, KIP-584's finalized features as a ZooKeeper-mode Kafka controller writes them:
    version 1 gives each feature a min and max version level, version 2 the max alone.
    ``epoch`` is the znode's version, which Kafka reports as the finalized features' epoch."""

    version: int
    status: int
    features: Mapping[str, int]
    epoch: int = -1

    @classmethod
    def decode(cls, data: bytes, epoch: int) -> FeatureZnode:
        doc = _load(FEATURE, data)
        try:
            version, status = int(doc["version"]), int(doc["status"])
            features = {str(name): int(levels["max_version_level"]) for name, levels in doc["features"].items()}
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"{FEATURE} is not Kafka's feature znode: {doc}") from exc
        if version not in (1, 2) or status not in (FEATURE_DISABLED, FEATURE_ENABLED):
            raise ValueError(f"{FEATURE} has version {version} and status {status}, which this broker does not know")
        return cls(version, status, features, epoch)

    def encode(self) -> bytes:
        def levels(level: int) -> dict[str, int]:
            return {"max_version_level": level} if self.version > 1 else {"min_version_level": level,
                                                                           "max_version_level": level}
        return _json({"version": self.version, "status": self.status,
                      "features": {name: levels(level) for name, level in self.features.items()}})


def topic_path(topic: str) -> str:
    return f"/brokers/topics/{topic}"


def state_path(topic: str, partition: int) -> str:
    return f"/brokers/topics/{topic}/partitions/{partition}/state"


# ---- the session ---------------------------------------------------------------------------

class KafkaZk:
    """One ZooKeeper session and Kafka's operations on it. Event-loop thread only (kazoo's
    thread only runs the completion callbacks that hand results back to the loop)."""

    def __init__(self, connect: str, session_timeout_ms: int, connection_timeout_ms: int) -> None:
        self.connect = connect
        self.connection_timeout_ms = connection_timeout_ms
        self.client = KazooClient(hosts=connect, timeout=session_timeout_ms / 1000,
                                  connection_retry={"max_tries": -1, "delay": 0.2, "max_delay": 1.0})
        self._loop: asyncio.AbstractEventLoop | None = None
        self._state_listeners: list[Callable[[str], None]] = []
        # Watches kazoo forgot (the connection dropped) or never set (their read failed for want of
        # ZooKeeper), called once it is connected again. Insertion-ordered, each once.
        self._after_reconnect: dict[Watch, None] = {}
        # ZooKeeper 3.6 and later answer multiRead (``_probe_multi_read``).
        self._multi_read_answered = True

    # -- session ---------------------------------------------------------------------------
    async def start(self) -> None:
        """Connect (creating the chroot if the connect string names one, as Kafka does)."""
        self._loop = asyncio.get_running_loop()
        chroot = ""
        if "/" in self.connect:
            hosts, _, rest = self.connect.partition("/")
            chroot = "/" + rest.strip("/")
            if chroot != "/":
                await self._ensure_chroot(hosts, chroot)
        event = self.client.start_async()
        connected = await self._loop.run_in_executor(None, event.wait, self.connection_timeout_ms / 1000)
        if not connected or not self.client.connected:
            self.client.stop()
            self.client.close()
            raise ZooKeeperUnavailable(f"cannot connect to ZooKeeper at {self.connect} within "
                                       f"zookeeper.connection.timeout.ms={self.connection_timeout_ms}")
        self.client.add_listener(self._on_state)
        for path in PERSISTENT_PATHS:
            await self.ensure_path(path)
        await self._probe_multi_read()

    async def _probe_multi_read(self) -> None:
        """Whether ZooKeeper answers multiRead (3.6 and later), asked before the session is used:
        an older one answers UNIMPLEMENTED and drops the connection, which kazoo makes again."""
        try:
            await self._multi_read(["/"])  # whatever its one read's answer (no access to it, say)
            return
        except UnimplementedError:
            self._multi_read_answered = False
            log.info("ZooKeeper at %s is older than 3.6 (no multiRead): many znodes are read one by one",
                     self.connect)
        assert self._loop is not None
        deadline = self._loop.time() + self.connection_timeout_ms / 1000
        while True:
            try:
                await self.exists("/")
                return
            except ZOOKEEPER_UNAVAILABLE:
                if self._loop.time() > deadline:
                    raise
                await asyncio.sleep(0.05)

    async def _ensure_chroot(self, hosts: str, chroot: str) -> None:
        root = KazooClient(hosts=hosts)
        assert self._loop is not None
        event = root.start_async()
        if not await self._loop.run_in_executor(None, event.wait, self.connection_timeout_ms / 1000) \
                or not root.connected:
            root.stop()
            root.close()
            raise ZooKeeperUnavailable(f"cannot connect to ZooKeeper at {hosts} within "
                                       f"zookeeper.connection.timeout.ms={self.connection_timeout_ms}")
        try:
            await self._loop.run_in_executor(None, root.ensure_path, chroot)
        finally:
            root.stop()
            root.close()

    def on_state(self, listener: Callable[[str], None]) -> None:
        """``listener(state)`` on the loop for "connected", "suspended" and "lost" (expired)."""
        self._state_listeners.append(listener)

    def _on_state(self, state: str) -> None:
        name = {KazooState.CONNECTED: "connected", KazooState.SUSPENDED: "suspended",
                KazooState.LOST: "lost"}.get(state, str(state))
        assert self._loop is not None
        for listener in self._state_listeners:
            self._loop.call_soon_threadsafe(listener, name)
        if name == "connected":
            self._loop.call_soon_threadsafe(self._reconnected)

    def after_reconnect(self, watch: Watch) -> None:
        """Call ``watch`` (on the loop) once ZooKeeper is connected again; at once if it is
        connected now (then a little later, so that a read that keeps failing does not spin)."""
        if self.client.connected:
            assert self._loop is not None
            self._loop.call_later(0.2, watch)
        else:
            self._after_reconnect[watch] = None

    def _reconnected(self) -> None:
        if not self.client.connected:  # dropped again meanwhile: the next "connected" calls them
            return
        pending, self._after_reconnect = list(self._after_reconnect), {}
        for watch in pending:
            watch()

    def _session_event(self, watch: Watch) -> None:
        """kazoo forgot ``watch`` (connection lost or session expired): call it when connected."""
        if self.client.connected:  # reconnected before this event reached the loop
            watch()
        else:
            self._after_reconnect[watch] = None

    @property
    def connected(self) -> bool:
        return bool(self.client.connected)

    async def close(self) -> None:
        assert self._loop is not None
        await self._loop.run_in_executor(None, self._stop)

    def _stop(self) -> None:
        self.client.stop()
        self.client.close()

    # -- primitives --------------------------------------------------------------------------
    async def _call(self, async_result: Any) -> Any:
        assert self._loop is not None
        future: asyncio.Future[Any] = self._loop.create_future()
        loop = self._loop

        def done(result: Any) -> None:
            try:
                value = result.get_nowait()
            except Exception as exc:  # handed to the awaiting task as it is
                loop.call_soon_threadsafe(_settle, future, None, exc)
            else:
                loop.call_soon_threadsafe(_settle, future, value, None)
        async_result.rawlink(done)
        return await future

    def _on_loop(self, watch: Watch | None) -> _LoopWatch | None:
        if watch is None:
            return None
        assert self._loop is not None
        return _LoopWatch(watch, self._loop, self._session_event)

    async def _watched(self, async_result: Any, watch: Watch | None) -> Any:
        """A read that sets ``watch``: if it fails for want of ZooKeeper the watch is not set,
        so it is called once ZooKeeper is back, for its owner to read (and watch) again."""
        try:
            return await self._call(async_result)
        except ZOOKEEPER_UNAVAILABLE:
            if watch is not None:
                self.after_reconnect(watch)
            raise

    async def get(self, path: str, watch: Watch | None = None) -> tuple[bytes, ZnodeStat] | None:
        try:
            return await self._watched(self.client.get_async(path, watch=self._on_loop(watch)), watch)
        except NoNodeError:
            if watch is not None:
                await self.exists(path, watch)
            return None

    async def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, ZnodeStat] | None]:
        """The data and stat of each znode (None where there is none), without watches: in
        multiRead requests of READS_PER_REQUEST reads, or as pipelined reads from a ZooKeeper
        older than 3.6."""
        if not self._multi_read_answered:
            return list(await asyncio.gather(*(self.get(path) for path in paths)))
        try:
            answers = await asyncio.gather(*(self._multi_read_of(paths[start:start + READS_PER_REQUEST])
                                             for start in range(0, len(paths), READS_PER_REQUEST)))
        except UnimplementedError:
            # The session moved to an older server of the ensemble: the caller's retry reads one by one.
            self._multi_read_answered = False
            log.info("ZooKeeper at %s no longer answers multiRead (a server older than 3.6): many znodes are read "
                     "one by one", self.connect)
            raise
        return [found for answer in answers for found in answer]

    async def _multi_read(self, paths: Sequence[str]) -> list[ReadResult]:
        async_result = self.client.handler.async_result()
        self.client._call(MultiRead([with_chroot(self.client.chroot, path) for path in paths]), async_result)
        results: list[ReadResult] = await self._call(async_result)
        return results

    async def _multi_read_of(self, paths: Sequence[str]) -> list[tuple[bytes, ZnodeStat] | None]:
        found: list[tuple[bytes, ZnodeStat] | None] = []
        for result in await self._multi_read(paths):
            if isinstance(result, int):
                if result != NO_NODE:
                    raise ZOOKEEPER_ERRORS[result]()
                found.append(None)
            else:
                found.append((result[0] or b"", result[1]))
        return found

    async def exists(self, path: str, watch: Watch | None = None) -> ZnodeStat | None:
        return await self._watched(self.client.exists_async(path, watch=self._on_loop(watch)), watch)

    async def children(self, path: str, watch: Watch | None = None) -> list[str]:
        try:
            return sorted(await self._watched(
                self.client.get_children_async(path, watch=self._on_loop(watch)), watch))
        except NoNodeError:
            return []

    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False, sequence: bool = False,
                     makepath: bool = False) -> str:
        return await self._call(self.client.create_async(path, data, ephemeral=ephemeral, sequence=sequence,
                                                         makepath=makepath))

    async def set(self, path: str, data: bytes, version: int = -1) -> int:
        try:
            stat = await self._call(self.client.set_async(path, data, version))
        except BadVersionError:
            raise StaleState(path) from None
        return int(stat.version)

    async def delete(self, path: str, recursive: bool = False, version: int = -1,
                     controller_epoch_version: int | None = None) -> None:
        """Delete (if present); with ``version``, only at that version (StaleState otherwise);
        with ``controller_epoch_version``, each znode only while the controller epoch is still at
        that version (StaleState otherwise), as Kafka fences its controller's deletes: a
        controller that lost its place must not delete what its successor relies on."""
        try:
            if recursive:
                for child in await self.children(path):
                    await self.delete(f"{path}/{child}", recursive=True,
                                      controller_epoch_version=controller_epoch_version)
            if controller_epoch_version is None:
                await self._call(self.client.delete_async(path, version))
            else:
                await self._fenced_delete(path, version, controller_epoch_version)
        except NoNodeError:
            pass
        except BadVersionError:
            raise StaleState(path) from None
        except NotEmptyError:  # a child appeared meanwhile
            await self.delete(path, recursive=True, version=version, controller_epoch_version=controller_epoch_version)

    async def _fenced_delete(self, path: str, version: int, controller_epoch_version: int) -> None:
        transaction = self.client.transaction()
        transaction.check("/controller_epoch", controller_epoch_version)
        transaction.delete(path, version)
        epoch_check, deletion = await self._call(transaction.commit_async())
        if isinstance(epoch_check, (BadVersionError, NoNodeError)):
            raise StaleState("the controller epoch moved on")
        if isinstance(deletion, Exception) and not isinstance(deletion, RolledBackError):
            raise deletion

    async def ensure_path(self, path: str) -> None:
        await self._call(self.client.ensure_path_async(path))

    async def _commit(self, ops: Callable[[Any], object]) -> list[Any]:
        """A multi-op transaction; StaleState when a version check fails."""
        transaction = self.client.transaction()
        ops(transaction)
        results = await self._call(transaction.commit_async())
        # The op that failed says why; the others only say they were rolled back with it.
        for result in results:
            if isinstance(result, BadVersionError):
                raise StaleState("a znode changed since it was read")
            if isinstance(result, NoNodeError):
                raise StaleState("a znode was deleted since it was read")
            if isinstance(result, NodeExistsError):
                raise StaleState("a znode was created since it was read")
        for result in results:
            if isinstance(result, Exception) and not isinstance(result, RolledBackError):
                raise result
        return results

    # -- cluster id and brokers ----------------------------------------------------------------
    async def cluster_id(self, new_id: str) -> str:
        """The cluster id, created as ``new_id`` by the first broker."""
        try:
            await self.create("/cluster/id", _json({"version": "1", "id": new_id}), makepath=True)
            return new_id
        except NodeExistsError:
            found = await self.get("/cluster/id")
            assert found is not None
            return str(_load("/cluster/id", found[0])["id"])

    async def register_broker(self, registration: BrokerRegistration) -> int:
        """Create this broker's ephemeral registration; returns its epoch (creation zxid)."""
        path = f"/brokers/ids/{registration.broker_id}"
        try:
            await self.create(path, registration.encode(), ephemeral=True)
        except NodeExistsError:
            stat = await self.exists(path)
            # Our own registration from this very session (a retry) is fine; anyone else's is not.
            if stat is None or stat.ephemeralOwner != self.client.client_id[0]:
                raise BrokerIdTaken(f"broker.id {registration.broker_id} is already registered in ZooKeeper at "
                                    f"{path} by another live broker") from None
        stat = await self.exists(path)
        assert stat is not None
        return int(stat.czxid)

    async def update_broker_registration(self, registration: BrokerRegistration) -> None:
        """Rewrite this broker's registration (its log dirs changed); its epoch stays."""
        await self.set(f"/brokers/ids/{registration.broker_id}", registration.encode())

    async def live_brokers(self, watch: Watch | None = None) -> dict[int, BrokerRegistration]:
        found: dict[int, BrokerRegistration] = {}
        for child in await self.children("/brokers/ids", watch):
            got = await self.get(f"/brokers/ids/{child}")
            if got is not None and child.isdigit():
                found[int(child)] = BrokerRegistration.decode(int(child), got[0], int(got[1].czxid))
        return found

    # -- controller election -----------------------------------------------------------------
    async def controller_id(self, watch: Watch | None = None) -> int | None:
        znode = await self.controller(watch)
        return None if znode is None else znode.broker_id

    async def controller(self, watch: Watch | None = None) -> ControllerZnode | None:
        got = await self.get("/controller", watch)
        return None if got is None else ControllerZnode.decode(got[0])

    async def try_become_controller(self, broker_id: int) -> tuple[int, int] | None:
        """Create /controller and bump /controller_epoch; (epoch, its zk version), or None
        when another broker got there first."""
        try:
            await self.create("/controller", _json({"version": 1, "brokerid": broker_id,
                                                    "timestamp": str(int(time.time() * 1000))}), ephemeral=True)
        except NodeExistsError:
            return None
        while True:
            got = await self.get("/controller_epoch")
            if got is None:
                try:
                    await self.create("/controller_epoch", b"1")
                    stat = await self.exists("/controller_epoch")
                    assert stat is not None
                    return 1, int(stat.version)
                except NodeExistsError:
                    continue
            epoch = int(got[0].decode() or 0) + 1
            try:
                return epoch, await self.set("/controller_epoch", str(epoch).encode(), got[1].version)
            except StaleState:
                continue

    async def resign_controller(self, broker_id: int) -> None:
        """Delete /controller if this broker holds it, so that a new election runs."""
        got = await self.get("/controller")
        if got is not None and ControllerZnode.decode(got[0]) == ControllerZnode(broker_id):
            try:
                await self._call(self.client.delete_async("/controller", got[1].version))
            except (NoNodeError, BadVersionError):
                pass

    # -- finalized features ------------------------------------------------------------------
    async def feature(self, watch: Watch | None = None) -> FeatureZnode | None:
        got = await self.get(FEATURE, watch)
        return None if got is None else FeatureZnode.decode(got[0], int(got[1].version))

    async def enable_feature_versioning(self) -> FeatureZnode:
        """What a ZooKeeper-mode Kafka controller at inter.broker.protocol.version 2.7 or later
        does when elected: create /feature, enabled with no finalized feature, if it is missing;
        enable it if it is disabled; leave it as it is otherwise (its finalized features are the
        operator's, set with kafka-features)."""
        while True:
            got = await self.get(FEATURE)
            if got is None:
                created = FeatureZnode(2, FEATURE_ENABLED, {}, 0)
                try:
                    await self.create(FEATURE, created.encode())
                    return created
                except NodeExistsError:
                    continue
            current = FeatureZnode.decode(got[0], int(got[1].version))
            if current.status == FEATURE_ENABLED:
                return current
            enabled = FeatureZnode(current.version, FEATURE_ENABLED, current.features)
            try:
                version = await self.set(FEATURE, enabled.encode(), got[1].version)
            except StaleState:
                continue
            return FeatureZnode(enabled.version, enabled.status, enabled.features, version)

    # -- topics and partitions ---------------------------------------------------------------
    async def topic_names(self, watch: Watch | None = None) -> list[str]:
        return await self.children("/brokers/topics", watch)

    async def topic_assignment(self, topic: str, watch: Watch | None = None) -> TopicAssignment | None:
        got = await self.get(topic_path(topic), watch)
        return None if got is None else TopicAssignment.decode(topic_path(topic), got[0])

    async def topic_assignment_versioned(self, topic: str) -> tuple[TopicAssignment, int] | None:
        got = await self.get(topic_path(topic))
        return None if got is None else (TopicAssignment.decode(topic_path(topic), got[0]), int(got[1].version))

    async def create_topic(self, topic: str, assignment: TopicAssignment, configs: Mapping[str, str]) -> None:
        """The topic's configs, then its assignment (which the controller watches for)."""
        config = _json({"version": 1, "config": dict(configs)})
        await self._commit(lambda t: (t.create(f"/config/topics/{topic}", config),
                                      t.create(topic_path(topic), assignment.encode())))

    async def create_topics(self, topics: Mapping[str, tuple[TopicAssignment, Mapping[str, str]]]) -> None:
        """Several topics' configs and assignments in one transaction: one ZooKeeper commit for
        them all, and the controller's watch sees them together. StaleState (nothing written)
        when one of them exists already."""
        def ops(t: Any) -> None:
            for topic, (assignment, configs) in topics.items():
                t.create(f"/config/topics/{topic}", _json({"version": 1, "config": dict(configs)}))
                t.create(topic_path(topic), assignment.encode())
        await self._commit(ops)

    async def set_topic_assignment(self, topic: str, assignment: TopicAssignment, version: int) -> None:
        await self.set(topic_path(topic), assignment.encode(), version)

    async def requested_reassignments(self, watch: Watch | None = None) -> ReassignmentRequest | None:
        """Kafka's /admin/reassign_partitions ({"version":1,"partitions":[{"topic","partition",
        "replicas"}]}), None when there is none; ``watch`` fires when it is created or changed."""
        got = await self.get(REASSIGN_PARTITIONS, watch)
        if got is None:
            return None
        version = int(got[1].version)
        try:
            entries = _load(REASSIGN_PARTITIONS, got[0]).get("partitions") or []
        except ValueError as exc:
            return ReassignmentRequest({}, version, str(exc))
        if not isinstance(entries, list):
            return ReassignmentRequest({}, version, f"{REASSIGN_PARTITIONS}: partitions is not a list")
        requested: dict[tuple[str, int], tuple[int, ...]] = {}
        for entry in entries:
            try:
                requested[(str(entry["topic"]), int(entry["partition"]))] = tuple(int(b) for b in entry["replicas"])
            except (KeyError, TypeError, ValueError) as exc:
                return ReassignmentRequest({}, version, f"{REASSIGN_PARTITIONS}: malformed entry {entry!r} ({exc!r})")
        return ReassignmentRequest(requested, version)

    async def delete_requested_reassignments(self, version: int, controller_epoch_version: int) -> None:
        """Delete /admin/reassign_partitions if it is still at ``version`` (an operator's newer
        request is read, not deleted unread) and the controller epoch still ours; StaleState otherwise."""
        await self.delete(REASSIGN_PARTITIONS, version=version, controller_epoch_version=controller_epoch_version)

    async def partition_state(self, topic: str, partition: int) -> tuple[LeaderIsr, int] | None:
        got = await self.get(state_path(topic, partition))
        if got is None:
            return None
        return LeaderIsr.decode(state_path(topic, partition), got[0]), int(got[1].version)

    async def partition_states(self, topic: str, partitions: Sequence[int]) -> list[tuple[LeaderIsr, int] | None]:
        """The state of each of the topic's ``partitions`` (None where it has none), asked all
        at once (``get_many``); a topic without /partitions, as each new one, costs one
        read instead of one a partition."""
        if await self.exists(f"/brokers/topics/{topic}/partitions") is None:
            return [None] * len(partitions)
        paths = [state_path(topic, index) for index in partitions]
        return [None if got is None else (LeaderIsr.decode(path, got[0]), int(got[1].version))
                for path, got in zip(paths, await self.get_many(paths), strict=True)]

    async def create_partition_state(self, topic: str, partition: int, state: LeaderIsr,
                                     controller_epoch_version: int) -> int:
        """Create the state znode, only while the controller epoch is still ours; its version (0)."""
        path = state_path(topic, partition)
        await self.ensure_path(f"/brokers/topics/{topic}/partitions/{partition}")
        try:
            await self._commit(lambda t: (t.check("/controller_epoch", controller_epoch_version),
                                          t.create(path, state.encode())))
            return 0
        except StaleState:
            found = await self.partition_state(topic, partition)
            if found is None:
                raise
            return await self.update_partition_state(topic, partition, state, found[1], controller_epoch_version)

    async def create_partition_states(self, states: Mapping[tuple[str, int], LeaderIsr],
                                      controller_epoch_version: int) -> dict[tuple[str, int], int]:
        """Create many partitions' state znodes (and their parents), only while the controller
        epoch is still ours: in transactions of up to PARTITIONS_PER_TRANSACTION partitions, each
        one ZooKeeper commit where one a znode took three. Their versions. A transaction that
        finds a znode there already (a controller before this one got part way) is done one
        partition at a time, as ``create_partition_state`` does."""
        wanted = sorted(states)
        # Which parents exist, asked all at once: reads are not committed, and kazoo pipelines them.
        # A topic without /partitions (each new one) has none of its partitions' znodes either.
        topics = sorted({topic for topic, _ in wanted})
        tops = [f"/brokers/topics/{topic}/partitions" for topic in topics]
        found = await asyncio.gather(*(self.exists(path) for path in tops))
        missing = {path for path, stat in zip(tops, found, strict=True) if stat is None}
        parents = [f"/brokers/topics/{topic}/partitions/{index}" for topic, index in wanted]
        missing |= {path for path in parents if path.rsplit("/", 1)[0] in missing}
        unknown = [path for path in parents if path not in missing]
        found = await asyncio.gather(*(self.exists(path) for path in unknown))
        missing |= {path for path, stat in zip(unknown, found, strict=True) if stat is None}
        versions: dict[tuple[str, int], int] = {}
        for start in range(0, len(wanted), PARTITIONS_PER_TRANSACTION):
            chunk = wanted[start:start + PARTITIONS_PER_TRANSACTION]

            def ops(t: Any, chunk: list[tuple[str, int]] = chunk) -> None:
                t.check("/controller_epoch", controller_epoch_version)
                for topic, index in chunk:
                    for parent in (f"/brokers/topics/{topic}/partitions", f"/brokers/topics/{topic}/partitions/{index}"):
                        if parent in missing:
                            missing.discard(parent)
                            t.create(parent)
                    t.create(state_path(topic, index), states[(topic, index)].encode())
            try:
                await self._commit(ops)
                versions.update(dict.fromkeys(chunk, 0))
            except StaleState:
                for topic, index in chunk:
                    versions[(topic, index)] = await self.create_partition_state(
                        topic, index, states[(topic, index)], controller_epoch_version)
        return versions

    async def update_partition_state(self, topic: str, partition: int, state: LeaderIsr, version: int,
                                     controller_epoch_version: int,
                                     assignment: TopicAssignment | None = None) -> int:
        """The controller's replacement of a partition's state, if it is still at ``version`` and
        the controller epoch still ours (with ``assignment``, the topic's new replicas in the same
        transaction); the new version. StaleState otherwise."""
        def ops(t: Any) -> None:
            t.check("/controller_epoch", controller_epoch_version)
            t.set_data(state_path(topic, partition), state.encode(), version)
            if assignment is not None:
                t.set_data(topic_path(topic), assignment.encode())
        await self._commit(ops)
        return version + 1

    async def update_partition_states(self, updates: Mapping[tuple[str, int], tuple[LeaderIsr, int]],
                                      controller_epoch_version: int
                                      ) -> tuple[dict[tuple[str, int], int], list[tuple[str, int]]]:
        """The controller's replacement of many partitions' states, each given with the version
        it was read at, while the controller epoch is still ours: in transactions of up to
        PARTITIONS_PER_TRANSACTION partitions, each one ZooKeeper commit (one fsync to wait for)
        where a partition took one. The new versions of the states written, and the partitions
        of the transactions that wrote nothing because one of their states changed since it was
        read (or the controller epoch moved on)."""
        wanted = sorted(updates)
        versions: dict[tuple[str, int], int] = {}
        lost: list[tuple[str, int]] = []
        for start in range(0, len(wanted), PARTITIONS_PER_TRANSACTION):
            chunk = wanted[start:start + PARTITIONS_PER_TRANSACTION]

            def ops(t: Any, chunk: list[tuple[str, int]] = chunk) -> None:
                t.check("/controller_epoch", controller_epoch_version)
                for topic, index in chunk:
                    state, version = updates[(topic, index)]
                    t.set_data(state_path(topic, index), state.encode(), version)
            try:
                await self._commit(ops)
            except StaleState:
                lost += chunk
                continue
            versions.update({tp: updates[tp][1] + 1 for tp in chunk})
        return versions, lost

    async def topics_to_delete(self, watch: Watch | None = None) -> list[str]:
        return await self.children("/admin/delete_topics", watch)

    async def mark_topic_for_deletion(self, topic: str) -> None:
        try:
            await self.create(f"/admin/delete_topics/{topic}")
        except NodeExistsError:
            pass

    async def delete_topic_znodes(self, topic: str, controller_epoch_version: int) -> None:
        """The controller's last step of a topic deletion, only while the controller epoch is ours."""
        await self.delete_tree(topic_path(topic), controller_epoch_version)
        for path in (f"/config/topics/{topic}", f"/admin/delete_topics/{topic}"):
            await self.delete(path, recursive=True, controller_epoch_version=controller_epoch_version)

    async def delete_tree(self, path: str, controller_epoch_version: int) -> None:
        """Delete ``path`` and all under it while the controller epoch is ours: the tree read a
        level at a time (each level's children asked at once), then deleted deepest first in
        transactions of up to DELETES_PER_TRANSACTION znodes, each one ZooKeeper commit where a
        znode took one (a topic of 100 partitions has 203; one at a time, a deletion of 30 such
        topics held the controller 15 s). A tree that changed meanwhile (a transaction finds a
        znode gone or added) is left to ``delete``, znode by znode."""
        levels = [[path]]
        while levels[-1]:
            found = await asyncio.gather(*(self.children(parent) for parent in levels[-1]))
            levels.append([f"{parent}/{child}" for parent, kids in zip(levels[-1], found, strict=True)
                           for child in kids])
        doomed = [znode for level in reversed(levels) for znode in level]
        for start in range(0, len(doomed), DELETES_PER_TRANSACTION):
            def ops(t: Any, chunk: list[str] = doomed[start:start + DELETES_PER_TRANSACTION]) -> None:
                t.check("/controller_epoch", controller_epoch_version)
                for znode in chunk:
                    t.delete(znode)
            try:
                await self._commit(ops)
            except (StaleState, NotEmptyError):
                await self.delete(path, recursive=True, controller_epoch_version=controller_epoch_version)
                return

    # -- notifications -------------------------------------------------------------------------
    async def update_isr(self, topic: str, partition: int, state: LeaderIsr, version: int) -> int:
        """A leader's ISR change: the partition's new state, if it is still at ``version``, and the
        isr_change_notification that tells the controller, in one transaction: a leader that dies
        in between cannot leave the one without the other, and the write is one ZooKeeper commit
        to wait for, not two (each waits on ZooKeeper's fsync, slow while the disk writes back a
        replica's segments). The new version; StaleState if the state changed."""
        await self._commit(lambda t: (
            t.set_data(state_path(topic, partition), state.encode(), version),
            t.create(f"/isr_change_notification/{ISR_CHANGE_PREFIX}", isr_change_notification([(topic, partition)]),
                     sequence=True)))
        return version + 1

    async def isr_change_notifications(self, watch: Watch | None = None) -> list[tuple[str, list[tuple[str, int]]]]:
        found = []
        for child in await self.children("/isr_change_notification", watch):
            path = f"/isr_change_notification/{child}"
            got = await self.get(path)
            if got is None:
                continue
            try:
                doc = _load(path, got[0])
                found.append((path, [(str(p["topic"]), int(p["partition"])) for p in doc.get("partitions", [])]))
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("ignoring unreadable ISR change notification %s: %s", path, exc)
                found.append((path, []))
        return found

    async def notify_log_dir_failure(self, broker_id: int) -> str:
        """Tell the controller a log dir of ``broker_id`` failed (Kafka's LogDirFailure event);
        the notification's path, which the controller deletes once it has read it."""
        return str(await self.create(f"/log_dir_event_notification/{LOG_DIR_EVENT_PREFIX}", _json(
            {"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT}), sequence=True))

    async def log_dir_failure_notifications(self, watch: Watch | None = None) -> list[tuple[str, int | None]]:
        """(path, broker id) of every log dir event notification; None for an unreadable one."""
        found: list[tuple[str, int | None]] = []
        for child in await self.children("/log_dir_event_notification", watch):
            path = f"/log_dir_event_notification/{child}"
            got = await self.get(path)
            if got is None:
                continue
            try:
                found.append((path, int(_load(path, got[0])["broker"])))
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("ignoring unreadable log dir event notification %s: %s", path, exc)
                found.append((path, None))
        return found

    async def delete_notification(self, path: str, controller_epoch_version: int) -> None:
        """Delete a notification the controller handled, if the controller epoch is still the
        one at ``controller_epoch_version``: a controller that lost its place must not take a
        notification away from its successor. StaleState if the epoch moved on; a notification
        already gone is no error."""
        await self.delete(path, controller_epoch_version=controller_epoch_version)

    async def delete_notifications(self, paths: Sequence[str], controller_epoch_version: int) -> None:
        """Delete the notifications the controller handled, fenced as ``delete_notification`` is,
        in one transaction: one ZooKeeper commit (one fsync of its log) for a wave of ISR changes
        rather than one each, which under a loaded disk held the controller's next event for
        seconds. If one is gone already the transaction fails whole: then one at a time."""
        if not paths:
            return
        transaction = self.client.transaction()
        transaction.check("/controller_epoch", controller_epoch_version)
        for path in paths:
            transaction.delete(path)
        epoch_check, *deletions = await self._call(transaction.commit_async())
        if isinstance(epoch_check, (BadVersionError, NoNodeError)):
            raise StaleState("the controller epoch moved on")
        if any(isinstance(result, NoNodeError) for result in deletions):
            for path in paths:
                await self.delete_notification(path, controller_epoch_version)
            return
        for result in deletions:
            if isinstance(result, Exception) and not isinstance(result, RolledBackError):
                raise result

    # -- configs ---------------------------------------------------------------------------------
    async def entity_configs(self, entity_type: str, name: str) -> dict[str, str] | None:
        """/config/{topics,brokers,users,clients}/name's configs; None if there is no such znode."""
        path = f"/config/{entity_type}/{name}"
        got = await self.get(path)
        if got is None:
            return None
        if not got[0]:  # a parent made on the way to a child's znode (/config/users/<user>/clients/...)
            return {}
        return {str(k): str(v) for k, v in (_load(path, got[0]).get("config") or {}).items()}

    async def set_entity_configs(self, entity_type: str, name: str, configs: Mapping[str, str]) -> None:
        path = f"/config/{entity_type}/{name}"
        data = _json({"version": 1, "config": dict(configs)})
        try:
            await self.set(path, data)
        except NoNodeError:
            await self.create(path, data, makepath=True)
        await self.create(f"/config/changes/{CONFIG_CHANGE_PREFIX}",
                          _json({"version": 2, "entity_path": f"{entity_type}/{name}"}), sequence=True)

    async def config_changes(self, watch: Watch | None = None, seen: Collection[str] = ()
                             ) -> list[tuple[str, str]]:
        """(notification name, entity path such as "topics/orders") in order, of the
        notifications not in ``seen``."""
        found = []
        for child in await self.children("/config/changes", watch):
            if child in seen:
                continue
            got = await self.get(f"/config/changes/{child}")
            if got is not None:
                try:
                    found.append((child, str(_load(child, got[0])["entity_path"])))
                except (ValueError, KeyError):
                    continue
        return found

    # -- producer ids --------------------------------------------------------------------------------
    async def allocate_producer_ids(self, broker_id: int) -> range:
        """The next block of PRODUCER_ID_BLOCK_SIZE producer ids, claimed with a conditional write."""
        path = "/latest_producer_id_block"
        while True:
            got = await self.get(path)
            # Kafka's brokers create the znode empty at startup: no block was handed out yet.
            if got is None or not got[0]:
                start = 0
            else:
                start = int(_load(path, got[0])["block_end"]) + 1
            end = start + PRODUCER_ID_BLOCK_SIZE - 1
            data = _json({"version": 1, "broker": broker_id, "block_start": str(start), "block_end": str(end)})
            try:
                if got is None:
                    await self.create(path, data)
                else:
                    await self.set(path, data, got[1].version)
                return range(start, end + 1)
            except (StaleState, NodeExistsError):
                continue


class _LoopWatch:
    """A watch as kazoo holds it: a znode event calls ``watch`` on the loop, a session event
    (kazoo forgot the watch) hands it to ``on_session_event``. Equal for the same ``watch``, so
    that a watch set again before kazoo fired it is held once, not once per setting."""

    __slots__ = ("watch", "loop", "on_session_event")

    def __init__(self, watch: Watch, loop: asyncio.AbstractEventLoop,
                 on_session_event: Callable[[Watch], None]) -> None:
        self.watch, self.loop, self.on_session_event = watch, loop, on_session_event

    def __call__(self, event: Any) -> None:
        if event.type == EventType.NONE:
            self.loop.call_soon_threadsafe(self.on_session_event, self.watch)
        else:
            self.loop.call_soon_threadsafe(self.watch)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _LoopWatch) and other.watch == self.watch

    def __hash__(self) -> int:
        return hash(self.watch)


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)
