"""``minikafka log-dirs --recreate TOPIC-PARTITION... --yes``: accept the loss of replicas.

A replica whose data went with a failed or replaced log dir stays offline: the broker never
re-creates it empty on its own, since that would hide the loss.  This tool is how an operator
accepts it.  It runs while the broker is stopped (it takes the locks of the log dirs, so the
broker cannot start meanwhile), marks each named replica as new in the cluster metadata kept on
every healthy log dir, and on its next start the broker creates those replicas empty in a
healthy dir.  Without ``--yes`` it only says what it would do.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import re
import stat
from collections.abc import Iterator
from typing import TextIO

from minikafka.metadata.store import LocalMetadataStore, TopicState
from minikafka.storage.errors import KafkaStorageError
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.log_manager import LOCK_FILE

_PARTITION_NAME = re.compile(r"(?P<topic>.+)-(?P<index>0|[1-9][0-9]*)")


class RecreateError(Exception):
    """The request cannot be carried out; the message says why, for the operator."""


def parse_partition(text: str) -> tuple[str, int]:
    match = _PARTITION_NAME.fullmatch(text)
    if match is None:
        raise RecreateError(f"{text!r} is not of the form TOPIC-PARTITION (e.g. orders-3)")
    return match["topic"], int(match["index"])


def _usable_dirs(log_dirs: list[str]) -> list[str]:
    usable = []
    for log_dir in log_dirs:
        try:
            if stat.S_ISDIR(os.stat(log_dir).st_mode):
                usable.append(log_dir)
        except OSError:
            pass
    return usable


@contextlib.contextmanager
def _locked(log_dirs: list[str]) -> Iterator[None]:
    """Hold every dir's broker lock, so no broker runs while the metadata is edited."""
    fds = []
    try:
        for log_dir in log_dirs:
            try:
                fd = os.open(os.path.join(log_dir, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
            except OSError:
                continue  # a dir whose lock cannot even be made is not written either
            fds.append(fd)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise RecreateError(
                    f"a broker is running on these log dirs (it holds the lock of {log_dir}); "
                    "stop it first") from None
        yield
    finally:
        for fd in fds:
            os.close(fd)


def _where_data_is(log_dirs: list[str], topic: str, index: int) -> str | None:
    for log_dir in log_dirs:
        if os.path.isdir(os.path.join(log_dir, f"{topic}-{index}")):
            return log_dir
    return None


def recreate(log_dirs: list[str], broker_id: int, names: list[str], confirmed: bool, out: TextIO) -> int:
    """Mark the named replicas of broker ``broker_id`` to be re-created empty; returns an exit
    status (0 done, 1 refused or not confirmed).  Messages go to ``out``."""
    try:
        wanted = sorted({parse_partition(name) for name in names})
        usable = _usable_dirs(log_dirs)
        if not usable:
            raise RecreateError("none of the log dirs " + ", ".join(log_dirs) + " is a readable directory")
        with _locked(usable):
            return _recreate_locked(usable, broker_id, wanted, confirmed, out)
    except RecreateError as exc:
        print(f"error: {exc}", file=out)
        return 1


def _recreate_locked(log_dirs: list[str], broker_id: int, wanted: list[tuple[str, int]], confirmed: bool,
                     out: TextIO) -> int:
    store = LocalMetadataStore(log_dirs, LogDirFailureChannel())
    store.load(refresh=False)
    topics = store.topics()
    if not topics:
        raise RecreateError("no cluster metadata (or no topic) was found in " + ", ".join(log_dirs))
    changed: dict[str, TopicState] = {}
    for topic_name, index in wanted:
        name = f"{topic_name}-{index}"
        topic = topics.get(topic_name)
        state = topic.partitions.get(index) if topic is not None else None
        if topic is None or state is None:
            raise RecreateError(f"{name}: no such partition in the cluster metadata")
        if broker_id not in state.replicas:
            raise RecreateError(f"{name}: broker {broker_id} holds no replica of it (replicas: {state.replicas})")
        holder = _where_data_is(log_dirs, topic_name, index)
        if holder is not None:
            raise RecreateError(f"{name}: its data is in {holder}; only a replica whose data is lost can be "
                                "re-created")
        if broker_id in state.new_replicas:
            print(f"{name}: already marked to be re-created empty", file=out)
            continue
        print(f"{name}: {'will be' if confirmed else 'would be'} re-created EMPTY at the next broker start; "
              "the records it held are lost for good", file=out)
        topic = changed.get(topic_name, topic)
        marked = dataclasses.replace(state, new_replicas=(*state.new_replicas, broker_id))
        changed[topic_name] = dataclasses.replace(topic, partitions={**topic.partitions, index: marked})
    if not confirmed:
        print("nothing changed: add --yes to accept the loss", file=out)
        return 1
    try:
        for topic in changed.values():
            store.put_topic(topic)
    except KafkaStorageError as exc:
        raise RecreateError(f"could not write the cluster metadata: {exc}") from None
    print("done: start the broker to create the replicas", file=out)
    return 0
