"""Starting with a bad or replaced log dir: which dirs are skipped and why, replicas whose data
is gone stay offline (never re-created empty) until `log-dirs --recreate`, and the cluster
metadata survives the loss of any one dir."""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import io
import json
import logging
import os
import shutil
from pathlib import Path

import pytest

from minikafka.cli import main as cli_main
from minikafka.metadata.store import METADATA_FILE, NO_LEADER, LocalMetadataStore
from minikafka.storage.errors import NoLiveLogDirError
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.log import LogConfig
from minikafka.storage.log_manager import LOCK_FILE, ROOM_PROBE_FILE, LogManager, check_log_dirs
from minikafka.tools.recreate import recreate
from protocol.errors import ErrorCode
from tests.unit.replica.test_log_dir_failure import BROKER, Node


@pytest.fixture
def dirs(tmp_path: Path) -> list[str]:
    return [str(tmp_path / "d1"), str(tmp_path / "d2")]


def _first_run(dirs: list[str], partitions: int = 4) -> dict[int, str]:
    """A broker that made topic t, wrote 5 records per partition and shut down cleanly;
    returns where each partition landed."""
    node = Node(dirs)
    node.create_topic("t", partitions)
    for p in range(partitions):
        assert node.produce("t", p, 5) == ErrorCode.NONE
    placement = node.placement("t")
    assert set(placement.values()) == set(dirs), placement
    node.close()
    return placement


# ---- which dirs are bad at startup ------------------------------------------------------

def test_first_start_creates_missing_dirs(dirs: list[str]) -> None:
    channel = LogDirFailureChannel()
    assert check_log_dirs(dirs, channel) == {}
    assert all(os.path.isdir(d) for d in dirs) and not channel.offline_dirs
    assert not any(os.path.exists(os.path.join(d, ROOM_PROBE_FILE)) for d in dirs)


def test_later_a_missing_dir_is_reported_not_created(dirs: list[str]) -> None:
    _first_run(dirs)
    shutil.rmtree(dirs[1])
    channel = LogDirFailureChannel()
    bad = check_log_dirs(dirs, channel)
    assert list(bad) == [dirs[1]] and "missing" in bad[dirs[1]]
    assert channel.offline_dirs == {dirs[1]} and not os.path.exists(dirs[1])


def test_a_regular_file_in_place_of_a_dir_is_reported(dirs: list[str]) -> None:
    os.mkdir(dirs[0])
    Path(dirs[1]).write_text("x")
    channel = LogDirFailureChannel()
    bad = check_log_dirs(dirs, channel)
    assert list(bad) == [dirs[1]] and "not a directory" in bad[dirs[1]]
    assert channel.causes[dirs[1]].errno == errno.ENOTDIR


def test_a_dir_without_room_is_reported(dirs: list[str], monkeypatch) -> None:
    for d in dirs:
        os.mkdir(d)
    real_write = os.write
    full = os.path.join(dirs[1], ROOM_PROBE_FILE)
    opened: dict[int, str] = {}
    real_open = os.open

    def tracking_open(path, flags, mode=0o777, **kwargs):
        fd = real_open(path, flags, mode, **kwargs)
        opened[fd] = str(path)
        return fd

    def write(fd, data):
        if opened.get(fd) == full:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "open", tracking_open)
    monkeypatch.setattr(os, "write", write)
    bad = check_log_dirs(dirs, LogDirFailureChannel())
    assert list(bad) == [dirs[1]] and "no room" in bad[dirs[1]]
    assert not os.path.exists(full)


def test_every_dir_bad_names_each_and_why(dirs: list[str]) -> None:
    _first_run(dirs)
    shutil.rmtree(dirs[0])
    Path(dirs[0]).write_text("x")
    shutil.rmtree(dirs[1])
    channel = LogDirFailureChannel()
    bad = check_log_dirs(dirs, channel)
    assert "not a directory" in bad[dirs[0]] and "missing" in bad[dirs[1]]
    with pytest.raises(NoLiveLogDirError) as raised:
        LogManager(dirs, BROKER, "cluster", LogConfig(), channel).startup()
    message = str(raised.value)
    assert dirs[0] in message and "not a directory" in message
    assert dirs[1] in message and "missing" in message


