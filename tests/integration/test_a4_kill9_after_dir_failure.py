"""A log dir fails, the broker is killed (kill -9) right after, and comes back twice: first with
the dir still bad, then with it replaced by an empty dir (issue 5, item 3). Each time:
- the broker runs and serves every record acknowledged on the good dir, once;
- the failed dir's replicas are offline (KAFKA_STORAGE_ERROR, no leader, offline_replicas),
  never silently re-created empty, and the log says so;
- OfflineLogDirectoryCount says whether the dir itself is bad, OfflineReplicaCount counts the
  lost replicas.
Finally `minikafka log-dirs --recreate ... --yes` (refused while the broker runs, a no-op
without --yes) lets the operator accept the loss: the replicas come back empty and writable.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration import disk_faults
from tests.integration.broker_process import REPO_ROOT, BrokerProcess, wait_until
from tests.integration.clients import create_topic
from tests.integration.disk_faults import FAULT_KINDS, KAFKA_STORAGE_ERROR, LEADER_NOT_AVAILABLE, Tmpfs

pytestmark = pytest.mark.integration

TOPIC = "lost"
PARTITIONS = 4


def _log_dirs_cli(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "minikafka", "log-dirs",
               "--override", f"log.dirs={','.join(str(d) for d in broker.log_dirs)}",
               "--override", f"broker.id={broker.broker_id}", *args]
    return subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=False)


def _check_lost_state(broker: BrokerProcess, good: list[int], lost: list[int], acked: dict,
                      dir_offline: bool) -> None:
    assert broker.is_running()
    assert disk_faults.offline_counts(broker) == (float(dir_offline), float(len(lost)))
    metadata = disk_faults.partition_metadata(broker, TOPIC)
    for p in lost:
        m = metadata[p]
        assert (m.error_code, m.leader_id, list(m.offline_replicas)) == (LEADER_NOT_AVAILABLE, -1, [1]), m
        assert disk_faults.raw_produce(broker, TOPIC, p, b"after") == KAFKA_STORAGE_ERROR
        assert disk_faults.raw_fetch(broker, TOPIC, p, 0, 100).error_code == KAFKA_STORAGE_ERROR
    for p in good:
        assert (metadata[p].error_code, metadata[p].leader_id) == (0, 1), metadata[p]
    disk_faults.assert_read_back(broker, TOPIC, good, acked)
    # Nothing of the lost partitions was re-created: not in the good dir, not in a fresh one.
    lost_names = {f"{TOPIC}-{p}" for p in lost}
    recreated = [(n, d) for n, d in broker.partition_dirs().items()
                 if n in lost_names and (d == broker.log_dirs[0] or not dir_offline)]
    assert not recreated, recreated
    log_dirs = disk_faults.describe_log_dirs(broker)
    if log_dirs is not None:
        error, names = log_dirs[str(broker.log_dirs[1])]
        assert error == (KAFKA_STORAGE_ERROR if dir_offline else 0), log_dirs
        assert not names & {f"{TOPIC}-{p}" for p in lost}, log_dirs
    offline_line = disk_faults.log_lines(broker, "replica(s) offline since startup", f"{TOPIC}-{lost[0]}")
    assert offline_line, "no log line lists the offline replicas"


@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_kill9_right_after_a_dir_failure_then_restart_bad_then_empty(
        kind: str, tmp_path: Path, made_brokers: list[BrokerProcess], tmpfs_mounts: list[Tmpfs]) -> None:
    broker, tmpfs = disk_faults.start_broker_with_doomed_dir(kind, tmp_path / "broker", made_brokers,
                                                             tmpfs_mounts)
    doomed_dir = broker.log_dirs[1]
    create_topic(broker.bootstrap, TOPIC, PARTITIONS)
    good, lost = disk_faults.split_by_dir(broker, TOPIC)
    acked = disk_faults.produce_keyed(broker, TOPIC, good + lost, 20, "before")

    disk_faults.inject(kind, doomed_dir, tmpfs)
    assert disk_faults.raw_produce(broker, TOPIC, lost[0], bytes(1 << 16)) == KAFKA_STORAGE_ERROR
    wait_until(lambda: disk_faults.offline_counts(broker)[0] == 1.0, timeout=10, what="the dir offline")
    broker.kill9()

    # 1. The dir is still bad. (An unmounted disk whose mount point is gone: missing.)
    if kind == "lazy-unmount":
        os.rmdir(doomed_dir)
    broker.start()
    _check_lost_state(broker, good, lost, acked, dir_offline=True)
    reasons = {"regular-file": "not a directory", "enospc": "no room", "lazy-unmount": "missing"}
    assert disk_faults.log_lines(broker, f"log dir {doomed_dir} is offline since startup", reasons[kind])

    # 2. The dir is replaced by an empty one.
    broker.kill9()
    if tmpfs is not None:
        tmpfs.unmount()  # the full tmpfs goes; its empty mount point stays
    disk_faults.replace_with_empty_dir(doomed_dir)
    broker.start()
    _check_lost_state(broker, good, lost, acked, dir_offline=False)
    assert (doomed_dir / "minikafka-metadata.json").exists(), "the metadata copy was not restored"
    more = disk_faults.produce_keyed(broker, TOPIC, good, 5, "after")

    # 3. The operator accepts the loss.
    names = [f"{TOPIC}-{p}" for p in lost]
    refused = _log_dirs_cli(broker, "--recreate", *names, "--yes")
    assert refused.returncode == 1 and "a broker is running" in refused.stdout, refused
    assert broker.stop() == 0
    unconfirmed = _log_dirs_cli(broker, "--recreate", *names)
    assert unconfirmed.returncode == 1 and "--yes" in unconfirmed.stdout, unconfirmed
    done = _log_dirs_cli(broker, "--recreate", *names, "--yes")
    assert done.returncode == 0, done
    broker.start()
    assert disk_faults.offline_counts(broker) == (0.0, 0.0)
    for p in lost:
        assert disk_faults.log_lines(broker, f"re-created {TOPIC}-{p} empty")
    fresh = disk_faults.produce_keyed(broker, TOPIC, lost, 3, "recreated")
    assert sorted(offset for _, offset in fresh.values()) == sorted(list(range(3)) * len(lost))
    kept = {k: at for k, at in acked.items() if at[0] in good}  # the lost partitions' old records are gone
    disk_faults.assert_read_back(broker, TOPIC, good + lost, {**kept, **more, **fresh})
    shutil.rmtree(doomed_dir, ignore_errors=True)  # a tmpfs' empty mount point, or plain data
