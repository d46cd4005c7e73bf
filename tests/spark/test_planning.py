"""Driver-side planning of the readers against a fake cluster: no Spark job, no sockets."""

from __future__ import annotations

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from minikafka.spark import source
from minikafka.spark.consumer import DataLossError
from minikafka.spark.options import OptionError, SourceOptions
from minikafka.spark.schema import source_schema


class FakeCluster:
    """Stands in for ClusterView: topics with partition counts, and each partition's offsets."""

    bootstrap = "fake:9092"

    def __init__(self, ends: dict[tuple[str, int], tuple[int, int]]):
        self.ends = ends  # (topic, partition) -> (earliest, latest)

    def topics(self, names=None) -> dict[str, int]:
        counts: dict[str, int] = {}
        for topic, _ in self.ends:
            counts[topic] = counts.get(topic, 0) + 1
        return counts if names is None else {t: c for t, c in counts.items() if t in set(names)}

    def earliest(self, partitions):
        return {tp: self.ends[tp][0] for tp in partitions}

    def latest(self, partitions):
        return {tp: self.ends[tp][1] for tp in partitions}

    def close(self) -> None:
        pass


def stream_reader(cluster: FakeCluster, **options: str) -> source.MiniKafkaStreamReader:
    parsed = SourceOptions.parse({"kafka.bootstrap.servers": "fake:9092", **options}, streaming=True)
    reader = source.MiniKafkaStreamReader(parsed, source_schema(False))
    reader._view = cluster  # type: ignore[assignment]
    return reader


def ranges(planned) -> list[tuple[str, int, int, int]]:
    return [(p.offset_range.topic, p.offset_range.partition, p.offset_range.start, p.offset_range.end) for p in planned]


def test_initial_offsets_follow_starting_offsets():
    cluster = FakeCluster({("t", 0): (5, 50), ("t", 1): (0, 7)})
    assert stream_reader(cluster, subscribe="t").initialOffset() == {"t": {"0": 50, "1": 7}}
    assert stream_reader(cluster, subscribe="t", startingOffsets="earliest").initialOffset() == {"t": {"0": 5, "1": 0}}
    assert stream_reader(cluster, subscribe="t", startingOffsets='{"t": {"0": 9, "1": -2}}').initialOffset() == {
        "t": {"0": 9, "1": 0}}


def test_micro_batches_are_capped_and_new_partitions_start_at_their_earliest():
    cluster = FakeCluster({("t", 0): (0, 1000), ("t", 1): (0, 1000)})
    reader = stream_reader(cluster, subscribe="t", maxOffsetsPerTrigger="100")
    assert reader.getDefaultReadLimit() == ReadMaxRows(100)
    start = {"t": {"0": 900, "1": 500}}
    end = reader.latestOffset(start, ReadMaxRows(100))
    assert end == {"t": {"0": 917, "1": 583}}
    assert ranges(reader.partitions(start, end)) == [("t", 0, 900, 917), ("t", 1, 500, 583)]

    cluster.ends[("t", 2)] = (3, 13)  # a partition added to the topic
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end == {"t": {"0": 1000, "1": 1000, "2": 13}}
    assert ranges(reader.partitions(start, end))[-1] == ("t", 2, 3, 13)
    assert reader.reportLatestOffset() == end


def test_available_now_stops_at_the_offsets_seen_when_it_began():
    cluster = FakeCluster({("t", 0): (0, 10)})
    reader = stream_reader(cluster, subscribe="t")
    reader.prepareForTriggerAvailableNow()
    cluster.ends[("t", 0)] = (0, 20)
    assert reader.latestOffset({"t": {"0": 0}}, ReadAllAvailable()) == {"t": {"0": 10}}


def test_lost_partitions_and_offsets_going_back_are_data_loss():
    cluster = FakeCluster({("t", 0): (0, 10)})
    strict = stream_reader(cluster, subscribe="t", failOnDataLoss="true")
    with pytest.raises(DataLossError, match="partitions t-1 were being read but no longer exist"):
        strict.latestOffset({"t": {"0": 0, "1": 4}}, ReadAllAvailable())
    with pytest.raises(DataLossError, match="partition t-0: offset went back from 12 to 10"):
        strict.partitions({"t": {"0": 12}}, {"t": {"0": 10}})

    lenient = stream_reader(cluster, subscribe="t", failOnDataLoss="false")
    assert lenient.latestOffset({"t": {"0": 0, "1": 4}}, ReadAllAvailable()) == {"t": {"0": 10}}
    assert lenient.partitions({"t": {"0": 12}}, {"t": {"0": 10}}) == []


def test_batch_plan_has_one_range_per_partition(monkeypatch):
    cluster = FakeCluster({("a", 0): (2, 40), ("a", 1): (0, 0), ("b", 0): (0, 9)})
    monkeypatch.setattr(source, "_cluster_view", lambda options: cluster)

    def plan(**options: str):
        parsed = SourceOptions.parse({"kafka.bootstrap.servers": "fake:9092", **options}, streaming=False)
        return ranges(source.MiniKafkaBatchReader(parsed, source_schema(False)).partitions())

    assert plan(subscribe="a,b") == [("a", 0, 2, 40), ("b", 0, 0, 9)]  # the empty partition is left out
    assert plan(subscribePattern="b") == [("b", 0, 0, 9)]
    assert plan(subscribe="a,b", minPartitions="4") == [
        ("a", 0, 2, 12), ("a", 0, 12, 21), ("a", 0, 21, 30), ("a", 0, 30, 40), ("b", 0, 0, 9)]
    with pytest.raises(source.MissingTopicError, match="option subscribe: topic c does not exist"):
        plan(subscribe="a,c")
    assert plan(subscribe="a,c", failOnDataLoss="false") == [("a", 0, 2, 40)]
    with pytest.raises(OptionError, match="partition a-0: startingOffsets 30 is after endingOffsets 20"):
        plan(assign='{"a": [0]}', startingOffsets='{"a": {"0": 30}}', endingOffsets='{"a": {"0": 20}}')