# ---- replicas whose data is gone --------------------------------------------------------

def test_replicas_of_a_bad_dir_are_offline_and_the_good_dir_serves(dirs: list[str], caplog) -> None:
    placement = _first_run(dirs)
    shutil.rmtree(dirs[1])
    Path(dirs[1]).write_text("x")
    with caplog.at_level(logging.ERROR):
        node = Node(dirs)
    try:
        lost = {p for p, d in placement.items() if d == dirs[1]}
        assert set(node.replica_manager.offline_partitions) == {("t", p) for p in lost}
        for p in placement:
            expected = ErrorCode.KAFKA_STORAGE_ERROR if p in lost else ErrorCode.NONE
            assert node.produce("t", p) == expected
        for p in set(placement) - lost:
            assert node.replica_manager.list_offset("t", p, -1).offset == 6
        states = node.store.topics()["t"].partitions
        assert all(states[p].leader == NO_LEADER for p in lost)
        text = "\n".join(r.getMessage() for r in caplog.records)
        assert f"log dir {dirs[1]} is offline since startup" in text
        assert all(f"t-{p}" in text for p in lost) and "--recreate" in text
    finally:
        node.close()


def test_a_dir_replaced_by_an_empty_one_does_not_recreate_its_replicas(dirs: list[str]) -> None:
    placement = _first_run(dirs)
    lost = {p for p, d in placement.items() if d == dirs[1]}
    shutil.rmtree(dirs[1])
    os.mkdir(dirs[1])
    node = Node(dirs)
    try:
        assert not node.channel.offline_dirs, "an empty dir is a good dir"
        assert set(node.replica_manager.offline_partitions) == {("t", p) for p in lost}
        assert [n for n in os.listdir(dirs[1]) if n.startswith("t-")] == []
        # The metadata copy is back on the replaced dir.
        assert os.path.exists(os.path.join(dirs[1], METADATA_FILE))
        # New replicas may go to the replaced dir.
        node.create_topic("fresh", 4)
        assert dirs[1] in node.placement("fresh").values()
    finally:
        node.close()


def test_a_crash_before_a_new_replica_was_created_creates_it_at_restart(dirs: list[str]) -> None:
    node = Node(dirs)
    node.create_topic("t", 2)
    topic = node.store.topics()["t"]
    node.close()
    # As if the broker died between recording the topic and creating its logs.
    node.store.put_topic(dataclasses.replace(topic, partitions={
        p: dataclasses.replace(state, new_replicas=(BROKER,)) for p, state in topic.partitions.items()}))
    for d in dirs:
        for name in os.listdir(d):
            if name.startswith("t-"):
                shutil.rmtree(os.path.join(d, name))
    again = Node(dirs)
    try:
        assert again.replica_manager.offline_partitions == {}
        assert again.produce("t", 0) == ErrorCode.NONE
        assert all(s.new_replicas == () for s in again.store.topics()["t"].partitions.values())
    finally:
        again.close()


# ---- log-dirs --recreate ----------------------------------------------------------------

def test_recreate_needs_confirmation_then_the_broker_recreates_empty(dirs: list[str], caplog) -> None:
    placement = _first_run(dirs)
    lost = sorted(p for p, d in placement.items() if d == dirs[1])
    shutil.rmtree(dirs[1])
    os.mkdir(dirs[1])
    Node(dirs).close()  # the start that finds them offline

    names = [f"t-{p}" for p in lost]
    out = io.StringIO()
    assert recreate(dirs, BROKER, names, False, out) == 1
    assert "--yes" in out.getvalue() and "EMPTY" in out.getvalue()
    still = Node(dirs)
    assert set(still.replica_manager.offline_partitions) == {("t", p) for p in lost}
    still.close()

    out = io.StringIO()
    assert recreate(dirs, BROKER, names, True, out) == 0, out.getvalue()
    with caplog.at_level(logging.WARNING, logger="minikafka.controller.embedded"):
        node = Node(dirs)
    try:
        assert node.replica_manager.offline_partitions == {}
        for p in lost:
            assert node.replica_manager.list_offset("t", p, -1).offset == 0
            assert node.produce("t", p) == ErrorCode.NONE
            assert any(f"re-created t-{p} empty" in r.getMessage() for r in caplog.records)
        assert all(node.replica_manager.list_offset("t", p, -1).offset == 5 for p in placement if p not in lost)
        assert all(s.leader == BROKER for s in node.store.topics()["t"].partitions.values())
    finally:
        node.close()


