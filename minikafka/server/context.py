"""What the request handlers depend on, passed to each of them explicitly."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from minikafka.config.broker import BrokerConfig
from minikafka.controller.api import ClusterControl
from minikafka.controller.zk_controller import ZkController
from minikafka.group.coordinator import GroupCoordinator
from minikafka.metadata.cache import MetadataCache
from minikafka.quota.manager import ClientQuotas
from minikafka.quota.store import QuotaStore
from minikafka.replica.log_dir_mover import LogDirMover
from minikafka.replica.replica_manager import ReplicaManager
from minikafka.security.manager import BrokerSecurity
from minikafka.security.session import Session
from minikafka.server.controller_commands import ControllerCommands
from minikafka.storage.log_manager import LogManager
from minikafka.txn.coordinator import TransactionCoordinator
from minikafka.txn.markers import TxnMarkerWriter
from minikafka.txn.verification import TxnVerifier


@dataclass
class BrokerContext:
    config: BrokerConfig
    controller: ClusterControl
    metadata: MetadataCache
    replica_manager: ReplicaManager
    log_manager: LogManager
    host: str
    port: int
    handled_apis: frozenset[int]
    groups: GroupCoordinator = field(kw_only=True)
    txns: TransactionCoordinator = field(kw_only=True)
    txn_markers: TxnMarkerWriter = field(kw_only=True)
    txn_verifier: TxnVerifier = field(kw_only=True)
    # Moves between log dirs (AlterReplicaLogDirs, DescribeLogDirs).
    mover: LogDirMover = field(kw_only=True)
    # The address of the client whose connection the request came on (one context per connection).
    client_host: str = field(default="", kw_only=True)
    # The listener that connection came in on: clients are given the brokers' addresses on it.
    listener_name: str = field(default="PLAINTEXT", kw_only=True)
    # Cluster mode only: what the controller's requests change, the listener they must come on,
    # and this broker's epoch (the zxid of its ZooKeeper registration) they must name.
    commands: ControllerCommands | None = field(default=None, kw_only=True)
    inter_broker_listener: str = field(default="PLAINTEXT", kw_only=True)
    # control.plane.listener.name (KIP-291): when named, the controller's requests come there only.
    control_plane_listener: str | None = field(default=None, kw_only=True)
    broker_epoch: Callable[[], int] = field(default=lambda: -1, kw_only=True)
    # Cluster mode only: this broker's controller, active when ZooKeeper elected it.
    cluster_controller: ZkController | None = field(default=None, kw_only=True)
    # TLS, SASL and ACLs: the broker's, and the connection's own session (its principal).
    security: BrokerSecurity = field(kw_only=True)
    session: Session = field(kw_only=True)
    # Client quotas: those in force here (and their rates), and where they are stored.
    quotas: ClientQuotas = field(kw_only=True)
    quota_store: QuotaStore = field(kw_only=True)

    @property
    def broker_id(self) -> int:
        return self.config.broker_id


# A handler (server/handlers): its API's request and the context in, the whole typed response
# body out (None for a produce with acks=0). Each handler names its own request view, and the
# handler table holds them all, so this type takes any arguments.
HandlerFn = Callable[..., Awaitable[Mapping[str, object] | None]]
