"""Metadata: brokers, controller, and the leader, replicas and ISR of every partition asked for.

With an authorizer, a topic the principal may not DESCRIBE is left out of "every topic" and
answered TOPIC_AUTHORIZATION_FAILED when named; an unknown topic is auto-created only for a
principal that may CREATE it, as in Kafka."""

from __future__ import annotations

import uuid
import weakref
from typing import cast

from minikafka.controller.topics import topic_name_error
from minikafka.metadata.cache import NO_LEADER, PartitionMetadata, TopicMetadata
from minikafka.metadata.topics import INTERNAL_TOPICS
from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import may_create_topic, may_on_topic
from protocol import ApiKey, Encoded, Request, encode_element
from protocol.errors import ErrorCode
from protocol.typed.metadata import (
    MetadataRequestView,
    MetadataResponse,
    MetadataResponsePartition,
    MetadataResponseTopic,
)

ZERO_UUID = uuid.UUID(int=0)


class _TopicAnswer:
    """A topic's answer: built once per version of its metadata, and encoded once per API
    version asked for (a Metadata of thousands of partitions spent most of its time encoding)."""

    __slots__ = ("described", "encoded")

    def __init__(self, described: MetadataResponseTopic) -> None:
        self.described = described
        self.encoded: dict[int, Encoded] = {}


# A TopicMetadata is immutable and replaced on every change, so its answer is kept as long as the
# object lives (by its id, which is dropped with it).
_ANSWERS: dict[int, _TopicAnswer] = {}


def _answer(topic: TopicMetadata) -> _TopicAnswer:
    answer = _ANSWERS.get(id(topic))
    if answer is None:
        answer = _ANSWERS[id(topic)] = _TopicAnswer({
            "error_code": ErrorCode.NONE,
            "name": topic.name,
            "topic_id": topic.topic_id,
            "is_internal": topic.name in INTERNAL_TOPICS,
            "partitions": [_describe_partition(index, state) for index, state in sorted(topic.partitions.items())],
        })
        weakref.finalize(topic, _ANSWERS.pop, id(topic), None)
    return answer


def describe_topic(topic: TopicMetadata) -> MetadataResponseTopic:
    """The topic's answer; shared while the topic's metadata is unchanged, so never modified."""
    return _answer(topic).described


def encoded_topic(topic: TopicMetadata, api_version: int) -> MetadataResponseTopic:
    """The topic's answer encoded for Metadata ``api_version``, standing for it in a response of
    that version only (typed as the answer it encodes)."""
    answer = _answer(topic)
    encoded = answer.encoded.get(api_version)
    if encoded is None:
        encoded = answer.encoded[api_version] = encode_element(ApiKey.METADATA, api_version, False, "topics",
                                                              answer.described)
    return cast(MetadataResponseTopic, encoded)


def _describe_partition(index: int, state: PartitionMetadata) -> MetadataResponsePartition:
    # An offline leader is no leader: clients see what Kafka shows for a partition whose only
    # replica is gone (LEADER_NOT_AVAILABLE, leader -1, the ISR as last known).
    leader = state.leader if state.available else NO_LEADER
    return {
        "error_code": ErrorCode.LEADER_NOT_AVAILABLE if leader == NO_LEADER else ErrorCode.NONE,
        "partition_index": index,
        "leader_id": leader,
        "leader_epoch": state.leader_epoch,
        "replica_nodes": list(state.replicas),
        "isr_nodes": list(state.isr),
        "offline_replicas": list(state.offline_replicas),
    }


def _missing_topic(name: str | None, topic_id: uuid.UUID, error: ErrorCode) -> MetadataResponseTopic:
    return {"error_code": error, "name": name, "topic_id": topic_id, "is_internal": False, "partitions": []}


async def handle(request: Request[MetadataRequestView], ctx: BrokerContext) -> MetadataResponse:
    body = request.body
    metadata = ctx.metadata
    # v0: an empty list means every topic; v1+: null means every topic.
    every_topic = body.topics is None or (request.api_version == 0 and not body.topics)
    allow_create = ctx.config["auto.create.topics.enable"] and (
        request.api_version < 4 or body.allow_auto_topic_creation)
    topics: list[MetadataResponseTopic] = []

    def may_describe(name: str) -> bool:
        return may_on_topic(ctx, AclOperation.DESCRIBE, name)

    if every_topic:
        topics = [encoded_topic(t, request.api_version) for t in metadata.topics().values() if may_describe(t.name)]
    else:
        for requested in body.topics or ():
            name = requested.name
            topic_id = requested.get("topic_id") or ZERO_UUID
            if name is None:
                by_id = metadata.topic_by_id(topic_id)
                if by_id is not None and not may_describe(by_id.name):
                    topics.append(_missing_topic(None, topic_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                    continue
                topics.append(encoded_topic(by_id, request.api_version) if by_id is not None
                              else _missing_topic(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID))
                continue
            if not may_describe(name):
                topics.append(_missing_topic(name, ZERO_UUID, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            topic = metadata.topic(name)
            if topic is None:
                if topic_name_error(name) is not None:
                    topics.append(_missing_topic(name, ZERO_UUID, ErrorCode.INVALID_TOPIC_EXCEPTION))
                    continue
                if not allow_create:
                    topics.append(_missing_topic(name, ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
                if not may_create_topic(ctx, name):
                    topics.append(_missing_topic(name, ZERO_UUID, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                    continue
                created = await ctx.controller.auto_create_topic(name)
                topic = metadata.topic(name)
                if topic is None:
                    # In a cluster the new topic reaches this broker's cache a moment later, and
                    # another broker may have created it first: either way the client is to retry
                    # (Kafka answers both LEADER_NOT_AVAILABLE, and some clients treat
                    # TOPIC_ALREADY_EXISTS from Metadata as fatal).
                    error = (ErrorCode.LEADER_NOT_AVAILABLE
                             if created.error in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS) else created.error)
                    topics.append(_missing_topic(name, ZERO_UUID, error))
                    continue
            topics.append(encoded_topic(topic, request.api_version))
    return {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack}
                    for b in metadata.brokers(ctx.listener_name).values()],
        "cluster_id": metadata.cluster_id,
        "controller_id": metadata.controller_id,
        "topics": topics,
        "error_code": ErrorCode.NONE,
    }
