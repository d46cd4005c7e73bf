"""The broker process: wires storage, replicas, controller and listener together.

``Broker`` owns the lifecycle: start (log dirs, metadata, partitions, listener, metrics,
background tasks) and a clean stop (flush, checkpoints, clean-shutdown marker).
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import logging
import os
import socket
import uuid
from collections.abc import Callable
from typing import Any

import prometheus_client

from minikafka.config.broker import BrokerConfig
from minikafka.controller.api import ClusterControl
from minikafka.controller.embedded import EmbeddedController
from minikafka.controller.zk_admin import ZkClusterAdmin
from minikafka.coordinator.topic import CoordinatorTopic
from minikafka.group.consumer_group import ConsumerGroupConfig, TopicInfo
from minikafka.group.coordinator import CoordinatorConfig, GroupCoordinator
from minikafka.group.membership import LoopScheduler
from minikafka.metadata.cache import MetadataCache
from minikafka.metadata.store import LocalMetadataStore
from minikafka.metadata.topics import INTERNAL_TOPICS, OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from minikafka.net.accept import open_connection
from minikafka.net.client import BrokerClient, BrokerConnections
from minikafka.net.streams import TlsHandshakeFailed
from minikafka.quota.entity import QuotaEntity
from minikafka.quota.manager import REQUEST_QUOTA_EXEMPT, ClientQuotas
from minikafka.quota.store import EmbeddedQuotaStore, QuotaStore, ZkQuotaStore
from minikafka.replica.dir_balancer import BalancerSettings, DirBalancer
from minikafka.replica.fetcher import FetcherConfig, ReplicaFetcherManager
from minikafka.replica.leadership import Leadership
from minikafka.replica.log_dir_failure import LogDirFailureHandler
from minikafka.replica.log_dir_mover import LogDirMover
from minikafka.replica.partition import IsrProposal, Partition
from minikafka.replica.replica_manager import ReplicaManager, now_ms
from minikafka.replica.replica_selector import replica_selector
from minikafka.replica.replication_quota import ReplicationThrottle
from minikafka.replica.topic_config import log_config_for
from minikafka.security.manager import BrokerSecurity, OpenFailed
from minikafka.security.session import Session
from minikafka.security.stores import EmbeddedSecurityStore, SecurityStore, ZkSecurityStore
from minikafka.server.cluster_membership import ClusterMembership
from minikafka.server.connection import Connection, UnhandledApi
from minikafka.server.context import BrokerContext
from minikafka.server.controller_commands import ControllerCommands
from minikafka.server.handlers import HANDLERS
from minikafka.server.handlers.controller_requests import CONTROL_PLANE_APIS
from minikafka.server.log_dir_reports import LogDirReports, log_dir_states
from minikafka.server.metrics import export_catch_up
from minikafka.storage.background_io import BackgroundIo
from minikafka.storage.cleaner import CleanerConfig, LogCleaner
from minikafka.storage.errors import (
    InconsistentMetadataError,
    KafkaStorageError,
    LegacyMessageFormatError,
    LogDirLockedError,
    NoLiveLogDirError,
)
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.log_manager import LogManager, check_log_dirs
from minikafka.txn.coordinator import TransactionCoordinator, TxnCoordinatorConfig
from minikafka.txn.markers import TxnMarkerWriter
from minikafka.txn.verification import TxnVerifier
from minikafka.zk.kafka_zk import BrokerIdTaken, BrokerRegistration, KafkaZk, ZooKeeperUnavailable
from protocol import Request

log = logging.getLogger(__name__)


class BrokerStartupError(Exception):
    """The broker cannot start; the message says why in words an operator understands."""


class Broker:
    """One broker process. Runs on one asyncio event loop; nothing here is thread-safe."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.failure_channel = LogDirFailureChannel()
        self.log_dirs = [os.path.abspath(d) for d in config.log_dirs]
        self.listeners = config.listeners()
        self.inter_broker_listener = config.inter_broker_listener_name
        self._server_sockets: dict[str, socket.socket] = {}
        self._connections: set[asyncio.Task[None]] = set()
        self._open_connections: set[Connection] = set()
        self._background: list[asyncio.Task[None]] = []
        self._metrics_server: Any = None
        self.membership: ClusterMembership | None = None
        self.fetchers: ReplicaFetcherManager | None = None
        self.dir_reports: LogDirReports | None = None
        # Set when the broker decides to stop on its own (the process then stops as on SIGTERM).
        self.shutdown_requested = asyncio.Event()
        self.port = 0
        # A security setting that cannot be used (a key store, a JAAS config) is a ConfigError.
        self.security = BrokerSecurity(config)

    async def start(self) -> None:
        self._create_dirs()
        if self.config.embedded:
            self.store = LocalMetadataStore(self.log_dirs, self.failure_channel, self.config["cluster.id"])
            self.store.load()
            cluster_id = self.store.cluster_id
        else:
            cluster_id = await self._connect_zookeeper()
        self.log_manager = LogManager(self.log_dirs, self.config.broker_id, cluster_id,
                                      log_config_for({}, self.config), self.failure_channel,
                                      min_free_bytes=self.config["log.dir.min.free.bytes"],
                                      background=BackgroundIo(self.config["background.threads"]))
        try:
            self.log_manager.startup()
        except (NoLiveLogDirError, InconsistentMetadataError, LegacyMessageFormatError, LogDirLockedError) as exc:
            raise BrokerStartupError(str(exc)) from None
        self.metadata = MetadataCache(cluster_id)
        self.replica_manager = ReplicaManager(
            self.config.broker_id, self.log_manager, internal_topics=INTERNAL_TOPICS, metadata=self.metadata,
            replica_selector=replica_selector(self.config["replica.selector.class"]),
            rebuild_missing_replicas=not self.config.embedded,
            propose_isr=None if self.config.embedded else self._propose_isr,
            on_replica_placed=None if self.config.embedded else self._replica_placed)
        self._follow_replication_throttle_rates()
        if self.config.embedded:
            self.controller: ClusterControl = self._start_embedded_controller()
        else:
            self.controller = ZkClusterAdmin(self.config, self.zk, self.metadata, self._apply_broker_configs_soon,
                                             self.log_manager.preferred_log_dirs, self._producer_ids_from_controller)
        self.mover = self._create_mover()
        self.cleaner = self._create_cleaner()
        self.dir_failures = LogDirFailureHandler(
            self.log_manager, self.replica_manager, self.failure_channel,
            on_replicas_offline=self._replicas_offline,
            on_no_live_dir=_halt,
            cancel_moves=self.mover.cancel_moves_involving,
            check_interval_ms=self.config["log.dir.check.interval.ms"],
            min_free_bytes=lambda: self.log_manager.min_free_bytes,
        )
        self.dir_failures.start()
        self.mover.start()
        self.balancer = self._create_balancer()
        self.balancer.start()
        self.cleaner.start()
        self.group_coordinator = self._start_group_coordinator()
        security_store: SecurityStore = EmbeddedSecurityStore(self.store) if self.config.embedded \
            else ZkSecurityStore(self.zk)
        await self.security.start(security_store)
        self.quota_store: QuotaStore = EmbeddedQuotaStore(self.store) if self.config.embedded \
            else ZkQuotaStore(self.zk)
        self.quotas = ClientQuotas(self.config["quota.window.num"], self.config["quota.window.size.seconds"] * 1000)
        self.quotas.replace_all(await self.quota_store.all())
        # The transaction coordinator's connections to the other brokers (markers, verifications).
        self.txn_connections = BrokerConnections(self._inter_broker_client)
        self.txn_markers = TxnMarkerWriter(self.config.broker_id, self.replica_manager, self.metadata,
                                           self.group_coordinator, self.txn_connections)
        self.txn_coordinator = self._start_txn_coordinator()
        self.txn_verifier = TxnVerifier(self.config.broker_id, self.replica_manager, self.metadata,
                                        self.txn_coordinator, self.txn_connections,
                                        lambda: self.config["transaction.partition.verification.enable"])
        self._coordinators = {OFFSETS_TOPIC: self.group_coordinator.leadership_changed,
                              TRANSACTION_STATE_TOPIC: self.txn_coordinator.leadership_changed}
        self._listen()
        self._start_metrics()
        advertised = self._advertised()
        host, port = advertised[self.listeners[0].name][:2]
        commands = None
        if isinstance(self.controller, EmbeddedController):
            self.controller.serving_on({name: (h, p) for name, (h, p, _) in advertised.items()})
        else:
            commands = await self._join_cluster(advertised)
        handled = frozenset(HANDLERS) if commands is not None else frozenset(HANDLERS) - CLUSTER_ONLY_APIS
        self.context = BrokerContext(
            self.config, self.controller, self.metadata, self.replica_manager, self.log_manager, host, port, handled,
            groups=self.group_coordinator, txns=self.txn_coordinator, txn_markers=self.txn_markers,
            txn_verifier=self.txn_verifier,
            mover=self.mover, commands=commands,
            inter_broker_listener=self.inter_broker_listener,
            control_plane_listener=self.config.control_plane_listener_name,
            broker_epoch=lambda: self.membership.broker_epoch if self.membership is not None else -1,
            cluster_controller=self.membership.controller if self.membership is not None else None,
            security=self.security, session=Session(self.security.listeners[self.listeners[0].name], "",
                                                    self.security.authorizer, self.security.credential),
            quotas=self.quotas, quota_store=self.quota_store)
        loop = asyncio.get_running_loop()
        self._background = [
            loop.create_task(self._every(self.config["log.flush.offset.checkpoint.interval.ms"],
                                         self.log_manager.checkpoint)),
            loop.create_task(self._every(self.config["log.retention.check.interval.ms"],
                                         lambda: self.log_manager.run_retention(now_ms()))),
            loop.create_task(self._every(self.config["offsets.retention.check.interval.ms"],
                                         self.group_coordinator.expire_offsets)),
            *(loop.create_task(self._accept_loop(name)) for name in self._server_sockets),
        ]
        if commands is not None:
            lag = self.config["replica.lag.time.max.ms"]
            self._background.append(loop.create_task(self._every(
                max(lag // 2, 1), lambda: self.replica_manager.shrink_isrs(now_ms(), lag))))
            self._background.append(loop.create_task(self._every(
                CATCH_UP_EXPORT_MS, lambda: export_catch_up(self.replica_manager.catching_up()))))
        log.info("minikafka broker %d (cluster %s%s) serving on %s with log dirs %s", self.config.broker_id,
                 cluster_id, "" if self.config.embedded else f", ZooKeeper {self.config['zookeeper.connect']}",
                 ", ".join(f"{name}://{h}:{p}" for name, (h, p, _) in advertised.items()), ", ".join(self.log_dirs))

    def _start_embedded_controller(self) -> EmbeddedController:
        controller = EmbeddedController(self.config, self.store, self.replica_manager, self.metadata,
                                        Leadership(self.config, self.replica_manager))
        controller.startup()
        return controller

    async def _connect_zookeeper(self) -> str:
        """Connect to ZooKeeper (a clear error after zookeeper.connection.timeout.ms) and read, or
        create, the cluster id."""
        session = self.config["zookeeper.session.timeout.ms"]
        self.zk = KafkaZk(self.config["zookeeper.connect"], session,
                          self.config["zookeeper.connection.timeout.ms"] or session)
        try:
            await self.zk.start()
            return await self.zk.cluster_id(self.config["cluster.id"] or new_cluster_id())
        except ZooKeeperUnavailable as exc:
            raise BrokerStartupError(str(exc)) from None

    async def _join_cluster(self, advertised: dict[str, tuple[str, int, str]]) -> ControllerCommands:
        """Register in ZooKeeper, stand for controller, and take the controller's commands."""
        config = self.config
        inter = self.inter_broker_listener

        def endpoint_of(broker: int) -> tuple[str, int] | None:
            found = self.metadata.broker(broker, inter)
            return None if found is None else (found.host, found.port)

        self.fetchers = ReplicaFetcherManager(self.replica_manager, endpoint_of, FetcherConfig(
            broker_id=config.broker_id, fetch_max_wait_ms=config["replica.fetch.wait.max.ms"],
            fetch_min_bytes=config["replica.fetch.min.bytes"], partition_max_bytes=config["replica.fetch.max.bytes"],
            response_max_bytes=config["replica.fetch.response.max.bytes"],
            backoff_ms=config["replica.fetch.backoff.ms"], fetchers_per_leader=config["num.replica.fetchers"],
            security=self.security.client, fetch_version=config["inter.broker.protocol.version"].fetch_version,
            offset_for_leader_epoch_version=config["inter.broker.protocol.version"].offset_for_leader_epoch_version,
            broker_epoch=lambda: self.membership.broker_epoch if self.membership is not None else -1))
        leadership = Leadership(config, self.replica_manager, self.fetchers, self._coordinators)
        registration = BrokerRegistration(config.broker_id, advertised, config["broker.rack"] or None,
                                          log_dirs=log_dir_states(self.log_manager, self.log_manager.directory_ids))
        self.membership = ClusterMembership(
            config, self.zk, self.replica_manager, registration, inter, self.security.client,
            control_plane_security=self.security.control_plane_client,
            controller_endpoint=lambda: endpoint_of(self.metadata.controller_id),
            on_deleted_topics=leadership.delete_replicas_of_deleted_topics,
            on_user_changed=self.security.user_changed, on_new_session=self.security.new_session,
            on_quota_changed=self._quota_changed)
        self.dir_reports = LogDirReports(self.membership, self.log_manager, config["log.dir.failure.timeout.ms"],
                                         self.membership.controller_endpoint, self._shut_down)
        commands = ControllerCommands(config, leadership, self.metadata, self.group_coordinator,
                                      self.membership.topic_configs, self.membership.forget_topic_configs,
                                      self.membership.catch_up_configs)
        try:
            await self.membership.start()
        except BrokerIdTaken as exc:
            raise BrokerStartupError(str(exc)) from None
        # Users changed between the security store's first load and the membership's first look at
        # the config change notifications would be missed: read them all again (quotas alike).
        await self.security.reload()
        self.quotas.replace_all(await self.quota_store.all())
        self.dir_reports.start()
        return commands

    # The replica manager and the cluster admin exist before the membership that joins the cluster
    # (it needs them); what they ask of the cluster goes through these.
    def _propose_isr(self, partition: Partition, proposal: IsrProposal) -> None:
        assert self.membership is not None, "a partition led before the broker joined the cluster"
        self.membership.propose_isr(partition, proposal)

    def _replica_placed(self, partition: Partition) -> None:
        if self.dir_reports is not None:  # none placed before joining (LeaderAndIsr places them)
            self.dir_reports.replica_placed(partition)

    async def _producer_ids_from_controller(self) -> range:
        assert self.membership is not None, "producer ids asked for before the broker joined the cluster"
        return await self.membership.allocate_producer_ids()

    async def _quota_changed(self, entity_path: str) -> None:
        entity = QuotaEntity.from_path(entity_path)
        values = await self.quota_store.entity(entity)
        if values != self.quotas.entities().get(entity, {}):  # a user's SCRAM change leaves its quotas
            log.info("client quotas of %s are now %s", entity, values or "none")
        self.quotas.set_entity(entity, values)

    def _shut_down(self, reason: str) -> None:
        log.critical("broker %d is shutting down: %s", self.config.broker_id, reason)
        self.shutdown_requested.set()

    def _apply_broker_configs_soon(self) -> None:
        if self.membership is not None:
            self.membership.apply_broker_configs_soon()

    def _replicas_offline(self, log_dir: str, partitions: list[tuple[str, int]],
                          led: list[tuple[str, int]]) -> None:
        if isinstance(self.controller, EmbeddedController):
            self.controller.replicas_offline(partitions)
            return
        if self.fetchers is not None:
            self.fetchers.stop_following(partitions)
        for topic, index in partitions:
            if topic in self._coordinators:
                self._coordinators[topic](index, False)
        if self.dir_reports is not None:
            self.dir_reports.dir_failed(log_dir, partitions, led)

    def _create_mover(self) -> LogDirMover:
        """The movers of replicas between log dirs, their throttle following the dynamic config."""
        throttle_key = "replica.alter.log.dirs.io.max.bytes.per.second"
        mover = LogDirMover(self.log_manager, self.replica_manager, self.failure_channel,
                            threads=self.config["num.replica.alter.log.dirs.threads"],
                            bytes_per_second=self.config[throttle_key])
        self.config.on_change(throttle_key, lambda _key, rate: mover.throttle.set_rate(rate))
        return mover

    def _create_balancer(self) -> DirBalancer:
        """The disk balancer, woken when its settings change or a log dir fails."""
        config = self.config
        balancer = DirBalancer(self.log_manager, self.mover, lambda: BalancerSettings(
            config[BALANCER_ENABLE], config[BALANCER_THRESHOLD], config[BALANCER_INTERVAL]))
        for key in (BALANCER_ENABLE, BALANCER_THRESHOLD, BALANCER_INTERVAL):
            config.on_change(key, lambda _key, _value: balancer.wake())
        self.failure_channel.add_listener(lambda _dir, _cause: balancer.wake())
        return balancer

    def _create_cleaner(self) -> LogCleaner:
        """The log cleaner of the compacted logs, its throttle following the dynamic config."""
        cleaner = LogCleaner(self.log_manager, self.failure_channel, CleanerConfig.from_broker(self.config))
        self.config.on_change("log.cleaner.io.max.bytes.per.second",
                              lambda _key, rate: cleaner.throttle.set_rate(rate))
        return cleaner

    def _follow_replication_throttle_rates(self) -> None:
        """The replication throttles (KIP-73) at their configured rates, following dynamic changes."""
        throttles = self.replica_manager.replication_throttles
        for throttle, key in ((throttles.leader, "leader.replication.throttled.rate"),
                              (throttles.follower, "follower.replication.throttled.rate")):
            throttle.set_rate(self.config[key])
            self.config.on_change(key, _rate_setter(throttle))

    def _create_dirs(self) -> None:
        """Skip (report) every unusable log dir; refuse to start when none is left."""
        bad = check_log_dirs(self.log_dirs, self.failure_channel)
        if len(bad) == len(self.log_dirs):
            raise BrokerStartupError("no log dir can be used: " + "; ".join(
                f"{log_dir}: {why}" for log_dir, why in bad.items()))

    def _start_group_coordinator(self) -> GroupCoordinator:
        """The coordinator of the groups of the __consumer_offsets partitions this broker leads,
        loaded before clients connect."""
        store = CoordinatorTopic(self.replica_manager, self.metadata, OFFSETS_TOPIC,
                                 self.config["offsets.topic.num.partitions"])
        metadata = self.metadata
        coordinator = GroupCoordinator(CoordinatorConfig.from_broker(self.config), store, LoopScheduler(),
                                       ConsumerGroupConfig.from_broker(self.config),
                                       lambda: {name: TopicInfo(topic.topic_id, name, len(topic.partitions))
                                                for name, topic in metadata.topics().items()})
        coordinator.load()
        self.failure_channel.add_listener(coordinator.on_log_dir_failure)
        log.info("group coordinator loaded %d group(s)", len(coordinator.groups))
        return coordinator

    def _start_txn_coordinator(self) -> TransactionCoordinator:
        """The coordinator of the transactional ids of the __transaction_state partitions this
        broker leads (an embedded broker leads them all: they load now)."""
        config = self.config
        store = CoordinatorTopic(self.replica_manager, self.metadata, TRANSACTION_STATE_TOPIC,
                                 config["transaction.state.log.num.partitions"])
        coordinator = TransactionCoordinator(TxnCoordinatorConfig.from_broker(config), store, self.txn_markers,
                                             self.controller.next_producer_id)
        coordinator.start()
        if config.embedded and store.exists:
            for partition in range(store.partition_count):
                coordinator.leadership_changed(partition, True)
        return coordinator

    def _inter_broker_client(self, broker_id: int) -> BrokerClient | None:
        """A new connection to another broker's inter-broker listener (None: not known)."""
        found = self.metadata.broker(broker_id, self.inter_broker_listener)
        return None if found is None else BrokerClient(found.host, found.port, client_id=f"broker-{self.config.broker_id}",
                                                       security=self.security.client)

    def _listen(self) -> None:
        for spec in self.listeners:
            sock = socket.socket(socket.AF_INET6 if ":" in spec.host else socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((spec.host or "0.0.0.0", spec.port))
            except OSError as exc:
                sock.close()
                for opened in self._server_sockets.values():
                    opened.close()
                raise BrokerStartupError(f"cannot listen on {spec.name}://{spec.host}:{spec.port}: "
                                         f"{exc.strerror}") from None
            sock.listen(1024)
            sock.setblocking(False)
            self._server_sockets[spec.name] = sock
        self.port = self._server_sockets[self.listeners[0].name].getsockname()[1]

    def _advertised(self) -> dict[str, tuple[str, int, str]]:
        """listener name -> (host, port, security protocol) given to clients and other brokers."""
        bound = {name: sock.getsockname()[1] for name, sock in self._server_sockets.items()}
        return {e.name: (e.host, e.port, e.security_protocol) for e in self.config.advertised_listeners(bound)}

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

    async def _accept_loop(self, listener: str) -> None:
        loop = asyncio.get_running_loop()
        server = self._server_sockets[listener]
        while True:
            client, address = await loop.sock_accept(server)
            client.setblocking(False)
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            task = loop.create_task(self._serve(client, address[0], f"{address[0]}:{address[1]}", listener))
            self._connections.add(task)
            task.add_done_callback(self._connections.discard)

    async def _serve(self, client: socket.socket, client_host: str, peer: str, listener: str) -> None:
        """One accepted connection: its TLS handshake if any, then its requests."""
        try:
            stream, session = await open_connection(self.security, client, listener, client_host)
        except (TlsHandshakeFailed, OpenFailed) as exc:
            log.info("closing connection from %s on listener %s: %s", peer, listener, exc)
            return
        connection = Connection(stream, peer, self._dispatcher_for(session, listener),
                                self.config["socket.request.max.bytes"], self.config["queued.max.requests"])
        session.attach(connection)
        self._open_connections.add(connection)
        try:
            await connection.serve()
        finally:
            self._open_connections.discard(connection)

    async def _hand_over_leaderships(self, led: list[tuple[str, int]]) -> None:
        """After a controlled shutdown, wait (a bounded time) until the controller's LeaderAndIsr
        has made this broker a follower of the replicated partitions it ``led``, and its
        UpdateMetadata has named their new leaders: only then do the producers waiting on it get
        NOT_LEADER_OR_FOLLOWER with the new leader (KIP-951) and move on at once, not a hint
        naming this broker again."""
        def still_here(key: tuple[str, int]) -> bool:
            partition = self.replica_manager.partitions.get(key)
            if partition is not None and partition.is_leader:
                return len(partition.isr) > 1
            known = self.metadata.partition(*key)
            return known is not None and known.leader == self.config.broker_id

        loop = asyncio.get_running_loop()
        deadline = loop.time() + HAND_OVER_WAIT_S
        while (count := sum(1 for key in led if still_here(key))) and loop.time() < deadline:
            await asyncio.sleep(0.02)
        if count:
            log.warning("stopping while still named the leader of %d partition(s) with other in-sync replicas: "
                        "the controller's handover did not arrive within %.0f s", count, HAND_OVER_WAIT_S)

    async def _close_connections(self) -> None:
        """Every client connection answers the requests it has read, then closes; one that cannot
        within a short grace is cut."""
        for connection in list(self._open_connections):
            connection.stop_reading()
        if self._connections:
            _, late = await asyncio.wait(list(self._connections), timeout=CONNECTION_GRACE_S)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)

    def _dispatcher_for(self, session: Session, listener: str) -> Any:
        """A dispatch function whose handlers see the connection's session and listener; requests
        the session does not admit yet (before SASL authentication) close the connection."""
        context = dataclasses.replace(self.context, client_host=session.client_host, listener_name=listener,
                                      session=session)
        control_plane = listener == self.config.control_plane_listener_name

        def dispatch(request: Request) -> Any:
            handler = HANDLERS.get(request.api_key)
            if handler is None or request.api_key not in context.handled_apis:
                raise UnhandledApi(f"api key {request.api_key} is not served by this broker")
            if control_plane and request.api_key not in CONTROL_PLANE_APIS:
                raise UnhandledApi(f"api key {request.api_key} is not served on the control-plane listener "
                                   f"{listener}, which serves only the controller's requests")
            session.admit(request)
            handling = handler(request, context)
            if self.quotas.request_quotas_set and request.api_key not in REQUEST_QUOTA_EXEMPT \
                    and not _from_a_follower(request):
                return self.quotas.timed(handling, session.principal.name, request)
            return handling

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
        if self.membership is not None and self.fetchers is not None:
            self.fetchers.leave()
            led = [key for key, p in self.replica_manager.partitions.items() if p.is_leader and len(p.isr) > 1]
            if await self.membership.controlled_shutdown():
                # Out of every ISR now: a fetch would only put this broker back into one, where
                # acks=all would wait for it once it is gone (replica.lag.time.max.ms).
                await self.fetchers.shutdown()
                await self._hand_over_leaderships(led)
        for task in self._background:
            task.cancel()
        for sock in self._server_sockets.values():
            sock.close()
        await self._close_connections()
        await asyncio.gather(*self._background, return_exceptions=True)
        self.group_coordinator.shutdown()
        await self.txn_coordinator.shutdown()
        self.txn_connections.close()
        if self.fetchers is not None:
            await self.fetchers.shutdown()
        if self.dir_reports is not None:
            await self.dir_reports.stop()
        if self.membership is not None:
            await self.membership.stop()
        await self.dir_failures.stop()
        await self.balancer.stop()
        await self.mover.stop()
        await self.cleaner.stop()
        await self.security.stop()
        await self.log_manager.background.drain()
        self.log_manager.shutdown()
        if self.membership is not None:
            await self.membership.leave()
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
        log.info("broker %d stopped cleanly", self.config.broker_id)


# How long a stopping broker waits for the controller to hand its leaderships over, and for its
# connections to send the answers they owe.
HAND_OVER_WAIT_S = 5.0
CONNECTION_GRACE_S = 2.0
# The controller's requests: a cluster broker serves them, an embedded one has no controller but itself.
CLUSTER_ONLY_APIS = frozenset({4, 5, 6, 7, 73})
BALANCER_ENABLE = "log.dirs.balancer.enable"
BALANCER_THRESHOLD = "log.dirs.balancer.threshold.percent"
BALANCER_INTERVAL = "log.dirs.balancer.interval.ms"
# How often a leader exports the byte progress of its replicas catching up.
CATCH_UP_EXPORT_MS = 1000


def _rate_setter(throttle: ReplicationThrottle) -> Callable[[str, Any], None]:
    return lambda _key, rate: throttle.set_rate(rate)


def new_cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _halt() -> None:
    """Exit at once with status 1, as Kafka halts when its last log dir fails: nothing is left
    to serve and a clean shutdown would only write to dirs that are gone."""
    logging.shutdown()
    os._exit(1)


def _from_a_follower(request: Request) -> bool:
    """A follower's Fetch: replication, which client quotas do not count."""
    if request.api_key != 1:
        return False
    body: Any = request.body
    replica_id = body.replica_id if request.api_version <= 14 else body.replica_state.replica_id
    return bool(replica_id >= 0)
