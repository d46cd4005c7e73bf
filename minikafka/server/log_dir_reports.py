"""What a cluster broker tells the controller about its log dirs (KIP-112, KIP-858).

``LogDirReports`` owns two reports and their retries:

* where each hosted replica lives: every replica created, opened or moved is queued as a
  (partition, directory id) assignment and sent with AssignReplicasToDirs until the controller
  has recorded it (the ``QueuedReplicaToDirAssignments`` gauge counts the queue), so the
  controller knows which replicas a failed dir holds;
* a failed log dir: the broker's registration is rewritten with the dir offline and a
  /log_dir_event_notification is written; the controller deletes the notification once it has
  moved leadership off that dir, which is its acknowledgement. Until then both are retried;
  if no acknowledgement comes within log.dir.failure.timeout.ms the broker shuts down
  (cleanly), as KIP-858 asks: the only other way for partitions it led there to get a new
  leader.

Event-loop thread only; the Broker creates it when it joins the cluster and stops it.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from prometheus_client import Gauge

from minikafka.net.client import BrokerClient
from minikafka.replica.partition import Partition
from minikafka.replica.replica_manager import TopicPartition
from minikafka.server.cluster_membership import ClusterMembership
from minikafka.storage.log_manager import LogManager
from minikafka.zk.kafka_zk import LogDirState
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

ASSIGN_REPLICAS_TO_DIRS, ASSIGN_REPLICAS_TO_DIRS_VERSION = 73, 0
API_VERSIONS = 18
RETRY_BACKOFF_S = 0.5
# How often a controller that does not serve AssignReplicasToDirs is asked again (one ApiVersions):
# it may be replaced, at the same address, by one that does (a broker rolled to minikafka).
UNSERVED_RECHECK_S = 30.0
REQUEST_TIMEOUT_S = 10.0
# The partition is gone or not this broker's any more: there is nothing to record.
FINAL_ERRORS = frozenset({ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.NOT_LEADER_OR_FOLLOWER})

QUEUED_ASSIGNMENTS = Gauge(
    "kafka_server_KafkaServer_QueuedReplicaToDirAssignments",
    "Replicas whose log dir the controller has not recorded yet (queued for AssignReplicasToDirs)")


class ControllerWithoutDirAssignments(Exception):
    """The controller does not serve AssignReplicasToDirs: an Apache Kafka broker in ZooKeeper
    mode, whose brokers never send it (its controller does not track replicas by dir)."""


def log_dir_states(log_manager: LogManager, directory_ids: Mapping[str, uuid.UUID]) -> tuple[LogDirState, ...]:
    """Each log dir with its directory id (``directory_ids``: as opened at startup) and whether it
    is online: what the broker's registration carries (KIP-858)."""
    channel = log_manager.failure_channel
    return tuple(LogDirState(path, directory_ids.get(path), not channel.is_offline(path))
                 for path in log_manager.log_dirs)


