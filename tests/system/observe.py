"""Small blocking helpers shared by the system tests and bench/bench_cluster.py: change a config
through IncrementalAlterConfigs, read one sample of a broker's Prometheus metrics, and measure a
replica's log on disk."""

from __future__ import annotations

from typing import Any

from kafka.admin import ConfigResource, KafkaAdminClient
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.broker_process import BrokerProcess


def alter_configs(bootstrap: str, resource: ConfigResource) -> None:
    """IncrementalAlterConfigs (kafka-python) of one resource; fails unless it is accepted."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        results = admin.alter_configs([resource], incremental=True)
    finally:
        admin.close()
    assert results == {resource.resource_type.name.lower(): {resource.name: "OK"}}, results


def metric_sample(broker: BrokerProcess, name: str, **labels: Any) -> float:
    """The value of the sample ``name`` with these labels (0 when the broker has none yet)."""
    for family in text_string_to_metric_families(broker.metrics_text()):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return 0.0


def log_bytes(broker: BrokerProcess, topic: str, partition: int) -> int:
    """Bytes of the segment files of the broker's replica of ``topic``-``partition``."""
    name = f"{topic}-{partition}"
    return sum(f.stat().st_size for f in (broker.partition_dirs()[name] / name).glob("*.log"))
