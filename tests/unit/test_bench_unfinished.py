"""bench/vs_kafka.py: a figure one kind cannot reach in time is reported as such, and the bench
goes on (Kafka 3.9 did not have 30,000 replicas led again within ten minutes of a failover)."""

from __future__ import annotations

from typing import Any

from bench.vs_kafka import FIGURES, Figure, Sizes, measure, table

SIZES = Sizes(records=1, txn_records=1, per_txn=1, startup_partitions=1, latency_rate=1, latency_seconds=1.0,
              copy_bytes=1, dirty_bytes=1, keys=1, recovery_segments=1, scale_partitions=1, failover_partitions=1)


class FakeSide:
    def __init__(self, kind: str, seconds: float | None) -> None:
        self.kind, self.seconds, self.runs = kind, seconds, 0


def test_a_kind_that_times_out_is_not_run_again_and_the_table_says_it_did_not_finish() -> None:
    def failover(side: Any, run: str, sizes: Sizes) -> dict[str, float]:
        side.runs += 1
        if side.seconds is None:
            raise TimeoutError("every failover partition led not reached within 600s")
        return {"seconds": side.seconds + side.runs}

    figure = Figure("failover", FIGURES["failover"].metrics, failover, brokers=3)
    sides: dict[str, Any] = {"kafka": FakeSide("kafka", None), "minikafka": FakeSide("minikafka", 2.0)}
    outcome = measure(figure, sides, SIZES, repeat=3)
    assert sides["kafka"].runs == 1, "not tried again after its warm-up timed out"
    assert sides["minikafka"].runs == 4 and [r["seconds"] for r in outcome.runs["minikafka"]] == [4.0, 5.0, 6.0]
    assert "600s" in outcome.unfinished["kafka"]
    (row,) = table([outcome])[2:]
    assert row.split(" | ")[1:] == ["did not finish", "5.00 s", "—", "≤ 1.0", "yes |"]

    sides = {"kafka": FakeSide("kafka", 1.0), "minikafka": FakeSide("minikafka", None)}
    (row,) = table([measure(figure, sides, SIZES, repeat=1)])[2:]
    assert row.split(" | ")[1:] == ["3.00 s", "did not finish", "—", "≤ 1.0", "no |"]
