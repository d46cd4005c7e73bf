"""Driver-side look-ups for the Spark readers: which partitions exist, and their offsets.

`ClusterView` owns a confluent-kafka Consumer handle for metadata (a consumer's metadata requests
never auto-create a topic) and an AdminClient for offsets, both opened on first use and closed
by `close()`.
It belongs to one reader on the driver and is not thread-safe; a pickled reader leaves it behind
and opens its own. Every failure is a `KafkaLookupError` naming the bootstrap servers, the
option that bounds the wait, and librdkafka's last complaint.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

import confluent_kafka
from confluent_kafka import IsolationLevel
from confluent_kafka.admin import AdminClient, OffsetSpec

from minikafka.spark.options import API_TIMEOUT, BOOTSTRAP, OptionError, TopicPartition

log = logging.getLogger(__name__)


class KafkaLookupError(RuntimeError):
    """The brokers could not answer a metadata or offset look-up in time."""


class ClusterView:
    """Metadata and offset look-ups; see the module docstring."""

    def __init__(self, client_config: Mapping[str, str], timeout_ms: int, retries: int = 3,
                 retry_interval_ms: int = 10):
        self._config = dict(client_config)
        self._timeout_s = timeout_ms / 1000
        self._retries = retries
        self._retry_interval_s = retry_interval_ms / 1000
        self._admin: AdminClient | None = None
        self._metadata: confluent_kafka.Consumer | None = None
        self._last_client_error: str | None = None
        self._isolation_level = IsolationLevel.READ_COMMITTED \
            if self._config.pop("isolation.level", None) == "read_committed" else IsolationLevel.READ_UNCOMMITTED

    @property
    def bootstrap(self) -> str:
        return self._config["bootstrap.servers"]

    def _client_config(self) -> dict[str, Any]:
        def on_error(err: confluent_kafka.KafkaError) -> None:
            self._last_client_error = f"{err.name()}: {err.str()}"

        return {**self._config, "error_cb": on_error, "logger": log}

    def _admin_client(self) -> AdminClient:
        if self._admin is None:
            try:
                self._admin = AdminClient(self._client_config())
            except confluent_kafka.KafkaException as exc:
                raise OptionError(f"a kafka.* option was refused by the Kafka client: {exc.args[0].str()}") from None
        return self._admin

    def _metadata_client(self) -> confluent_kafka.Consumer:
        if self._metadata is None:
            config = {"group.id": "minikafka-spark-metadata", "enable.auto.commit": False,
                      **self._client_config()}
            try:
                self._metadata = confluent_kafka.Consumer(config)
            except (confluent_kafka.KafkaException, ValueError) as exc:
                detail = exc.args[0].str() if isinstance(exc, confluent_kafka.KafkaException) else exc
                raise OptionError(f"a kafka.* option was refused by the Kafka client: {detail}") from None
        return self._metadata

    def _failure(self, what: str, cause: object) -> KafkaLookupError:
        last = f"; last client error: {self._last_client_error}" if self._last_client_error else ""
        return KafkaLookupError(f"{what} failed on {BOOTSTRAP}={self.bootstrap}: {cause}{last}")

    def topics(self, names: Iterable[str] | None = None) -> dict[str, int]:
        """{topic: partition count} of the `names` that exist, or of every topic the brokers
        know (internal ones left out) when `names` is None."""
        if names is None:
            return {name: count for name, count in self._list_topics(None).items() if not name.startswith("__")}
        found: dict[str, int] = {}
        for name in sorted(set(names)):
            found.update(self._list_topics(name))
        return found

    def _list_topics(self, name: str | None) -> dict[str, int]:
        deadline = time.monotonic() + self._timeout_s
        cause: object = "timed out"
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._failure("metadata request", f"no answer within {self._timeout_s * 1000:.0f} ms "
                                                        f"({API_TIMEOUT}): {cause}")
            try:
                metadata = self._metadata_client().list_topics(name, timeout=min(remaining, 5.0))
            except confluent_kafka.KafkaException as exc:
                cause = exc.args[0].str() if exc.args else exc
                self._metadata_client().poll(min(0.1, max(0.0, deadline - time.monotonic())))  # serves error_cb
                continue
            return {topic: len(meta.partitions) for topic, meta in metadata.topics.items() if meta.error is None}

    def earliest(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._offsets({tp: OffsetSpec.earliest() for tp in partitions}, "earliest")

    def latest(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The end of each partition as a reader sees it: the high watermark, or under
        read_committed the last stable offset."""
        return self._offsets({tp: OffsetSpec.latest() for tp in partitions}, "latest")

    def for_timestamps(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """The first offset of each partition whose record timestamp is >= the given one (ms);
        -1 where there is none."""
        return self._offsets({tp: OffsetSpec.for_timestamp(ts) for tp, ts in timestamps.items()}, "by-timestamp")

    def _offsets(self, specs: Mapping[TopicPartition, OffsetSpec], what: str) -> dict[TopicPartition, int]:
        wanted = sorted(specs)
        if not wanted:
            return {}
        cause: object = "timed out"
        for attempt in range(self._retries):
            if attempt:
                time.sleep(self._retry_interval_s)
            request = {confluent_kafka.TopicPartition(t, p): specs[(t, p)] for t, p in wanted}
            try:
                futures = self._admin_client().list_offsets(request, request_timeout=self._timeout_s,
                                                            isolation_level=self._isolation_level)
                return {(tp.topic, tp.partition): future.result().offset for tp, future in futures.items()}
            except confluent_kafka.KafkaException as exc:
                error = exc.args[0]
                cause = error.str()
                log.info("%s offsets of %d partitions, attempt %d: %s", what, len(wanted), attempt + 1, cause)
                if error.code() in (confluent_kafka.KafkaError._UNKNOWN_PARTITION,
                                    confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART):
                    self._refresh_admin_metadata({t for t, _ in wanted})
        raise self._failure(f"listing the {what} offsets of {_describe(wanted)}", cause)

    def _refresh_admin_metadata(self, topics: set[str]) -> None:
        """Make the AdminClient see partitions added since it cached the topics' metadata.

        Only for topics the metadata consumer saw, so the request cannot auto-create one.
        """
        for topic in sorted(topics):
            try:
                self._admin_client().list_topics(topic, timeout=self._timeout_s)
            except confluent_kafka.KafkaException as exc:
                log.info("refreshing metadata of %s: %s", topic, exc.args[0].str())

    def close(self) -> None:
        if self._metadata is not None:
            self._metadata.close()
            self._metadata = None
        self._admin = None  # AdminClient has no close(); dropping it stops its threads


def _describe(partitions: list[TopicPartition]) -> str:
    names = [f"{t}-{p}" for t, p in partitions]
    return ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
