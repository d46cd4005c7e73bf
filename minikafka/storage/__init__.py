"""Storage layer: Segment -> Log -> LogManager, in Kafka's on-disk format."""

from minikafka.storage.dir_io import DirGuard, guard
from minikafka.storage.errors import (
    CorruptRecordError,
    InconsistentMetadataError,
    InconsistentTopicIdError,
    InvalidProducerEpochError,
    KafkaStorageError,
    LogDirLockedError,
    NoLiveLogDirError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordTooLargeError,
    StorageError,
    UnsupportedMagic,
)
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.log import AppendResult, Log, LogConfig, ReadResult
from minikafka.storage.log_manager import LogManager
from minikafka.storage.segment import FileSlice, Segment

__all__ = [
    "AppendResult",
    "CorruptRecordError",
    "DirGuard",
    "FileSlice",
    "InconsistentMetadataError",
    "InconsistentTopicIdError",
    "InvalidProducerEpochError",
    "KafkaStorageError",
    "Log",
    "LogConfig",
    "LogDirFailureChannel",
    "LogDirLockedError",
    "LogManager",
    "NoLiveLogDirError",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "ReadResult",
    "RecordTooLargeError",
    "Segment",
    "StorageError",
    "UnsupportedMagic",
    "guard",
]
