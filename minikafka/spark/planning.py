"""Offset arithmetic of the Spark data source: offset ranges, rate limits, range splitting.

Pure functions over {(topic, partition): offset} maps; called on the driver by the readers.
No I/O, no pyspark.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from minikafka.spark.options import TopicPartition


@dataclass(frozen=True, order=True)
class OffsetRange:
    """Records [start, end) of one partition: what one Spark task reads."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


def rate_limit(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
               max_records: int) -> dict[TopicPartition, int]:
    """End offsets that advance from `start` towards `latest` by at most `max_records` in all.

    Each partition gets a share of the budget proportional to its backlog; the rounding
    remainder goes to the largest backlogs, so the whole budget is used when there is that
    much to read and every batch makes progress. A partition missing from `start` is taken
    to have nothing to read: callers resolve new partitions' start offsets first.
    """
    backlog = {tp: max(0, latest[tp] - start.get(tp, latest[tp])) for tp in latest}
    total = sum(backlog.values())
    if total <= max_records:
        return dict(latest)
    shares = {tp: max_records * size / total for tp, size in backlog.items()}
    granted = {tp: math.floor(share) for tp, share in shares.items()}
    left = max_records - sum(granted.values())
    by_remainder = sorted(backlog, key=lambda tp: (granted[tp] - shares[tp], -backlog[tp], tp))
    for tp in by_remainder:
        if left <= 0:
            break
        if granted[tp] < backlog[tp]:
            granted[tp] += 1
            left -= 1
    return {tp: start[tp] + granted[tp] if backlog[tp] else latest[tp] for tp in latest}


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """At least `min_partitions` ranges when there are that many records, splitting the largest.

    Each range is cut into pieces in proportion to its share of all records; a partition is
    never cut finer than one record per piece.
    """
    ranges = [r for r in ranges if r.size > 0]
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    result: list[OffsetRange] = []
    for r in ranges:
        pieces = max(1, min(r.size, math.ceil(min_partitions * r.size / total)))
        step = r.size / pieces
        bounds = [r.start + round(step * i) for i in range(pieces)] + [r.end]
        result.extend(OffsetRange(r.topic, r.partition, lo, hi) for lo, hi in zip(bounds, bounds[1:], strict=False)
                      if hi > lo)
    return result
