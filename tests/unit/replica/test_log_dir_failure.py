"""LogDirFailureHandler and what it drives: a log dir failing under a running broker stack
(LogManager, ReplicaManager, EmbeddedController, LocalMetadataStore) built as Broker.start
builds it, on real temporary dirs, without sockets."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import re
import shutil
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from minikafka.config.broker import BrokerConfig
from minikafka.controller.embedded import EmbeddedController
from minikafka.metadata.store import NO_LEADER, LocalMetadataStore
from minikafka.replica.log_dir_failure import LogDirFailureHandler, describe_error
from minikafka.replica.replica_manager import FetchRequestPartition, ReplicaManager
from minikafka.replica.topic_config import log_config_for
from minikafka.server.handlers.metadata import describe_topic
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.log_manager import LogManager, check_log_dirs
from protocol.errors import ErrorCode
from tests.unit.storage.helpers import make_batch

BROKER = 1


class Node:
    """One broker's storage, replica and controller layers over ``dirs``, and what the
    handler's callbacks were called with."""

    def __init__(self, dirs: list[str], check_interval_ms: int = 0, min_free_bytes: int = 0) -> None:
        self.dirs = dirs
        self.config = BrokerConfig({"log.dirs": ",".join(dirs), "broker.id": str(BROKER)})
        self.channel = LogDirFailureChannel()
        self.bad_at_start = check_log_dirs(dirs, self.channel)
        self.store = LocalMetadataStore(dirs, self.channel)
        self.store.load()
        self.log_manager = LogManager(dirs, BROKER, self.store.cluster_id, log_config_for({}, self.config),
                                      self.channel)
        self.log_manager.startup()
        self.replica_manager = ReplicaManager(BROKER, self.log_manager)
        self.controller = EmbeddedController(self.config, self.store, self.replica_manager)
        self.controller.startup()
        self.cancelled: list[tuple[str, str]] = []
        self.halted = 0
        self.min_free_bytes = min_free_bytes
        self.handler = LogDirFailureHandler(
            self.log_manager, self.replica_manager, self.channel,
            on_replicas_offline=lambda _dir, partitions, _led: self.controller.replicas_offline(partitions),
            on_no_live_dir=self._halt,
            cancel_moves=lambda log_dir, reason: self.cancelled.append((log_dir, reason)),
            check_interval_ms=check_interval_ms,
            min_free_bytes=lambda: self.min_free_bytes,
        )
        self.handler.start()

    def _halt(self) -> None:
        self.halted += 1

    def create_topic(self, name: str, partitions: int) -> None:
        result = self.controller.create_topic_now(name, partitions, 1, {})
        assert result.error == ErrorCode.NONE, result

    def placement(self, topic: str) -> dict[int, str]:
        return {p: self.log_manager.dir_of(topic, p) for p in range(len(self.store.topics()[topic].partitions))}

    def produce(self, topic: str, partition: int, count: int = 1, value_size: int = 10) -> ErrorCode:
        return self.replica_manager.append(topic, partition, make_batch(count, value_size=value_size), 1_000).error

    def close(self) -> None:
        self.log_manager.shutdown()


def _metric(name: str, labels: dict[str, str] | None = None) -> float | None:
    return REGISTRY.get_sample_value(name, labels or {})


@pytest.fixture
def dirs(tmp_path: Path) -> list[str]:
    return [str(tmp_path / "d1"), str(tmp_path / "d2")]


@pytest.fixture
def node(dirs: list[str]):
    made = Node(dirs)
    made.create_topic("t", 4)
    for p in range(4):
        assert made.produce("t", p, 3) == ErrorCode.NONE
    yield made
    made.close()


def _split(node: Node, topic: str = "t") -> tuple[list[int], list[int]]:
    placement = node.placement(topic)
    good = [p for p, d in placement.items() if d == node.dirs[0]]
    doomed = [p for p, d in placement.items() if d == node.dirs[1]]
    assert good and doomed, placement
    return good, doomed


