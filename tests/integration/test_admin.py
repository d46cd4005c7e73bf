"""The everyday admin APIs through kafka-python's command line (`kafka-python admin ...`, the
same as `python -m kafka.admin ...`) and admin client, against a real broker: topics, configs
(topic and dynamic broker configs), groups, partitions; and what deleting a topic does to its
files, to its producers and to other topics."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.protocol.consumer.offsets import OffsetTimestamp

from tests.integration.broker_process import BrokerProcess, wait_until
from tests.integration.clients import confluent_consume, confluent_produce, create_topic
from tests.integration.disk_faults import raw_produce

pytestmark = pytest.mark.integration

OVERRIDES = {"auto.create.topics.enable": "false", "log.segment.delete.delay.ms": "300",
             "log.retention.check.interval.ms": "300", "group.initial.rebalance.delay.ms": "0",
             "offsets.topic.num.partitions": "5"}
INVALID_CONFIG = 40
INVALID_REQUEST = 42  # Kafka's answer to a refused broker config (INVALID_CONFIG is a topic's)


@pytest.fixture(scope="module")
def admin_broker(tmp_path_factory: pytest.TempPathFactory):
    broker = BrokerProcess(tmp_path_factory.mktemp("admin"), overrides=OVERRIDES)
    try:
        yield broker.start()
    finally:
        broker.close()


def _command() -> list[str]:
    script = Path(sys.executable).with_name("kafka-python")
    return [str(script), "admin"] if script.exists() else [sys.executable, "-m", "kafka.admin"]


def cli(broker: BrokerProcess, *args: str, fmt: str = "json", ok: bool = True) -> Any:
    """Run `kafka-python admin -b <broker> --format <fmt> <args>`; the parsed output (json) or text."""
    done = subprocess.run([*_command(), "-b", broker.bootstrap, "--format", fmt, *args],
                          capture_output=True, text=True, timeout=60)
    if ok:
        assert done.returncode == 0, f"{args}: rc {done.returncode}\n{done.stdout}\n{done.stderr}"
    else:
        assert done.returncode != 0, f"{args} should have failed:\n{done.stdout}"
        return done.stdout + done.stderr
    return json.loads(done.stdout) if fmt == "json" else done.stdout


def _topic_configs(broker: BrokerProcess, topic: str) -> dict[str, Any]:
    return cli(broker, "configs", "describe", "-r", "topic", "-n", topic)["topic"][topic]


def test_topics_create_describe_delete(admin_broker: BrokerProcess) -> None:
    created = cli(admin_broker, "topics", "create", "-t", "cli-topic", "--num-partitions", "3",
                  "--replication-factor", "1")
    assert created["topics"][0]["error_code"] == 0
    (described,) = cli(admin_broker, "topics", "describe", "-t", "cli-topic")
    assert (described["name"], described["is_internal"], len(described["partitions"])) == ("cli-topic", False, 3)
    assert all(p["leader_id"] == 1 for p in described["partitions"])
    assert "cli-topic" in cli(admin_broker, "topics", "list")
    again = cli(admin_broker, "topics", "create", "-t", "cli-topic", "--num-partitions", "1",
                "--replication-factor", "1", ok=False)
    assert "TopicAlreadyExists" in again
    deleted = cli(admin_broker, "topics", "delete", "-t", "cli-topic")
    assert deleted["topics"][0]["error_code"] == 0
    assert "cli-topic" not in cli(admin_broker, "topics", "list")
    missing = cli(admin_broker, "topics", "delete", "-t", "cli-topic", ok=False)
    assert "UnknownTopicOrPartition" in missing


def test_configs_describe_and_alter(admin_broker: BrokerProcess) -> None:
    create_topic(admin_broker.bootstrap, "cfg", 1)
    before = _topic_configs(admin_broker, "cfg")
    assert before["retention.ms"]["config_source"] == "DEFAULT_CONFIG"
    assert before["cleanup.policy"]["value"] == "delete"
    assert cli(admin_broker, "configs", "alter", "-r", "topic", "-n", "cfg", "-c", "retention.ms=3600000",
               "-c", "segment.bytes=1048576", "-c", "message.timestamp.type=LogAppendTime") == {"topic": {"cfg": "OK"}}
    after = _topic_configs(admin_broker, "cfg")
    assert after["retention.ms"]["value"] == "3600000"
    assert after["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert after["message.timestamp.type"]["value"] == "LogAppendTime"

    # Bad input: an unknown key, a value of the wrong type, one bad key among good ones.
    for bad in (["-c", "no.such.config=1", "--allow-unknown"], ["-c", "retention.ms=soon"],
                ["-c", "retention.bytes=10", "-c", "segment.bytes=-5"]):
        result = cli(admin_broker, "configs", "alter", "-r", "topic", "-n", "cfg", *bad)
        message = result["topic"]["cfg"]
        assert f"[Error {INVALID_CONFIG}]" in message, message
        key = bad[1].split("=")[0] if "no.such" in bad[1] or "soon" in bad[1] else "segment.bytes"
        assert key in message, f"the error does not name {key}: {message}"
    assert _topic_configs(admin_broker, "cfg") == after, "a refused change changed something"

    # The legacy AlterConfigs replaces the whole set (kafka-python sends the other overrides along).
    cli(admin_broker, "configs", "alter", "-r", "topic", "-n", "cfg", "-c", "retention.bytes=1048576", "--force-alter")
    legacy = _topic_configs(admin_broker, "cfg")
    assert legacy["retention.bytes"]["value"] == "1048576" and legacy["retention.ms"]["value"] == "3600000"

    # Appending to a single-valued key is refused; deleting goes back to the default.
    result = cli(admin_broker, "configs", "alter", "-r", "topic", "-n", "cfg", "-c", "retention.ms=add(5)")
    assert f"[Error {INVALID_CONFIG}]" in result["topic"]["cfg"]
    cli(admin_broker, "configs", "alter", "-r", "topic", "-n", "cfg", "-c", "retention.ms=del()")
    assert _topic_configs(admin_broker, "cfg")["retention.ms"]["config_source"] == "DEFAULT_CONFIG"


def test_dynamic_broker_config_is_applied_stored_and_described(admin_broker: BrokerProcess) -> None:
    broker_configs = cli(admin_broker, "configs", "describe", "-r", "broker", "-n", "1")["broker"]["1"]
    assert broker_configs["log.retention.ms"]["read_only"] is False
    assert broker_configs["broker.id"]["read_only"] is True
    assert cli(admin_broker, "configs", "alter", "-r", "broker", "-n", "1", "-c", "log.retention.ms=7200000") == {
        "broker": {"1": "OK"}}
    refused = cli(admin_broker, "configs", "alter", "-r", "broker", "-n", "1", "-c", "log.retention.ms=later",
                  "--allow-unknown")
    assert f"[Error {INVALID_REQUEST}]" in refused["broker"]["1"] and "log.retention.ms" in refused["broker"]["1"]
    static = cli(admin_broker, "configs", "alter", "-r", "broker", "-n", "1", "-c", "num.partitions=3",
                 "--allow-unknown")
    assert f"[Error {INVALID_REQUEST}]" in static["broker"]["1"] and "num.partitions" in static["broker"]["1"]

    create_topic(admin_broker.bootstrap, "follows-broker", 1)
    admin_broker.restart(clean=False)
    described = cli(admin_broker, "configs", "describe", "-r", "broker", "-n", "1")["broker"]["1"]
    assert described["log.retention.ms"]["value"] == "7200000"
    assert described["log.retention.ms"]["config_source"] == "DYNAMIC_BROKER_CONFIG"
    topic = _topic_configs(admin_broker, "follows-broker")["retention.ms"]
    assert (topic["value"], topic["config_source"]) == ("7200000", "DYNAMIC_BROKER_CONFIG")
    cli(admin_broker, "configs", "alter", "-r", "broker", "-n", "1", "-c", "log.retention.ms=del()")
    reset = cli(admin_broker, "configs", "describe", "-r", "broker", "-n", "1")["broker"]["1"]["log.retention.ms"]
    assert reset["config_source"] == "DEFAULT_CONFIG"


def test_subtracting_the_last_cleanup_policy_leaves_it_empty(admin_broker: BrokerProcess) -> None:
    # Kafka 3.9 accepts an empty cleanup.policy (neither compacted nor trimmed by retention).
    create_topic(admin_broker.bootstrap, "no-policy", 1)
    assert cli(admin_broker, "configs", "alter", "-r", "topic", "-n", "no-policy", "-c",
               "cleanup.policy=sub(delete)") == {"topic": {"no-policy": "OK"}}
    policy = _topic_configs(admin_broker, "no-policy")["cleanup.policy"]
    assert (policy["value"], policy["config_source"]) == ("", "DYNAMIC_TOPIC_CONFIG")
    assert cli(admin_broker, "configs", "alter", "-r", "topic", "-n", "no-policy", "-c",
               "cleanup.policy=add(compact)") == {"topic": {"no-policy": "OK"}}
    assert _topic_configs(admin_broker, "no-policy")["cleanup.policy"]["value"] == "compact"
    bad = cli(admin_broker, "configs", "alter", "-r", "topic", "-n", "no-policy", "-c", "cleanup.policy=shred")
    assert f"[Error {INVALID_CONFIG}]" in bad["topic"]["no-policy"] and "cleanup.policy" in bad["topic"]["no-policy"]


def _broker_config(broker: BrokerProcess, key: str) -> dict[str, Any]:
    return cli(broker, "configs", "describe", "-r", "broker", "-n", "1")["broker"]["1"][key]


def test_broker_keys_kafka_updates_at_run_time_are_stored_and_described(admin_broker: BrokerProcess) -> None:
    # Kafka updates this key dynamically; minikafka has no Kerberos but stores it as Kafka does.
    key = "sasl.kerberos.min.time.before.relogin"
    before = _broker_config(admin_broker, key)
    assert (before["value"], before["config_source"], before["read_only"]) == ("60000", "DEFAULT_CONFIG", False)
    for mode in ("--force-incremental", "--force-alter"):
        assert cli(admin_broker, "configs", "alter", "-r", "broker", "-n", "1", "-c", f"{key}=70000", mode) == {
            "broker": {"1": "OK"}}, mode
    admin_broker.restart(clean=False)
    after = _broker_config(admin_broker, key)
    assert (after["value"], after["config_source"]) == ("70000", "DYNAMIC_BROKER_CONFIG")
    # Said once by the process that took the change (twice), and once by the restarted one.
    told = f"dynamic broker config {key} is stored and described as Kafka does, but has no effect in minikafka"
    runs = admin_broker.stderr_text(10**8).split("===== start #")
    assert [run.count(told) for run in runs[-2:]] == [1, 1], admin_broker.stderr_text()
    # What Kafka refuses, it refuses in its own words.
    for config, words in (("num.partitions=3", "Cannot update these configs dynamically: Set(num.partitions)"),
                          ("ssl.keystore.location=/k.pem", "These security configs can be dynamically updated "
                           "only per-listener using the listener prefix: Set(ssl.keystore.location)")):
        refused = cli(admin_broker, "configs", "alter", "-r", "broker", "-n", "1", "-c", config, "--allow-unknown")
        assert refused == {"broker": {"1": f"[Error {INVALID_REQUEST}] InvalidRequestError: {words}"}}, refused
    cli(admin_broker, "configs", "alter", "-r", "broker", "-n", "1", "-c", f"{key}=del()")
    assert _broker_config(admin_broker, key)["config_source"] == "DEFAULT_CONFIG"


def test_groups_list_and_describe(admin_broker: BrokerProcess) -> None:
    create_topic(admin_broker.bootstrap, "grouped", 2)
    confluent_produce(admin_broker.bootstrap, "grouped", [(b"k%d" % i, b"v") for i in range(20)])
    consumer = KafkaConsumer("grouped", bootstrap_servers=admin_broker.bootstrap, group_id="cli-group",
                             client_id="cli-consumer", auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        read = 0
        deadline = time.monotonic() + 30
        while read < 20 and time.monotonic() < deadline:
            read += sum(len(b) for b in consumer.poll(timeout_ms=500).values())
        consumer.commit()
        groups = cli(admin_broker, "groups", "list")
        assert {"group_id": "cli-group", "protocol_type": "consumer", "group_state": "Stable",
                "group_type": "classic"} in groups
        described = cli(admin_broker, "groups", "describe", "-g", "cli-group")["cli-group"]
        assert (described["group_state"], described["protocol_type"]) == ("Stable", "consumer")
        (member,) = described["members"]
        assert member["client_id"] == "cli-consumer" and member["client_host"] == "/127.0.0.1"
        offsets = cli(admin_broker, "groups", "list-offsets", "-g", "cli-group")["grouped"]
        assert sum(p["offset"] for p in offsets.values()) == 20
    finally:
        consumer.close()
    assert cli(admin_broker, "groups", "describe", "-g", "cli-group")["cli-group"]["group_state"] == "Empty"


def test_partitions_create_list_offsets_and_delete_records(admin_broker: BrokerProcess) -> None:
    topic = "parts"
    create_topic(admin_broker.bootstrap, topic, 2)
    base = int(time.time() * 1000) - 100_000
    producer = confluent_kafka.Producer({"bootstrap.servers": admin_broker.bootstrap, "linger.ms": 0})
    for i in range(10):
        producer.produce(topic, key=b"k%d" % i, value=b"v", partition=0, timestamp=base + i * 1000)
        producer.flush(10)  # one batch per record, so lookups by time search the log
    created = cli(admin_broker, "partitions", "create", "-p", f"{topic}:4")
    assert created["results"][0]["error_code"] == 0
    (described,) = cli(admin_broker, "topics", "describe", "-t", topic)
    assert len(described["partitions"]) == 4
    assert "InvalidPartitions" in cli(admin_broker, "partitions", "create", "-p", f"{topic}:3", ok=False)
    confluent_produce(admin_broker.bootstrap, topic, [(b"new", b"v")], partition=3)

    latest = cli(admin_broker, "partitions", "list-offsets", "-p", f"{topic}:*:latest")[topic]
    assert {p: v["offset"] for p, v in latest.items()} == {"0": 10, "1": 0, "2": 0, "3": 1}
    newest = cli(admin_broker, "partitions", "list-offsets", "-p", f"{topic}:0:max-timestamp")[topic]["0"]
    assert (newest["offset"], newest["timestamp"]) == (9, base + 9000)
    # The CLI does not parse a timestamp spec (kafka-python 3.0.12); its admin client does.
    admin = KafkaAdminClient(bootstrap_servers=admin_broker.bootstrap)
    try:
        found = admin.list_partition_offsets({TopicPartition(topic, 0): OffsetTimestamp(base + 4500)})
    finally:
        admin.close()
    by_time = found[TopicPartition(topic, 0)]
    assert (by_time.offset, by_time.timestamp) == (5, base + 5000)

    removed = cli(admin_broker, "partitions", "delete-records", "-r", f"{topic}:0:4", fmt="raw")
    assert "'low_watermark': 4" in removed and "'error_code': 0" in removed
    earliest = cli(admin_broker, "partitions", "list-offsets", "-p", f"{topic}:0:earliest")[topic]["0"]
    assert earliest["offset"] == 4
    too_far = cli(admin_broker, "partitions", "delete-records", "-r", f"{topic}:0:99", fmt="raw", ok=False)
    assert "OffsetOutOfRange" in too_far
    admin_broker.restart(clean=False)
    read = confluent_consume(admin_broker.bootstrap, topic, [0])
    assert [r.offset for r in read] == list(range(4, 10)), "deleted records came back after a kill -9"


def test_deleting_a_topic_being_produced_to(admin_broker: BrokerProcess) -> None:
    doomed, bystander = "doomed", "bystander"
    create_topic(admin_broker.bootstrap, doomed, 2)
    create_topic(admin_broker.bootstrap, bystander, 1)
    confluent_produce(admin_broker.bootstrap, bystander, [(b"b%d" % i, b"v") for i in range(10)])
    admin = KafkaAdminClient(bootstrap_servers=admin_broker.bootstrap)
    errors: list[str] = []
    delivered: list[int] = []
    producer = confluent_kafka.Producer({"bootstrap.servers": admin_broker.bootstrap, "linger.ms": 1,
                                         "message.timeout.ms": 3000, "topic.metadata.refresh.interval.ms": 500})

    def report(err: Any, msg: Any) -> None:
        (errors.append(str(err)) if err is not None else delivered.append(msg.offset()))

    try:
        for i in range(200):
            producer.produce(doomed, key=b"k%d" % i, value=b"v", on_delivery=report)
            producer.poll(0)
        producer.flush(10)
        assert len(delivered) == 200 and not errors
        dirs = [admin_broker.log_dirs[0] / f"{doomed}-0", admin_broker.log_dirs[1] / f"{doomed}-0",
                admin_broker.log_dirs[0] / f"{doomed}-1", admin_broker.log_dirs[1] / f"{doomed}-1"]
        assert sum(d.is_dir() for d in dirs) == 2

        admin.delete_topics([doomed])
        assert doomed not in admin.list_topics(), "the topic is still in Metadata after DeleteTopics"
        assert not any(d.exists() for d in dirs), "partition dirs keep their live names"
        wait_until(lambda: not [p for d in admin_broker.log_dirs for p in d.glob(f"{doomed}-*")], timeout=20,
                   what="the deleted topic's files removed in the background")

        for i in range(5):
            producer.produce(doomed, key=b"late%d" % i, value=b"v", on_delivery=report)
        producer.flush(15)
        assert len(errors) == 5, f"produce to a deleted topic: {errors}"
        assert raw_produce(admin_broker, doomed, 0, b"late") == 3  # UNKNOWN_TOPIC_OR_PARTITION
        assert doomed not in admin.list_topics(), "the deleted topic came back"
    finally:
        admin.close()
    read = confluent_consume(admin_broker.bootstrap, bystander, [0])
    assert len(read) == 10, "deleting one topic disturbed another"
    assert admin_broker.is_running()
