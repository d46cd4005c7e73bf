"""A real kill -9 in the middle of appending: every acknowledged batch survives the restart."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import uuid

from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.log import LogConfig
from minikafka.storage.log_manager import LogManager
from tests.unit.storage.helpers import decode_batches, make_batch, read_all

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PID = 31
CONFIG = dict(segment_bytes=20_000, index_interval_bytes=512)

WRITER = textwrap.dedent(
    """
    import json, sys, uuid
    from minikafka.storage.failure_channel import LogDirFailureChannel
    from minikafka.storage.log import LogConfig
    from minikafka.storage.log_manager import LogManager
    from tests.unit.storage.helpers import make_batch

    manager = LogManager([sys.argv[1]], 1, "c", LogConfig(**json.loads(sys.argv[2])), LogDirFailureChannel())
    manager.startup()
    log = manager.get_or_create_log("t", 0, uuid.UUID(int=5))
    seq = 0
    while True:
        result = log.append_as_leader(
            make_batch(3, value_size=90, producer_id=int(sys.argv[3]), producer_epoch=0, base_sequence=seq), 0, seq)
        print(seq, result.base_offset, flush=True)
        seq += 3
    """
)


def test_acknowledged_batches_survive_kill_9(tmp_path):
    log_dir = str(tmp_path / "d")
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, log_dir, json.dumps(CONFIG), str(PID)],
        stdout=subprocess.PIPE, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT},
    )
    acked = []
    try:
        for line in child.stdout:
            acked.append(tuple(map(int, line.split())))
            if len(acked) == 300:
                break
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
    assert len(acked) == 300, "writer died early"
    manager = LogManager([log_dir], 1, "c", LogConfig(**CONFIG), LogDirFailureChannel())
    manager.startup()
    try:
        log = manager.get_log("t", 0)
        batches = decode_batches(read_all(log))
        assert [b.base_offset for b in batches] == list(range(0, log.log_end_offset, 3))
        stored = {b.base_offset: b.base_sequence for b in batches}
        # The writer ran on after the last line we read; everything it acknowledged is there.
        assert all(stored.get(offset) == seq for seq, offset in acked)
        last = batches[-1]
        retry = log.append_as_leader(
            make_batch(3, value_size=90, producer_id=PID, producer_epoch=0, base_sequence=last.base_sequence),
            0, 0,
        )
        assert retry.duplicate and retry.base_offset == last.base_offset
        assert log.topic_id == uuid.UUID(int=5)
    finally:
        manager.shutdown()