def test_recreate_refuses_a_replica_that_still_has_its_data(dirs: list[str]) -> None:
    _first_run(dirs)
    out = io.StringIO()
    assert recreate(dirs, BROKER, ["t-0"], True, out) == 1
    assert "its data is in" in out.getvalue()
    store = LocalMetadataStore(dirs, LogDirFailureChannel())
    store.load(refresh=False)
    assert store.topics()["t"].partitions[0].new_replicas == ()


def test_recreate_refuses_unknown_partitions_and_bad_names(dirs: list[str]) -> None:
    _first_run(dirs)
    for names, needle in ((["t-9"], "no such partition"), (["nope-0"], "no such partition"),
                          (["t"], "TOPIC-PARTITION")):
        out = io.StringIO()
        assert recreate(dirs, BROKER, names, True, out) == 1
        assert needle in out.getvalue(), out.getvalue()


def test_recreate_refuses_while_a_broker_holds_the_dirs(dirs: list[str]) -> None:
    placement = _first_run(dirs)
    lost = [p for p, d in placement.items() if d == dirs[1]]
    shutil.rmtree(dirs[1])
    os.mkdir(dirs[1])
    fd = os.open(os.path.join(dirs[0], LOCK_FILE), os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a running broker does
        out = io.StringIO()
        assert recreate(dirs, BROKER, [f"t-{lost[0]}"], True, out) == 1
        assert "a broker is running" in out.getvalue()
    finally:
        os.close(fd)


def test_cli_log_dirs_recreate(dirs: list[str], capsys) -> None:
    placement = _first_run(dirs)
    lost = [p for p, d in placement.items() if d == dirs[1]]
    shutil.rmtree(dirs[1])
    os.mkdir(dirs[1])
    argv = ["log-dirs", "--override", f"log.dirs={','.join(dirs)}", "--recreate", f"t-{lost[0]}"]
    assert cli_main(argv) == 1
    assert cli_main([*argv, "--yes"]) == 0
    assert f"t-{lost[0]}: will be re-created EMPTY" in capsys.readouterr().out


# ---- the cluster metadata survives the loss of any one dir -----------------------------

def test_metadata_survives_losing_a_dir_and_the_newest_copy_wins(tmp_path: Path) -> None:
    dirs = [str(tmp_path / f"d{i}") for i in range(3)]
    node = Node(dirs)
    node.create_topic("t", 3)
    node.close()
    stale = json.loads(Path(dirs[2], METADATA_FILE).read_text())

    # d0 goes bad; a change is written to the other two, each of which has the newest copy.
    shutil.rmtree(dirs[0])
    Path(dirs[0]).write_text("x")
    node = Node(dirs)
    node.create_topic("u", 1)
    node.close()
    newest = json.loads(Path(dirs[1], METADATA_FILE).read_text())
    assert newest["version"] > stale["version"]
    assert json.loads(Path(dirs[2], METADATA_FILE).read_text()) == newest

    # The placement memory of moves and the dynamic configs travel in the same document.
    store = LocalMetadataStore(dirs, LogDirFailureChannel())
    store.load()
    store.put_log_dir_request(BROKER, "later", 0, dirs[2])
    store.put_broker_configs("", {"log.retention.ms": "1000"})
    newest = json.loads(Path(dirs[1], METADATA_FILE).read_text())

    # A dir coming back with an older copy does not win over the newer ones.
    os.remove(dirs[0])
    os.mkdir(dirs[0])
    Path(dirs[0], METADATA_FILE).write_text(json.dumps(stale))
    Path(dirs[1], METADATA_FILE).write_text("{torn")
    store = LocalMetadataStore(dirs, LogDirFailureChannel())
    store.load()
    assert set(store.topics()) == {"t", "u"}
    assert store.log_dir_requests(BROKER) == {("later", 0): dirs[2]}
    assert store.broker_configs() == {"": {"log.retention.ms": "1000"}}
    assert json.loads(Path(dirs[0], METADATA_FILE).read_text())["version"] > newest["version"]
