"""Kafka's small text files in a log dir, and the atomic write they share.

Offset checkpoints (recovery-point-offset-checkpoint, replication-offset-checkpoint,
log-start-offset-checkpoint) and leader-epoch-checkpoint use one layout: a version line
("0"), a count line, then one entry per line with space-separated fields.  meta.properties
and partition.metadata are key/value files.  Every function takes the DirGuard of the dir
it touches; callers own the files, these functions own nothing.
"""

from __future__ import annotations

import base64
import os
import uuid

from minikafka.storage.dir_io import DirGuard

CHECKPOINT_VERSION = 0
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
# Where each compacted log's dirty part starts (the log cleaner's checkpoint).
CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
META_PROPERTIES = "meta.properties"


class CorruptCheckpointError(ValueError):
    """A checkpoint file exists but does not parse."""


def uuid_to_base64(value: uuid.UUID) -> str:
    """Kafka prints a Uuid as url-safe base64 of its 16 bytes without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def uuid_from_base64(text: str) -> uuid.UUID:
    raw = base64.urlsafe_b64decode(text.strip() + "==")
    if len(raw) != 16:
        raise ValueError(f"not a base64 uuid: {text!r}")
    return uuid.UUID(bytes=raw)


def fsync_dir(path: str, io: DirGuard) -> None:
    with io:
        fsync_dir_path(path)


def fsync_dir_path(path: str) -> None:
    """fsync a directory; no guard, for threads that report their own errors."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: str, data: bytes, io: DirGuard, sync: bool = True) -> None:
    """Replace ``path`` so that a crash leaves either the old or the new content, never a mix.
    Without ``sync`` neither the file nor its dir is fsynced: the caller fsyncs both later."""
    tmp = path + ".tmp"
    with io:
        _write_file(tmp, data, sync)
        os.replace(tmp, path)
    if sync:
        fsync_dir(os.path.dirname(path) or ".", io)


def _write_file(path: str, data: bytes, sync: bool, exclusive: bool = False) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | (os.O_EXCL if exclusive else os.O_TRUNC), 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def fsync_path(path: str) -> None:
    """fsync a file or a directory by its path; no guard, for threads that report their own errors."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_text(path: str, io: DirGuard) -> str | None:
    """The file's text, or None if it does not exist."""
    with io:
        try:
            with open(path, encoding="utf-8") as handle:
                return handle.read()
        except FileNotFoundError:
            return None


def _parse_entries(path: str, text: str, fields: int) -> list[list[str]]:
    lines = text.splitlines()
    if not lines:
        # Kafka creates its checkpoint files empty before their first write, and reads them as empty.
        return []
    try:
        if int(lines[0]) != CHECKPOINT_VERSION:
            raise CorruptCheckpointError(f"{path}: unknown checkpoint version {lines[0]!r}")
        count = int(lines[1])
        entries = [line.split() for line in lines[2 : 2 + count]]
    except (IndexError, ValueError) as exc:
        raise CorruptCheckpointError(f"{path}: malformed checkpoint") from exc
    if len(entries) != count or any(len(entry) != fields for entry in entries):
        raise CorruptCheckpointError(f"{path}: expected {count} entries of {fields} fields")
    return entries


def _format_entries(entries: list[str]) -> bytes:
    return (f"{CHECKPOINT_VERSION}\n{len(entries)}\n" + "".join(line + "\n" for line in entries)).encode()


def read_offset_checkpoint(path: str, io: DirGuard) -> dict[tuple[str, int], int]:
    """{(topic, partition): offset}; empty if the file is missing."""
    text = read_text(path, io)
    if text is None:
        return {}
    try:
        return {(topic, int(part)): int(offset) for topic, part, offset in _parse_entries(path, text, 3)}
    except ValueError as exc:
        raise CorruptCheckpointError(f"{path}: malformed entry") from exc


def write_offset_checkpoint(path: str, offsets: dict[tuple[str, int], int], io: DirGuard) -> None:
    lines = [f"{topic} {part} {offset}" for (topic, part), offset in sorted(offsets.items())]
    write_atomically(path, _format_entries(lines), io)


def read_epoch_checkpoint(path: str, io: DirGuard) -> list[tuple[int, int]]:
    """[(epoch, start_offset)] in file order; empty if the file is missing."""
    text = read_text(path, io)
    if text is None:
        return []
    try:
        return [(int(epoch), int(offset)) for epoch, offset in _parse_entries(path, text, 2)]
    except ValueError as exc:
        raise CorruptCheckpointError(f"{path}: malformed entry") from exc


def write_epoch_checkpoint(path: str, entries: list[tuple[int, int]], io: DirGuard, sync: bool = True,
                           new_file: bool = False) -> None:
    """``new_file``: the file does not exist yet (see ``write_new_file``; a torn one is read as
    empty, by Kafka too)."""
    data = epoch_checkpoint_bytes(entries)
    if new_file:
        write_new_file(path, data, io, sync)
    else:
        write_atomically(path, data, io, sync)


def epoch_checkpoint_bytes(entries: list[tuple[int, int]]) -> bytes:
    return _format_entries([f"{epoch} {offset}" for epoch, offset in entries])


def parse_properties(text: str) -> dict[str, str]:
    """The subset of java.util.Properties syntax Kafka writes: comments, key=value lines."""
    props: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            continue
        props[line[:sep].strip()] = line[sep + 1 :].strip()
    return props


def format_properties(props: dict[str, str], comment: str) -> bytes:
    return ("#\n#" + comment + "\n" + "".join(f"{k}={v}\n" for k, v in props.items())).encode()


def read_partition_metadata(path: str, io: DirGuard) -> uuid.UUID | None:
    """The topic id stored in partition.metadata, or None if the file is missing."""
    text = read_text(path, io)
    if text is None:
        return None
    fields = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    if fields.get("version") != "0" or "topic_id" not in fields:
        raise CorruptCheckpointError(f"{path}: malformed partition metadata")
    try:
        return uuid_from_base64(fields["topic_id"])
    except ValueError as exc:
        raise CorruptCheckpointError(f"{path}: malformed topic id") from exc


def write_partition_metadata(path: str, topic_id: uuid.UUID, io: DirGuard, sync: bool = True,
                             new_dir: bool = False) -> None:
    """``new_dir``: the partition's dir was made just now, so no file of an earlier content
    exists (see ``write_new_file``)."""
    data = partition_metadata_bytes(topic_id)
    if new_dir:
        write_new_file(path, data, io, sync)
    else:
        write_atomically(path, data, io, sync)


def partition_metadata_bytes(topic_id: uuid.UUID) -> bytes:
    return f"version: 0\ntopic_id: {uuid_to_base64(topic_id)}\n".encode()


def create_file(path: str, data: bytes) -> None:
    """Create ``path`` with ``data``, not fsynced; no guard, for threads that report their own
    errors (the file must not exist: O_EXCL)."""
    _write_file(path, data, False, exclusive=True)


def write_new_file(path: str, data: bytes, io: DirGuard, sync: bool = True) -> None:
    """Create ``path``, which does not exist yet, with ``data``: one file creation where
    ``write_atomically`` costs two and a rename, as no old content could be mixed with the new
    (a file left torn by a crash, only possible before its fsync, reads as malformed and is
    written again). Without ``sync`` neither the file nor its dir is fsynced."""
    with io:
        _write_file(path, data, sync)
    if sync:
        fsync_dir(os.path.dirname(path) or ".", io)