def test_replacing_a_dir_with_a_file_takes_exactly_its_replicas_offline(node: Node, caplog) -> None:
    good, doomed = _split(node)
    shutil.rmtree(node.dirs[1])
    Path(node.dirs[1]).write_text("not a dir")

    with caplog.at_level(logging.ERROR, logger="minikafka.replica.log_dir_failure"):
        # Its open files would still take the write: the dir check must refuse it first.
        assert node.produce("t", doomed[0]) == ErrorCode.KAFKA_STORAGE_ERROR

    assert node.channel.offline_dirs == {node.dirs[1]}
    assert set(node.replica_manager.offline_partitions) == {("t", p) for p in doomed}
    assert node.log_manager.logs_in_dir(node.dirs[1]) == []
    for p in doomed:
        assert node.produce("t", p) == ErrorCode.KAFKA_STORAGE_ERROR
        assert node.replica_manager.list_offset("t", p, -1).error == ErrorCode.KAFKA_STORAGE_ERROR
        assert node.replica_manager.end_offset_for_epoch("t", p, 0)[0] == ErrorCode.KAFKA_STORAGE_ERROR
    for p in good:
        assert node.produce("t", p) == ErrorCode.NONE
        assert node.replica_manager.list_offset("t", p, -1).offset == 4

    lines = [r.getMessage() for r in caplog.records if node.dirs[1] in r.getMessage()]
    assert len(lines) == 1, lines
    assert "ESTALE" in lines[0] or "ENOTDIR" in lines[0], lines[0]
    # The dir's own path may contain "t-<digit>" (pytest-123): match replica names as whole words.
    named = set(re.findall(r"\bt-(\d+)\b", lines[0].replace(node.dirs[1], "<dir>")))
    assert named == {str(p) for p in doomed}, lines[0]
    assert node.cancelled == [(node.dirs[1], node.cancelled[0][1])] and node.dirs[1] in node.cancelled[0][1]
    assert node.halted == 0


def test_metrics_count_offline_dirs_and_replicas(node: Node) -> None:
    _, doomed = _split(node)
    assert _metric("kafka_log_LogManager_OfflineLogDirectoryCount") == 0
    assert _metric("kafka_server_ReplicaManager_OfflineReplicaCount") == 0
    node.channel.report(node.dirs[1], OSError(errno.EIO, "Input/output error"))
    assert _metric("kafka_log_LogManager_OfflineLogDirectoryCount") == 1
    assert _metric("kafka_server_ReplicaManager_OfflineReplicaCount") == len(doomed)
    assert _metric("kafka_log_LogManager_LogDirectoryOffline", {"logDirectory": node.dirs[1]}) == 1
    assert _metric("kafka_log_LogManager_LogDirectoryOffline", {"logDirectory": node.dirs[0]}) == 0


def test_enospc_on_append_fails_that_produce_and_takes_the_dir_offline(node: Node, monkeypatch) -> None:
    good, doomed = _split(node)
    real_pwrite = os.pwrite
    doomed_fds = {s._log_fd for p in doomed for s in node.log_manager.get_log("t", p).segments}

    def pwrite(fd, data, position):
        if fd in doomed_fds:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_pwrite(fd, data, position)

    monkeypatch.setattr(os, "pwrite", pwrite)
    end_before = node.log_manager.get_log("t", doomed[0]).log_end_offset
    assert node.produce("t", doomed[0]) == ErrorCode.KAFKA_STORAGE_ERROR
    assert node.channel.offline_dirs == {node.dirs[1]}
    assert "ENOSPC" in describe_error(node.channel.causes[node.dirs[1]])
    assert ("t", doomed[0]) in node.replica_manager.offline_partitions
    assert node.log_manager.get_log("t", doomed[0]) is None, "the failed dir's logs must be dropped"
    assert end_before == 3
    assert node.produce("t", good[0]) == ErrorCode.NONE


def test_controller_records_no_leader_and_a_new_epoch_and_metadata_shows_it(node: Node) -> None:
    good, doomed = _split(node)
    epochs = {p: s.leader_epoch for p, s in node.store.topics()["t"].partitions.items()}
    node.channel.report(node.dirs[1], OSError(errno.EIO, "Input/output error"))

    reloaded = LocalMetadataStore(node.dirs, LogDirFailureChannel())
    reloaded.load(refresh=False)
    for p, state in reloaded.topics()["t"].partitions.items():
        if p in doomed:
            assert (state.leader, state.leader_epoch, state.isr) == (NO_LEADER, epochs[p] + 1, (BROKER,))
        else:
            assert (state.leader, state.leader_epoch) == (BROKER, epochs[p])

    described = describe_topic(node.controller.metadata.topic("t"))
    for partition in described["partitions"]:
        if partition["partition_index"] in doomed:
            assert partition["error_code"] == ErrorCode.LEADER_NOT_AVAILABLE
            assert (partition["leader_id"], partition["offline_replicas"]) == (-1, [BROKER])
            assert (partition["replica_nodes"], partition["isr_nodes"]) == ([BROKER], [BROKER])
        else:
            assert partition["error_code"] == ErrorCode.NONE
            assert (partition["leader_id"], partition["offline_replicas"]) == (BROKER, [])


