"""Option parsing and offset arithmetic of the Spark data source: pure functions, no Spark, no sockets."""

from __future__ import annotations

import pytest

from minikafka.spark.options import (
    EARLIEST,
    LATEST,
    Assign,
    OptionError,
    SinkOptions,
    SourceOptions,
    Subscribe,
    SubscribePattern,
    offsets_to_json,
    parse_offsets_json,
)
from minikafka.spark.planning import OffsetRange, rate_limit, split_ranges

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def source(streaming: bool = False, **options: str) -> SourceOptions:
    return SourceOptions.parse({**BOOT, **options}, streaming=streaming)


def test_defaults_follow_sparks_kafka_source():
    batch = source(subscribe="a, b")
    assert batch.subscription == Subscribe(("a", "b"))
    assert (batch.starting.kind, batch.ending.kind) == ("earliest", "latest")
    assert batch.fail_on_data_loss and not batch.include_headers
    assert batch.max_offsets_per_trigger is None
    assert batch.client_config == {"bootstrap.servers": "127.0.0.1:9092", "isolation.level": "read_uncommitted"}
    assert source(subscribe="a", **{"kafka.isolation.level": "Read_Committed"}).client_config["isolation.level"] \
        == "read_committed"
    stream = source(streaming=True, subscribePattern="ev.*")
    assert stream.subscription == SubscribePattern("ev.*")
    assert stream.starting.kind == "latest" and stream.ending is None
    assert stream.subscription.matches("events") and not stream.subscription.matches("my-events")


def test_option_names_are_case_insensitive_and_kafka_options_reach_the_client():
    parsed = SourceOptions.parse({"KAFKA.BOOTSTRAP.SERVERS": "h:1", "SUBSCRIBE": "t", "failondataloss": "FALSE",
                                  "kafka.client.id": "me", "kafka.default.api.timeout.ms": "1500",
                                  "maxOffsetsPerTrigger": "10", "includeHeaders": "true"}, streaming=True)
    assert parsed.client_config == {"bootstrap.servers": "h:1", "client.id": "me", "isolation.level": "read_uncommitted"}
    assert parsed.api_timeout_ms == 1500
    assert not parsed.fail_on_data_loss and parsed.include_headers and parsed.max_offsets_per_trigger == 10


def test_assign_json():
    parsed = source(assign='{"a": [1, 0], "b": [2]}')
    assert parsed.subscription == Assign((("a", 0), ("a", 1), ("b", 2)))
    with pytest.raises(OptionError, match="option assign"):
        source(assign='{"a": "0"}')
    with pytest.raises(OptionError, match="option assign must be JSON"):
        source(assign="a:0")


@pytest.mark.parametrize("options, message", [
    ({"subscribe": "t", "bogus": "1"}, "unknown option 'bogus' for the minikafka source"),
    ({"subscribe": "t", "minOffsetsPerTrigger": "1"}, "option minOffsetsPerTrigger of Spark's Kafka source is not"),
    ({"subscribe": "t", "startingTimestamp": "soon"}, "option startingTimestamp must be a timestamp in milliseconds"),
    ({"subscribe": "t", "endingOffsetsByTimestamp": '{"t": {"0": -5}}'}, "bad offset -5 for partition t-0"),
    ({"subscribe": "t", "startingOffsetsByTimestampStrategy": "skip"},
     "option startingOffsetsByTimestampStrategy must be error or latest"),
    ({}, "exactly one of the options assign, subscribe, subscribePattern"),
    ({"subscribe": "t", "assign": '{"t":[0]}'}, r"\(given: assign, subscribe\)"),
    ({"subscribe": " , "}, "option subscribe needs"),
    ({"subscribePattern": "("}, "option subscribePattern is not a valid regular expression"),
    ({"subscribe": "t", "failOnDataLoss": "yes"}, "option failOnDataLoss must be true or false"),
    ({"subscribe": "t", "minPartitions": "0"}, "option minPartitions must be >= 1"),
    ({"subscribe": "t", "maxOffsetsPerTrigger": "ten"}, "option maxOffsetsPerTrigger must be an integer"),
    ({"subscribe": "t", "kafka.auto.offset.reset": "earliest"}, "option kafka.auto.offset.reset is not supported"),
    ({"subscribe": "t", "kafka.isolation.level": "committed"},
     "option kafka.isolation.level must be read_uncommitted or read_committed, got 'committed'"),
    ({"subscribe": "t", "startingOffsets": "latest"}, "startingOffsets cannot be latest"),
    ({"subscribe": "t", "startingOffsets": '{"t": {"0": -1}}'}, "startingOffsets cannot be latest"),
    ({"subscribe": "t", "endingOffsets": "earliest"}, "endingOffsets cannot be earliest"),
    ({"subscribe": "t", "startingOffsets": "first"}, "option startingOffsets must be earliest, latest or JSON"),
    ({"subscribe": "t", "startingOffsets": '{"t": {"x": 1}}'}, "'x' of topic 't' is not a partition number"),
    ({"subscribe": "t", "endingOffsets": '{"t": {"0": -3}}'}, "bad offset -3 for partition t-0"),
])
def test_bad_source_options_name_the_option(options, message):
    with pytest.raises(OptionError, match=message):
        source(**options)


