"""Request metrics of the server, and the leader's view of replicas catching up, exported to
Prometheus."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from protocol import SUPPORTED_APIS

REQUESTS = Counter("minikafka_requests", "Requests handled, per API", ["api"])
LATENCY = Histogram(
    "minikafka_request_latency_seconds",
    "Time from a request's arrival to its response being ready, per API",
    ["api"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)
REQUEST_VERSIONS = Counter(
    "minikafka_request_versions", "Requests per API and version, to see what clients negotiate",
    ["api", "version"],
)

# Kafka's BytesOutPerSec of BrokerTopicMetrics: record bytes returned to consumers' fetches
# (followers' fetches count as ReplicationBytesOut instead).
BYTES_OUT = Counter("kafka_server_BrokerTopicMetrics_BytesOut",
                    "Record bytes this broker returned to consumers' fetches, from the leader or a follower")


def api_name(api_key: int) -> str:
    spec = SUPPORTED_APIS.get(api_key)
    return spec.name if spec is not None else str(api_key)


CATCH_UP_LABELS = ["topic", "partition", "replica"]
CATCH_UP_HELD = Gauge(
    "minikafka_replica_catch_up_bytes",
    "Bytes of the leader's log that a replica out of the ISR holds (a reassignment's new replicas among "
    "them), from its fetch position; exported by the leader", CATCH_UP_LABELS)
CATCH_UP_TOTAL = Gauge(
    "minikafka_replica_catch_up_total_bytes",
    "Bytes of the leader's log, which a replica out of the ISR has to hold", CATCH_UP_LABELS)
_exported_catch_up: set[tuple[str, str, str]] = set()


def export_catch_up(progress: dict[tuple[str, int, int], tuple[int, int]]) -> None:
    """Set the catch-up gauges to ``progress`` (ReplicaManager.catching_up); replicas that
    caught up (or left) lose their series."""
    current = set()
    for (topic, partition, replica), (held, total) in progress.items():
        labels = (topic, str(partition), str(replica))
        CATCH_UP_HELD.labels(*labels).set(held)
        CATCH_UP_TOTAL.labels(*labels).set(total)
        current.add(labels)
    for labels in _exported_catch_up - current:
        CATCH_UP_HELD.remove(*labels)
        CATCH_UP_TOTAL.remove(*labels)
    _exported_catch_up.clear()
    _exported_catch_up.update(current)
