"""Exceptions raised by the storage layer; handlers map each to a Kafka error code."""

from __future__ import annotations

from protocol.records import CorruptRecordError, UnsupportedMagic

__all__ = [
    "CorruptRecordError",
    "InconsistentMetadataError",
    "InconsistentTopicIdError",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "TransactionCoordinatorFencedError",
    "KafkaStorageError",
    "LogDirLockedError",
    "NoLiveLogDirError",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "RecordTooLargeError",
    "StorageError",
    "UnsupportedMagic",
]


class StorageError(Exception):
    """Base of the storage errors that are about a request, not about a failed disk."""


class KafkaStorageError(Exception):
    """An OS call on a log dir failed; the dir has been reported to the LogDirFailureChannel."""

    def __init__(self, log_dir: str, partition: str | None, cause: BaseException | None) -> None:
        where = f"log dir {log_dir}" + (f" (partition {partition})" if partition else "")
        super().__init__(f"I/O error in {where}: {cause}" if cause is not None else f"{where} is offline")
        self.log_dir = log_dir
        self.partition = partition
        self.cause = cause


class OffsetOutOfRangeError(StorageError):
    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(
            f"offset {offset} is outside the log range [{log_start_offset}, {log_end_offset}]"
        )
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class InvalidProducerEpochError(StorageError):
    """A producer wrote with an epoch older than the one this partition has already seen."""


class TransactionCoordinatorFencedError(StorageError):
    """A transaction marker from a coordinator epoch older than one this partition has seen."""


class OutOfOrderSequenceError(StorageError):
    """A producer's batch does not continue its sequence (a gap, or an old batch not cached)."""


class InvalidRecordError(StorageError):
    """A batch holds a record the topic cannot take (a record without a key on a compacted
    topic); ``record_errors`` lists (index of the record in its batch, why), as Produce v8+
    answers them."""

    def __init__(self, message: str, record_errors: list[tuple[int, str]]) -> None:
        super().__init__(message)
        self.record_errors = record_errors


class InvalidTimestampError(StorageError):
    """A CreateTime outside the topic's message.timestamp.before/after.max.ms window."""


class RecordTooLargeError(StorageError):
    """A batch exceeds max.message.bytes, or an append cannot fit in any segment."""


class InconsistentTopicIdError(StorageError):
    """The topic id given for a partition differs from the one stored in partition.metadata."""


class InconsistentMetadataError(Exception):
    """A log dir belongs to another cluster or broker (meta.properties disagrees); fatal at startup."""


class LegacyMessageFormatError(Exception):
    """A segment holds messages in a format older than Kafka 0.11's record batches (magic 0 or
    1), which minikafka does not read; fatal at startup, with nothing changed: a Kafka broker
    being rolled to minikafka keeps its data, and can start again on it."""


class LogDirLockedError(Exception):
    """Another process holds the .lock of a log dir; fatal at startup."""


class NoLiveLogDirError(Exception):
    """Every configured log dir is offline (or none could be opened at startup)."""
