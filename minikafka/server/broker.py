"""The broker process: wires storage, replicas, controller and listener together.

``Broker`` owns the lifecycle: start (log dirs, metadata, partitions, listener, metrics,
background tasks) and a clean stop (flush, checkpoints, clean-shutdown marker).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import socket
from typing import Any

import prometheus_client

from minikafka.config import BrokerConfig
from minikafka.controller.embedded import EmbeddedController
from minikafka.controller.metadata_store import LocalMetadataStore
from minikafka.controller.topics import INTERNAL_TOPICS
from minikafka.group.coordinator import CoordinatorConfig, GroupCoordinator, LoopScheduler
from minikafka.group.offsets_topic import OffsetsTopic
from minikafka.metadata_cache import MetadataCache
from minikafka.replica.log_dir_failure import LogDirFailureHandler
from minikafka.replica.log_dir_mover import LogDirMover
from minikafka.replica.replica_manager import ReplicaManager, now_ms
from minikafka.server.connection import Connection, UnhandledApi
from minikafka.server.context import BrokerContext
from minikafka.server.handlers import HANDLERS
from minikafka.storage.errors import (
    InconsistentMetadataError,
    KafkaStorageError,
    LogDirLockedError,
    NoLiveLogDirError,
)
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.log_manager import LogManager, check_log_dirs
from minikafka.topic_config import log_config_for
from protocol import Request

log = logging.getLogger(__name__)


class BrokerStartupError(Exception):
    """The broker cannot start; the message says why in words an operator understands."""


class Broker:
    """One broker process. Runs on one asyncio event loop; nothing here is thread-safe."""

    def __init__(self, config: BrokerConfig) -> None:
        if not config.embedded:
            raise BrokerStartupError("cluster mode (zookeeper.connect) is not available yet; remove zookeeper.connect")
        self.config = config
        self.failure_channel = LogDirFailureChannel()
        self.log_dirs = [os.path.abspath(d) for d in config.log_dirs]
        self._server_socket: socket.socket | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._background: list[asyncio.Task[None]] = []
        self._metrics_server: Any = None
        self.port = 0
        self.listener_name = config.listeners()[0].name

    async def start(self) -> None:
        self._create_dirs()
        self.store = LocalMetadataStore(self.log_dirs, self.failure_channel, self.config["cluster.id"])
        self.store.load()
        self.log_manager = LogManager(self.log_dirs, self.config.broker_id, self.store.cluster_id,
                                      log_config_for({}, self.config), self.failure_channel,
                                      min_free_bytes=self.config["log.dir.min.free.bytes"])
        try:
            self.log_manager.startup()
        except (NoLiveLogDirError, InconsistentMetadataError, LogDirLockedError) as exc:
            raise BrokerStartupError(str(exc)) from None
        self.replica_manager = ReplicaManager(self.config.broker_id, self.log_manager)
        self.metadata = MetadataCache(self.store.cluster_id)
        self.controller = EmbeddedController(self.config, self.store, self.replica_manager, self.metadata)
        self.controller.startup()
        self.mover = self._create_mover()
        self.dir_failures = LogDirFailureHandler(
            self.log_manager, self.replica_manager, self.failure_channel,
            on_replicas_offline=self.controller.replicas_offline,
            on_no_live_dir=_halt,
            cancel_moves=self.mover.cancel_moves_involving,
            check_interval_ms=self.config["log.dir.check.interval.ms"],
            min_free_bytes=lambda: self.log_manager.min_free_bytes,
        )
        self.dir_failures.start()
        self.mover.start()
        self.group_coordinator = self._start_group_coordinator()
        self._listen()
        host, port = self.config.advertised_listener(self.port)
        self.controller.serving_on({self.listener_name: (host, port)})
        self.context = BrokerContext(self.config, self.controller, self.metadata, self.replica_manager,
                                     self.log_manager, host, port, frozenset(HANDLERS), groups=self.group_coordinator,
                                     mover=self.mover)
        self._start_metrics()
        loop = asyncio.get_running_loop()
        self._background = [
            loop.create_task(self._every(self.config["log.flush.offset.checkpoint.interval.ms"],
                                         self.log_manager.checkpoint)),
            loop.create_task(self._every(self.config["log.retention.check.interval.ms"],
                                         lambda: self.log_manager.run_retention(now_ms()))),
            loop.create_task(self._every(self.config["offsets.retention.check.interval.ms"],
                                         self.group_coordinator.expire_offsets)),
            loop.create_task(self._accept_loop()),
        ]
        log.info("minikafka broker %d (cluster %s) serving on %s:%d with log dirs %s",
                 self.config.broker_id, self.store.cluster_id, host, self.port, ", ".join(self.log_dirs))

    def _create_mover(self) -> LogDirMover:
        """The movers of replicas between log dirs, their throttle following the dynamic config."""
        throttle_key = "replica.alter.log.dirs.io.max.bytes.per.second"
        mover = LogDirMover(self.log_manager, self.replica_manager, self.failure_channel,
                            threads=self.config["num.replica.alter.log.dirs.threads"],
                            bytes_per_second=self.config[throttle_key])
        self.config.on_change(throttle_key, lambda _key, rate: mover.throttle.set_rate(rate))
        return mover

    def _create_dirs(self) -> None:
        """Skip (report) every unusable log dir; refuse to start when none is left."""
        bad = check_log_dirs(self.log_dirs, self.failure_channel)
        if len(bad) == len(self.log_dirs):
            raise BrokerStartupError("no log dir can be used: " + "; ".join(
                f"{log_dir}: {why}" for log_dir, why in bad.items()))

    def _start_group_coordinator(self) -> GroupCoordinator:
        """The coordinator of every group, loaded from __consumer_offsets before clients connect."""
        self.replica_manager.internal_topics = INTERNAL_TOPICS
        self.replica_manager.metadata = self.metadata
        store = OffsetsTopic(self.replica_manager, self.metadata, self.config["offsets.topic.num.partitions"])
        coordinator = GroupCoordinator(CoordinatorConfig.from_broker(self.config), store, LoopScheduler())
        coordinator.load()
        self.failure_channel.add_listener(coordinator.on_log_dir_failure)
        log.info("group coordinator loaded %d group(s)", len(coordinator.groups))
        return coordinator

    def _listen(self) -> None:
        host, port = self.config.listener()
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host or "0.0.0.0", port))
        except OSError as exc:
            sock.close()
            raise BrokerStartupError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
        sock.listen(1024)
        sock.setblocking(False)
        self._server_socket = sock
        self.port = sock.getsockname()[1]

    def _start_metrics(self) -> None:
        port = self.config["metrics.port"]
        if port < 0:
            return
        host = self.config["metrics.host"]
        try:
            self._metrics_server, _ = prometheus_client.start_http_server(port, addr=host)
        except OSError as exc:
            raise BrokerStartupError(f"cannot serve metrics on port {port}: {exc.strerror}") from None
        url_host = f"[{host}]" if ":" in host else host
        log.info("Prometheus metrics on http://%s:%d/metrics", url_host, self._metrics_server.server_port)

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._server_socket is not None
        while True:
            client, address = await loop.sock_accept(self._server_socket)
            client.setblocking(False)
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            connection = Connection(client, f"{address[0]}:{address[1]}", self._dispatcher_for(address[0]),
                                    self.config["socket.request.max.bytes"], self.config["queued.max.requests"])
            task = loop.create_task(connection.serve())
            self._connections.add(task)
            task.add_done_callback(self._connections.discard)

    def _dispatcher_for(self, client_host: str) -> Any:
        """A dispatch function whose handlers see the connection's client address."""
        context = dataclasses.replace(self.context, client_host=client_host, listener_name=self.listener_name)

        def dispatch(request: Request) -> Any:
            handler = HANDLERS.get(request.api_key)
            if handler is None:
                raise UnhandledApi(f"api key {request.api_key} is not served by this broker")
            return handler(request, context)

        return dispatch

    async def _every(self, interval_ms: int, action: Any) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                action()
            except KafkaStorageError as exc:
                log.error("background task failed on a log dir: %s", exc)

    async def stop(self) -> None:
        log.info("broker %d shutting down", self.config.broker_id)
        for task in self._background:
            task.cancel()
        if self._server_socket is not None:
            self._server_socket.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._background, *self._connections, return_exceptions=True)
        self.group_coordinator.shutdown()
        await self.dir_failures.stop()
        await self.mover.stop()
        self.log_manager.shutdown()
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
        log.info("broker %d stopped cleanly", self.config.broker_id)


def _halt() -> None:
    """Exit at once with status 1, as Kafka halts when its last log dir fails: nothing is left
    to serve and a clean shutdown would only write to dirs that are gone."""
    logging.shutdown()
    os._exit(1)