def test_missing_bootstrap_is_named():
    with pytest.raises(OptionError, match="option kafka.bootstrap.servers is required"):
        SourceOptions.parse({"subscribe": "t"}, streaming=False)
    with pytest.raises(OptionError, match="option kafka.bootstrap.servers is required"):
        SinkOptions.parse({"topic": "t", "kafka.bootstrap.servers": " "})


def test_streaming_refuses_ending_offsets():
    with pytest.raises(OptionError, match="endingOffsets is not valid for streaming"):
        source(streaming=True, subscribe="t", endingOffsets="latest")
    with pytest.raises(OptionError, match="endingTimestamp is not valid for streaming"):
        source(streaming=True, subscribe="t", endingTimestamp="1")


def test_timestamp_options_outrank_offsets_as_in_spark():
    parsed = source(subscribe="t", startingOffsets="earliest", startingTimestamp="1000",
                    startingOffsetsByTimestamp='{"t": {"0": 5}}', endingOffsetsByTimestamp='{"t": {"0": 9}}')
    assert (parsed.starting.option, parsed.starting.kind, parsed.starting.timestamp) == ("startingTimestamp",
                                                                                         "timestamp", 1000)
    assert parsed.starting.no_match == "error"
    assert parsed.ending.option == "endingOffsetsByTimestamp" and parsed.ending.timestamps == {("t", 0): 9}
    assert parsed.ending.no_match == "latest"
    by_partition = source(subscribe="t", startingOffsetsByTimestamp='{"t": {"0": 5}}',
                          startingOffsetsByTimestampStrategy="LATEST")
    assert by_partition.starting.timestamps == {("t", 0): 5} and by_partition.starting.no_match == "latest"


def test_sink_options():
    parsed = SinkOptions.parse({**BOOT, "topic": "out", "kafka.linger.ms": "0", "checkpointLocation": "/tmp/x"})
    assert parsed.topic == "out" and parsed.client_config["linger.ms"] == "0"
    with pytest.raises(OptionError, match="unknown option 'subscribe' for the minikafka sink"):
        SinkOptions.parse({**BOOT, "subscribe": "t"})
    with pytest.raises(OptionError, match="kafka.value.serializer is not supported"):
        SinkOptions.parse({**BOOT, "kafka.value.serializer": "x"})


def test_offsets_json_round_trip_is_stable():
    offsets = {("b", 10): 5, ("a", 2): LATEST, ("a", 10): EARLIEST, ("a", 0): 0}
    as_json = offsets_to_json(offsets)
    assert list(as_json) == ["a", "b"] and list(as_json["a"]) == ["0", "2", "10"]
    assert parse_offsets_json(as_json, "x") == offsets
    assert offsets_to_json(dict(reversed(list(offsets.items())))) == as_json


def test_rate_limit_spreads_the_budget_by_backlog():
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 7}
    latest = {("t", 0): 900, ("t", 1): 200, ("t", 2): 7}
    end = rate_limit(start, latest, 100)
    assert sum(end[tp] - start[tp] for tp in start) == 100
    assert end == {("t", 0): 90, ("t", 1): 110, ("t", 2): 7}
    assert rate_limit(start, latest, 10_000) == latest


def test_rate_limit_always_makes_progress_and_never_overshoots():
    start = {("t", p): 0 for p in range(8)}
    latest = {("t", p): 3 for p in range(8)}
    end = rate_limit(start, latest, 5)
    assert sum(end.values()) == 5 and all(0 <= end[tp] <= latest[tp] for tp in end)
    one = rate_limit({("t", 0): 0, ("t", 1): 0}, {("t", 0): 1, ("t", 1): 1_000_000}, 1)
    assert sum(one.values()) == 1


def test_split_ranges_for_min_partitions():
    ranges = [OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 50, 53), OffsetRange("t", 2, 9, 9)]
    assert split_ranges(ranges, None) == ranges[:2]
    split = split_ranges(ranges, 6)
    assert len(split) >= 6
    for original in ranges[:2]:
        pieces = sorted(r for r in split if r.partition == original.partition)
        assert pieces[0].start == original.start and pieces[-1].end == original.end
        assert all(a.end == b.start for a, b in zip(pieces, pieces[1:], strict=False))
    assert split_ranges([OffsetRange("t", 0, 0, 2)], 10) == [OffsetRange("t", 0, 0, 1), OffsetRange("t", 0, 1, 2)]
