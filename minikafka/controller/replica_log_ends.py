"""How the controller learns where each live replica's log ends, to choose an unclean leader.

ZooKeeper holds no log end offsets, and Apache Kafka's ZooKeeper-mode controller never asks
(it takes the first live replica). This one asks each broker directly, on the inter-broker
listener, with ListOffsets as Kafka's debugging replica id (-2) for the latest offset: any
replica answers that, leader or not, with its log end offset and the latest leader epoch of its
log (server/handlers/list_offsets.py). It is asked at the moment of the election, not taken from
an older report: with no leader, no replica's log grows meanwhile, so the answers stay true
until the controller's LeaderAndIsr names the new leader. One connection per broker asked,
closed after; a broker that does not answer within the timeout is left out, and the election
(elections.unclean_leader) then waits rather than guess. Event-loop thread only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence

from minikafka.controller.elections import ReplicaLogEnd
from minikafka.net.client import BrokerClient, BrokerUnreachable
from minikafka.security.client import ClientSecurity
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
LIST_OFFSETS, LIST_OFFSETS_VERSION = 2, 7  # v4+ answers the leader epoch
DEBUGGING_REPLICA_ID = -2
LATEST_TIMESTAMP = -1
TIMEOUT_S = 5.0


async def ask(wanted: Mapping[int, Sequence[TopicPartition]], addresses: Mapping[int, tuple[str, int]],
              client_id: str, security: ClientSecurity) -> dict[TopicPartition, dict[int, ReplicaLogEnd]]:
    """Ask each broker of ``wanted`` (broker -> its replicas) where those replicas' logs end, all
    at once; {partition: {broker: its answer}} for the replicas that answered."""
    brokers = [b for b in wanted if b in addresses and wanted[b]]
    answers = await asyncio.gather(*(_ask_broker(b, wanted[b], addresses[b], client_id, security) for b in brokers))
    found: dict[TopicPartition, dict[int, ReplicaLogEnd]] = {}
    for broker, answer in zip(brokers, answers, strict=True):
        for tp, end in answer.items():
            found.setdefault(tp, {})[broker] = end
    return found


async def _ask_broker(broker: int, partitions: Sequence[TopicPartition], address: tuple[str, int], client_id: str,
                      security: ClientSecurity) -> dict[TopicPartition, ReplicaLogEnd]:
    by_topic: dict[str, list[int]] = {}
    for topic, index in partitions:
        by_topic.setdefault(topic, []).append(index)
    body = {"replica_id": DEBUGGING_REPLICA_ID, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": i, "current_leader_epoch": -1, "timestamp": LATEST_TIMESTAMP}
                                       for i in indexes]} for topic, indexes in by_topic.items()]}
    client = BrokerClient(*address, client_id=client_id, security=security)
    try:
        response = await client.request(LIST_OFFSETS, LIST_OFFSETS_VERSION, body, TIMEOUT_S)
    except BrokerUnreachable as exc:
        log.warning("broker %d did not say where its replicas' logs end (%s)", broker, exc)
        return {}
    finally:
        client.close()
    found: dict[TopicPartition, ReplicaLogEnd] = {}
    for topic in response.topics:
        for p in topic.partitions:
            if p.error_code == ErrorCode.NONE:
                found[(topic.name, p.partition_index)] = ReplicaLogEnd(p.leader_epoch, p.offset)
            else:
                error = next((e.name for e in ErrorCode if e == p.error_code), str(p.error_code))
                log.warning("broker %d could not say where its replica of %s-%d ends (error %s)", broker, topic.name,
                            p.partition_index, error)
    return found