def test_new_topics_go_only_to_live_dirs(node: Node) -> None:
    node.channel.report(node.dirs[1], OSError(errno.EIO, "Input/output error"))
    node.create_topic("later", 4)
    assert set(node.placement("later").values()) == {node.dirs[0]}


def test_a_dir_is_handled_once_however_often_it_is_reported(node: Node, caplog) -> None:
    with caplog.at_level(logging.ERROR, logger="minikafka.replica.log_dir_failure"):
        for _ in range(3):
            node.channel.report(node.dirs[1], OSError(errno.EIO, "Input/output error"))
            node.handler.on_dir_failure(node.dirs[1], OSError(errno.EIO, "again"))
    assert len([r for r in caplog.records if "failed" in r.getMessage()]) == 1


def test_losing_the_last_dir_halts(node: Node) -> None:
    node.channel.report(node.dirs[1], OSError(errno.EIO, "Input/output error"))
    assert node.halted == 0
    node.channel.report(node.dirs[0], OSError(errno.EIO, "Input/output error"))
    assert node.halted == 1


def test_periodic_check_finds_a_replaced_dir_without_any_traffic(node: Node) -> None:
    _, doomed = _split(node)
    assert node.handler.check_now() == []
    shutil.rmtree(node.dirs[1])
    os.mkdir(node.dirs[1])  # a fresh, empty dir at the same path is not the dir we opened
    assert node.handler.check_now() == [node.dirs[1]]
    assert set(node.replica_manager.offline_partitions) == {("t", p) for p in doomed}


async def test_pending_long_poll_on_a_failed_dir_is_answered_at_once(dirs: list[str]) -> None:
    node = Node(dirs)  # created inside the loop: failures are handled on the next loop turn
    try:
        node.create_topic("t", 4)
        _, doomed = _split(node)
        loop = asyncio.get_running_loop()
        started = loop.time()
        poll = asyncio.ensure_future(node.replica_manager.fetch(
            [FetchRequestPartition("t", doomed[0], 0, 1 << 20)], max_wait_ms=30_000, min_bytes=1,
            max_bytes=1 << 20))
        await asyncio.sleep(0)  # let the fetch register its wait
        assert not poll.done()
        node.channel.report(dirs[1], OSError(errno.EIO, "Input/output error"))
        (result,) = await asyncio.wait_for(poll, timeout=5)
        assert result.error == ErrorCode.KAFKA_STORAGE_ERROR
        assert loop.time() - started < 5
    finally:
        await node.handler.stop()
        node.close()


async def test_periodic_check_runs_on_the_loop(dirs: list[str]) -> None:
    node = Node(dirs, check_interval_ms=10)
    try:
        node.create_topic("t", 4)
        _, doomed = _split(node)
        shutil.rmtree(dirs[1])
        Path(dirs[1]).write_text("not a dir")
        answered = await asyncio.wait_for(node.replica_manager.fetch(
            [FetchRequestPartition("t", doomed[0], 0, 1 << 20)], max_wait_ms=30_000, min_bytes=1,
            max_bytes=1 << 20), timeout=5)
        assert answered[0].error == ErrorCode.KAFKA_STORAGE_ERROR
    finally:
        await node.handler.stop()
        node.close()


def test_a_dir_crossing_min_free_bytes_is_logged_once_each_way(dirs: list[str], caplog) -> None:
    node = Node(dirs)
    try:
        with caplog.at_level(logging.INFO, logger="minikafka.replica.log_dir_failure"):
            node.min_free_bytes = 1 << 62  # more than any disk here has
            node.handler.check_now()
            node.handler.check_now()
            nearly_full = [r.getMessage() for r in caplog.records if "nearly full" in r.getMessage()]
            assert sorted(m.split()[2] for m in nearly_full) == sorted(dirs), nearly_full
            assert all("log.dir.min.free.bytes" in m for m in nearly_full)
            assert node.handler.low_on_room == set(dirs)
            node.min_free_bytes = 1
            node.handler.check_now()
            recovered = [r.getMessage() for r in caplog.records if "has room again" in r.getMessage()]
            assert len(recovered) == 2 and node.handler.low_on_room == set()
        assert node.channel.offline_dirs == set(), "low on room is not offline"
    finally:
        node.close()
