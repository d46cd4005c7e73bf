"""The "minikafka" PySpark data source: batch and streaming reads, batch and streaming writes.

Spark creates `MiniKafkaDataSource` from a query's options and asks it for readers and writers.
Readers plan on the driver (which partitions, which offset ranges: one Spark input partition per
Kafka partition range) through a `ClusterView`, then are pickled to the executors, where `read()`
streams one range through `consumer.read_range`. Writers check the DataFrame's columns on the
driver; each executor task produces its rows through `producer.write_batches`.

Streaming offsets are {topic: {"partition": next offset}} dicts, the JSON Spark's own Kafka source
keeps in a checkpoint; Spark owns them, the reader only computes them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from minikafka.spark.cluster import ClusterView
from minikafka.spark.consumer import DataLossError, read_range
from minikafka.spark.options import (
    EARLIEST,
    LATEST,
    Assign,
    OffsetBound,
    OptionError,
    SinkOptions,
    SourceOptions,
    Subscribe,
    TopicPartition,
    offsets_to_json,
    parse_offsets_json,
)
from minikafka.spark.planning import OffsetRange, rate_limit, split_ranges
from minikafka.spark.producer import write_batches
from minikafka.spark.schema import arrow_schema, check_read_schema, check_sink_schema, source_schema

log = logging.getLogger(__name__)

FORMAT = "minikafka"


class MissingTopicError(RuntimeError):
    """A topic or partition the options name does not exist (and failOnDataLoss is true)."""


class KafkaInputPartition(InputPartition):
    """One Spark input partition: one offset range of one Kafka partition."""

    def __init__(self, offset_range: OffsetRange):
        super().__init__(offset_range)
        self.offset_range = offset_range


# ------------------------------------------------------------------ driver-side planning

def _cluster_view(options: SourceOptions) -> ClusterView:
    return ClusterView(options.client_config, options.api_timeout_ms, options.fetch_offset_retries,
                       options.fetch_offset_retry_interval_ms)


def subscribed_partitions(view: ClusterView, options: SourceOptions) -> list[TopicPartition]:
    """The partitions the subscription names now; a missing topic is an error or skipped."""
    subscription = options.subscription
    if isinstance(subscription, Subscribe):
        topics = view.topics(subscription.topics)
    elif isinstance(subscription, Assign):
        topics = view.topics(t for t, _ in subscription.partitions)
    else:
        topics = view.topics()
    missing: list[str] = []
    found: list[TopicPartition] = []
    if isinstance(subscription, Subscribe):
        for topic in subscription.topics:
            if topic in topics:
                found += [(topic, p) for p in range(topics[topic])]
            else:
                missing.append(f"topic {topic} does not exist")
    elif isinstance(subscription, Assign):
        for topic, partition in subscription.partitions:
            if topic not in topics:
                missing.append(f"topic {topic} (partition {topic}-{partition}) does not exist")
            elif partition >= topics[topic]:
                missing.append(f"partition {topic}-{partition} does not exist "
                               f"(topic {topic} has partitions 0-{topics[topic] - 1})")
            else:
                found.append((topic, partition))
    else:
        found = [(t, p) for t in sorted(topics) if subscription.matches(t) for p in range(topics[t])]
    if missing:
        message = f"option {subscription.option}: {'; '.join(dict.fromkeys(missing))} on {view.bootstrap}"
        if options.fail_on_data_loss:
            raise MissingTopicError(message + " (with failOnDataLoss=false it is skipped until it appears)")
        log.warning("%s; skipped (failOnDataLoss=false)", message)
    return sorted(set(found))


def _describe_partition(tp: TopicPartition, topics: dict[str, int]) -> str:
    topic, partition = tp
    if topic not in topics:
        return f"partition {topic}-{partition}: topic {topic} does not exist"
    if partition >= topics[topic]:
        return f"partition {topic}-{partition} does not exist (topic {topic} has partitions 0-{topics[topic] - 1})"
    return f"partition {topic}-{partition} is not one of the subscribed partitions"


def _check_covers(view: ClusterView, option: str, given: set[TopicPartition], partitions: list[TopicPartition]) -> None:
    """Per-partition JSON must name every subscribed partition and nothing else (as in Spark)."""
    wanted = set(partitions)
    unknown = sorted(given - wanted)
    if unknown:
        topics = view.topics(t for t, _ in unknown)
        raise OptionError(f"option {option} names a partition that cannot be read: "
                          + "; ".join(_describe_partition(tp, topics) for tp in unknown))
    missing = sorted(wanted - given)
    if missing:
        names = ", ".join(f"{t}-{p}" for t, p in missing)
        hint = "(-2 for earliest, -1 for latest)" if option.endswith("Offsets") else "(a timestamp in ms)"
        raise OptionError(f"option {option} must give a value for every subscribed partition {hint}; "
                          f"missing: {names}")


def resolve_bound(view: ClusterView, bound: OffsetBound, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
    """Offsets of `partitions` for a starting or ending bound, every symbolic value resolved."""
    if bound.kind == "earliest":
        return view.earliest(partitions)
    if bound.kind == "latest":
        return view.latest(partitions)
    if bound.kind == "timestamp":
        return _resolve_timestamps(view, bound, partitions)
    _check_covers(view, bound.option, set(bound.offsets), partitions)
    offsets = dict(bound.offsets)
    earliest = view.earliest([tp for tp, o in offsets.items() if o == EARLIEST])
    latest = view.latest([tp for tp, o in offsets.items() if o == LATEST])
    offsets.update(earliest)
    offsets.update(latest)
    return offsets


def _resolve_timestamps(view: ClusterView, bound: OffsetBound, partitions: list[TopicPartition]
                        ) -> dict[TopicPartition, int]:
    if bound.timestamp is not None:
        timestamps = {tp: bound.timestamp for tp in partitions}
    else:
        _check_covers(view, bound.option, set(bound.timestamps), partitions)
        timestamps = dict(bound.timestamps)
    offsets = view.for_timestamps(timestamps)
    unmatched = sorted(tp for tp, offset in offsets.items() if offset < 0)
    if unmatched and bound.no_match == "error":
        names = ", ".join(f"{t}-{p} (timestamp {timestamps[(t, p)]})" for t, p in unmatched)
        raise OptionError(f"option {bound.option}: no record at or after the timestamp in {names}; set "
                          f"startingOffsetsByTimestampStrategy=latest to start from the latest offset there")
    offsets.update(view.latest(unmatched))
    return offsets


def _input_partitions(ranges: list[OffsetRange], options: SourceOptions) -> list[InputPartition]:
    return [KafkaInputPartition(r) for r in split_ranges(ranges, options.min_partitions)]


def _read(options: SourceOptions, schema: StructType, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    if not isinstance(partition, KafkaInputPartition):
        return iter(())  # Spark's stand-in partition of a read with nothing to read
    return read_range(options.client_config, arrow_schema(schema), partition.offset_range,
                      fail_on_data_loss=options.fail_on_data_loss, poll_timeout_ms=options.poll_timeout_ms)


# ------------------------------------------------------------------ readers

class MiniKafkaBatchReader(DataSourceReader):
    """A batch read: plans ranges from startingOffsets to endingOffsets once, on the driver."""

    def __init__(self, options: SourceOptions, schema: StructType):
        self.options = options
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        view = _cluster_view(self.options)
        try:
            partitions = subscribed_partitions(view, self.options)
            start = resolve_bound(view, self.options.starting, partitions)
            assert self.options.ending is not None
            end = resolve_bound(view, self.options.ending, partitions)
        finally:
            view.close()
        ranges = []
        for tp in partitions:
            if start[tp] > end[tp]:
                raise OptionError(f"partition {tp[0]}-{tp[1]}: startingOffsets {start[tp]} is after endingOffsets "
                                  f"{end[tp]}")
            ranges.append(OffsetRange(tp[0], tp[1], start[tp], end[tp]))
        return _input_partitions(ranges, self.options)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, self.schema, partition)


class MiniKafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A streaming read. Lives on the driver for the whole query (one instance per query run),
    and is pickled, fresh, to the executors for `read()`.

    Only Spark's calls touch it, one at a time. Its `ClusterView` and the offsets remembered for
    Trigger.AvailableNow and progress reports are driver-side only.
    """

    def __init__(self, options: SourceOptions, schema: StructType):
        self.options = options
        self.schema = schema
        self._view: ClusterView | None = None
        self._available_now: dict[TopicPartition, int] | None = None
        self._latest: dict[TopicPartition, int] | None = None

    def __getstate__(self) -> dict:
        return {"options": self.options, "schema": self.schema, "_view": None, "_available_now": None,
                "_latest": None}

    @property
    def view(self) -> ClusterView:
        if self._view is None:
            self._view = _cluster_view(self.options)
        return self._view

    def initialOffset(self) -> dict:
        partitions = subscribed_partitions(self.view, self.options)
        return offsets_to_json(resolve_bound(self.view, self.options.starting, partitions))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = self.view.latest(subscribed_partitions(self.view, self.options))

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        start_offsets = parse_offsets_json(start, "the checkpointed start offsets")
        if self._available_now is not None:
            latest = dict(self._available_now)
        else:
            latest = self.view.latest(subscribed_partitions(self.view, self.options))
        gone = sorted(set(start_offsets) - set(latest))
        if gone and self._available_now is None:
            names = ", ".join(f"{t}-{p}" for t, p in gone)
            if self.options.fail_on_data_loss:
                raise DataLossError(f"partitions {names} were being read but no longer exist; some data may have "
                                    f"been lost (set failOnDataLoss=false to go on without them)")
            log.warning("partitions %s no longer exist; reading on without them", names)
        self._latest = latest
        if isinstance(limit, ReadMaxRows):
            new = [tp for tp in latest if tp not in start_offsets]
            begin = {tp: start_offsets[tp] for tp in latest if tp in start_offsets}
            begin.update(self.view.earliest(new))
            end = rate_limit(begin, latest, limit.max_rows)
        else:
            end = latest
        return offsets_to_json(end)

    def reportLatestOffset(self) -> dict | None:
        return offsets_to_json(self._latest) if self._latest is not None else None

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        start_offsets = parse_offsets_json(start, "the checkpointed start offsets")
        end_offsets = parse_offsets_json(end, "the checkpointed end offsets")
        new = [tp for tp in end_offsets if tp not in start_offsets]
        begin = dict(start_offsets)
        begin.update(self.view.earliest(new))
        ranges = []
        for tp, stop in sorted(end_offsets.items()):
            first = begin[tp]
            if first > stop:
                message = (f"partition {tp[0]}-{tp[1]}: offset went back from {first} to {stop}; "
                           f"some data may have been lost")
                if self.options.fail_on_data_loss:
                    raise DataLossError(message + " (set failOnDataLoss=false to go on)")
                log.warning("%s; skipping", message)
                continue
            ranges.append(OffsetRange(tp[0], tp[1], first, stop))
        return _input_partitions(ranges, self.options)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, self.schema, partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: the offsets live in Spark's checkpoint, not in Kafka."""

    def stop(self) -> None:
        if self._view is not None:
            self._view.close()
            self._view = None


