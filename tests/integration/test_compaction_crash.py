"""kill -9 at each step of a clean (as MINIKAFKA_TEST_EXIT_AT makes the broker exit there, with no
cleanup): the restarted broker has the old segments or the cleaned ones, never a mix, no .cleaned
or .swap file is left, and every key's latest acknowledged value is there.

Points: the cleaned files written but not decided; the swap decided (the .log.swap renamed); the
old segments retired; the clean done and its checkpoint written."""

from __future__ import annotations

import pytest

from tests.integration.broker_process import wait_until
from tests.integration.clients import confluent_consume, confluent_produce, create_topic
from tests.integration.test_compaction import COMPACTED, END, KEYS, SMALL_BATCHES

pytestmark = pytest.mark.integration

TOPIC = "crash-clean"
POINTS = {"clean.cleaned_written": False, "clean.swap_decided": True, "clean.old_segments_retired": True,
          "clean.checkpointed": True}  # -> whether the cleaned result stands after the restart
EXIT_STATUS = 86


@pytest.mark.parametrize("point", POINTS)
def test_a_clean_killed_at_any_step_keeps_old_or_new_segments_and_every_latest_value(
        broker_factory, monkeypatch, point: str) -> None:
    monkeypatch.setenv("MINIKAFKA_TEST_EXIT_AT", point)
    broker = broker_factory(overrides={"log.cleaner.backoff.ms": "100", "log.segment.delete.delay.ms": "0"})
    monkeypatch.delenv("MINIKAFKA_TEST_EXIT_AT")
    # Records younger than min.compaction.lag.ms are not cleaned: the clean comes after the last write.
    create_topic(broker.bootstrap, TOPIC, 1, {**COMPACTED, "min.compaction.lag.ms": "3000"})
    written = [(b"key-%02d" % k, b"v-%d-%d" % (k, r) + b"." * 60) for r in range(20) for k in range(KEYS)]
    written.append((b"end", END))
    confluent_produce(broker.bootstrap, TOPIC, written, partition=0, **SMALL_BATCHES)
    assert broker.process is not None
    wait_until(lambda: broker.process is not None and broker.process.poll() == EXIT_STATUS, 30, interval=0.05,
               what=f"the broker stopped at {point}")

    # Restarted with the cleaner off: what is on disk is what the crash left, finished or dropped.
    broker.overrides["log.cleaner.enable"] = "false"
    broker.start()
    dir_path = broker.partition_dirs()[f"{TOPIC}-0"] / f"{TOPIC}-0"
    assert not [p.name for p in dir_path.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    read = confluent_consume(broker.bootstrap, TOPIC, [0])
    assert {r.key: r.value for r in read} == dict(written), "every key's latest value"
    offsets = [r.offset for r in read]
    assert offsets == sorted(set(offsets)) and offsets[-1] == len(written) - 1
    cleaned = len(read) < len(written)
    assert cleaned is POINTS[point], f"{len(read)} of {len(written)} records after a crash at {point}"
    if not cleaned:
        assert offsets == list(range(len(written))), "the old segments, whole"