class LogDirReports:
    def __init__(self, membership: ClusterMembership, log_manager: LogManager, failure_timeout_ms: int,
                 controller_address: Callable[[], tuple[str, int] | None], shut_down: Callable[[str], None]) -> None:
        self.membership = membership
        self.log_manager = log_manager
        self.failure_timeout_ms = failure_timeout_ms
        self.controller_address = controller_address
        self.shut_down = shut_down
        # Directory ids as opened at startup: a dir keeps its id in reports after it failed.
        self.directory_ids: dict[str, uuid.UUID] = dict(log_manager.directory_ids)
        self.queued: dict[TopicPartition, tuple[uuid.UUID, uuid.UUID]] = {}  # -> (topic id, directory id)
        self.recorded: dict[TopicPartition, uuid.UUID] = {}  # what the controller acknowledged
        self._wake = asyncio.Event()
        self._unserved_by: str | None = None  # the controller address that said it does not serve them
        self._tasks: set[asyncio.Task[None]] = set()
        QUEUED_ASSIGNMENTS.set_function(lambda: len(self.queued))

    def log_dir_states(self) -> tuple[LogDirState, ...]:
        return log_dir_states(self.log_manager, self.directory_ids)

    def start(self) -> None:
        self._spawn(self._send_assignments)

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _spawn(self, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
        task = asyncio.get_running_loop().create_task(work())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ---- where replicas live ------------------------------------------------------------
    def replica_placed(self, partition: Partition) -> None:
        """The ReplicaManager's hook: ``partition`` is served from ``partition.log`` now."""
        key = (partition.topic, partition.index)
        directory = self.log_manager.directory_ids.get(partition.log.log_dir)
        if directory is None or (self.recorded.get(key) == directory and key not in self.queued):
            return
        self.queued[key] = (partition.topic_id, directory)
        self._wake.set()

    async def _send_assignments(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self.queued:
                batch = dict(self.queued)
                backoff = RETRY_BACKOFF_S
                try:
                    answered = await self._assign(batch)
                except ControllerWithoutDirAssignments as exc:
                    if self._unserved_by is None:
                        log.warning(
                            "the controller at %s does not serve AssignReplicasToDirs: it is an Apache Kafka broker "
                            "in ZooKeeper mode, which does not record which log dir holds each replica. While it is "
                            "controller, KIP-858's detection of a replaced disk is off (a failed dir is still "
                            "reported); %d replica(s) wait, and it is asked again every %.0f s", exc,
                            len(self.queued), UNSERVED_RECHECK_S)
                    self._unserved_by = str(exc)
                    answered, backoff = {}, UNSERVED_RECHECK_S
                except Exception as exc:  # the controller unreachable, moving, or failing: later
                    log.debug("AssignReplicasToDirs failed (%s); retrying", exc)
                    answered = {}
                else:
                    if self._unserved_by is not None:
                        log.info("the controller records which log dir holds each replica again; "
                                 "replaced-disk detection (KIP-858) is on")
                        self._unserved_by = None
                for key, error in answered.items():
                    if self.queued.get(key) != batch[key]:
                        continue  # placed again meanwhile: send the newer one
                    if error == ErrorCode.NONE:
                        self.recorded[key] = batch[key][1]
                        del self.queued[key]
                    elif error in FINAL_ERRORS:
                        del self.queued[key]
                if self.queued:
                    await asyncio.sleep(backoff)

    async def _assign(self, batch: dict[TopicPartition, tuple[uuid.UUID, uuid.UUID]]) -> dict[TopicPartition, ErrorCode]:
        """Send the assignments to the controller; the answer per partition (empty: try later)."""
        membership = self.membership
        keys = {(topic_id, key[1]): key for key, (topic_id, _) in batch.items()}
        assignments = [(topic_id, key[1], directory) for key, (topic_id, directory) in batch.items()]
        controller = membership.controller
        if controller.active:
            error, results = await controller.assign_replicas_to_dirs(membership.broker_id, membership.broker_epoch,
                                                                      assignments)
            return {} if error != ErrorCode.NONE else {keys[k]: e for k, e in results.items() if k in keys}
        address = self.controller_address()
        if address is None:
            return {}
        by_dir: dict[uuid.UUID, dict[uuid.UUID, list[int]]] = {}
        for topic_id, index, directory in assignments:
            by_dir.setdefault(directory, {}).setdefault(topic_id, []).append(index)
        client = BrokerClient(*address, client_id=f"broker-{membership.broker_id}", security=membership.security)
        try:
            versions = await client.request(API_VERSIONS, 0, {}, REQUEST_TIMEOUT_S)
            if not any(v.api_key == ASSIGN_REPLICAS_TO_DIRS and v.min_version <= ASSIGN_REPLICAS_TO_DIRS_VERSION
                       <= v.max_version for v in versions.api_keys):
                raise ControllerWithoutDirAssignments(client.address)
            response = await client.request(ASSIGN_REPLICAS_TO_DIRS, ASSIGN_REPLICAS_TO_DIRS_VERSION, {
                "broker_id": membership.broker_id, "broker_epoch": membership.broker_epoch,
                "directories": [{"id": directory, "topics": [
                    {"topic_id": topic_id, "partitions": [{"partition_index": i} for i in indexes]}
                    for topic_id, indexes in topics.items()]} for directory, topics in by_dir.items()]},
                REQUEST_TIMEOUT_S)
        finally:
            client.close()
        if response.error_code == ErrorCode.UNSUPPORTED_VERSION:
            raise ControllerWithoutDirAssignments(client.address)
        if response.error_code != ErrorCode.NONE:
            return {}
        return {keys[(topic.topic_id, p.partition_index)]: ErrorCode(p.error_code)
                for directory in response.directories for topic in directory.topics for p in topic.partitions
                if (topic.topic_id, p.partition_index) in keys}

    # ---- failed dirs ----------------------------------------------------------------------
    def dir_failed(self, log_dir: str, replicas: list[TopicPartition], led: list[TopicPartition]) -> None:
        """``log_dir`` failed, taking ``replicas`` offline (``led`` of them led here): tell the controller."""
        for key in replicas:
            self.queued.pop(key, None)
            self.recorded.pop(key, None)
        self._spawn(lambda: self._report_failure(log_dir, led))

    async def _report_failure(self, log_dir: str, led: list[TopicPartition]) -> None:
        # A deadline around the whole report: while ZooKeeper is away, kazoo holds requests
        # until it reconnects, so no single call can be trusted to come back in time.
        try:
            await asyncio.wait_for(self._until_acknowledged(log_dir), self.failure_timeout_ms / 1000)
            return
        except TimeoutError:
            pass
        led_text = (f"; it led {len(led)} replica(s) there ({', '.join(f'{t}-{p}' for t, p in sorted(led))})"
                    if led else "")
        log.critical("the controller has not acknowledged the failure of log dir %s within "
                     "log.dir.failure.timeout.ms=%d%s; shutting down so that other brokers take over",
                     log_dir, self.failure_timeout_ms, led_text)
        self.shut_down(f"log dir {log_dir} failed and the controller could not be told")

    async def _until_acknowledged(self, log_dir: str) -> None:
        """Register the dir offline and notify the controller, then wait until it deleted the
        notification; ZooKeeper errors are retried."""
        zk = self.membership.zk
        notification: str | None = None
        attempts = 0
        while True:
            try:
                if notification is None:
                    await self.membership.update_log_dirs(self.log_dir_states())
                    notification = await zk.notify_log_dir_failure(self.membership.broker_id)
                    log.info("told the controller that log dir %s failed; waiting for it to move leadership off it",
                             log_dir)
                if await zk.exists(notification) is None:
                    log.info("the controller acknowledged the failure of log dir %s", log_dir)
                    return
            except Exception as exc:  # ZooKeeper unreachable: keep trying until the deadline
                attempts += 1
                if attempts == 1 or attempts % 20 == 0:
                    log.warning("cannot tell the controller that log dir %s failed (%s: %s); retrying",
                                log_dir, type(exc).__name__, exc)
            await asyncio.sleep(RETRY_BACKOFF_S)