# ------------------------------------------------------------------ writers

@dataclass
class RowsWritten(WriterCommitMessage):
    rows: int


class _RowProducer:
    """What both writers do: check the columns on the driver, produce a task's rows on an executor."""

    def __init__(self, options: SinkOptions, schema: StructType):
        self.options = options
        self.columns = check_sink_schema(schema, options.topic)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return RowsWritten(write_batches(self.options.client_config, self.columns, self.options.topic, iterator))


class MiniKafkaBatchWriter(_RowProducer, DataSourceArrowWriter):
    """A batch write: each task produces its rows; nothing to commit, since Kafka has no undo."""


class MiniKafkaStreamWriter(_RowProducer, DataSourceStreamArrowWriter):
    """A streaming write: like the batch writer, once per micro-batch (at least once, as Spark's
    Kafka sink: a micro-batch re-run after a failure writes its rows again)."""

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to do: every row was acknowledged by the broker before its task finished."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("micro-batch %d aborted; rows its finished tasks wrote stay in Kafka", batchId)


# ------------------------------------------------------------------ the data source

class MiniKafkaDataSource(DataSource):
    """Format "minikafka": Spark's Kafka source and sink, for minikafka (or any Kafka) brokers."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def _include_headers(self) -> bool:
        text = str(self.options.get("includeHeaders", "false")).strip().lower()
        if text not in ("true", "false"):
            raise OptionError(f"option includeHeaders must be true or false, got {text!r}")
        return text == "true"

    def schema(self) -> StructType:
        return source_schema(self._include_headers())

    def reader(self, schema: StructType) -> DataSourceReader:
        options = SourceOptions.parse(self.options, streaming=False)
        check_read_schema(schema, options.include_headers)
        return MiniKafkaBatchReader(options, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options = SourceOptions.parse(self.options, streaming=True)
        check_read_schema(schema, options.include_headers)
        return MiniKafkaStreamReader(options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        if overwrite:
            raise OptionError("save mode overwrite is not allowed for the minikafka sink: Kafka topics are "
                              "append-only (use mode append)")
        return MiniKafkaBatchWriter(SinkOptions.parse(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:
        # Output mode complete (overwrite) writes the whole result again each trigger, as Spark's sink does.
        return MiniKafkaStreamWriter(SinkOptions.parse(self.options), schema)


def register(spark: SparkSession) -> None:
    """Make format("minikafka") available in `spark`."""
    spark.dataSource.register(MiniKafkaDataSource)
