"""``minikafka reassign-partitions`` against a real embedded broker: a wrong reassignment file is
refused with the field named, and nothing changes (no replica moves between dirs, no throttle is
set) even when the file's other entries and the throttle options were good; --generate proposes a
placement from the cluster's own partitions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from tests.integration.broker_process import REPO_ROOT, BrokerProcess
from tests.integration.clients import confluent_produce, create_topic
from tests.integration.test_a2_move_every_replica import replica_dirs

pytestmark = pytest.mark.integration

TOPIC = "reassigned"


def reassign(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "minikafka", "reassign-partitions", "--bootstrap-server",
                           broker.bootstrap, *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def cluster(module_broker: BrokerProcess) -> BrokerProcess:
    create_topic(module_broker.bootstrap, TOPIC, 2)
    confluent_produce(module_broker.bootstrap, TOPIC, [(b"k%d" % i, b"v" * 100) for i in range(100)])
    return module_broker


def _configs(broker: BrokerProcess) -> dict[str, dict[str, str]]:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    found = {}
    for resource, future in admin.describe_configs([ConfigResource("topic", TOPIC),
                                                    ConfigResource("broker", "1")]).items():
        found[resource.name] = {name: entry.value for name, entry in future.result(timeout=20).items()}
    return found


def _state(broker: BrokerProcess) -> tuple[object, object]:
    configs = _configs(broker)
    watched = (configs[TOPIC].get("leader.replication.throttled.replicas"),
               configs[TOPIC].get("follower.replication.throttled.replicas"),
               configs["1"].get("replica.alter.log.dirs.io.max.bytes.per.second"),
               configs["1"].get("leader.replication.throttled.rate"),
               configs["1"].get("follower.replication.throttled.rate"))
    return replica_dirs(broker.bootstrap), watched


def test_a_wrong_file_is_named_and_changes_nothing(cluster: BrokerProcess, tmp_path: Path) -> None:
    before = _state(cluster)
    home = before[0][(TOPIC, 0)][0][0]
    elsewhere = next(str(d) for d in cluster.log_dirs if str(d) != home)
    # A good first entry that would move a replica to another dir, then the wrong one.
    good = {"topic": TOPIC, "partition": 0, "replicas": [1], "log_dirs": [elsewhere]}
    cases = [
        ({"topic": TOPIC, "partition": 1, "replicas": [1, 1]}, "partitions[1].replicas: broker 1 is listed twice"),
        ({"topic": TOPIC, "partition": 1, "replicas": [1], "log_dirs": ["any", "any"]},
         "partitions[1].log_dirs: has 2 entries for 1 replicas"),
        ({"topic": TOPIC, "partition": 1, "replica": [1]}, "partitions[1].replica: unknown field"),
        ({"topic": TOPIC, "partition": "1", "replicas": [1]}, "partitions[1].partition: must be an integer >= 0"),
        ({"topic": TOPIC, "partition": 0, "replicas": [1]}, "partitions[1]: reassigned-0 is already in partitions[0]"),
        ({"topic": "nope", "partition": 0, "replicas": [1]}, "partitions[1].topic: topic 'nope' does not exist"),
        ({"topic": TOPIC, "partition": 5, "replicas": [1]}, "partitions[1].partition: reassigned has no partition 5"),
        ({"topic": TOPIC, "partition": 1, "replicas": [1, 2]},
         "partitions[1].replicas: broker 2 is not in the cluster (brokers: [1])"),
        ({"topic": TOPIC, "partition": 1, "replicas": [1], "log_dirs": ["/not/a/log/dir"]},
         "partitions[1].log_dirs[0]: /not/a/log/dir is not a log dir of broker 1 (its log dirs: "),
    ]
    actions = [["--execute", "--throttle", "1000", "--replica-alter-log-dirs-throttle", "2000"],
               ["--verify"], ["--cancel"], ["--progress", "--timeout", "5"]]
    path = tmp_path / "reassignment.json"
    for number, (bad, message) in enumerate(cases):
        path.write_text(json.dumps({"version": 1, "partitions": [good, bad]}))
        # Every action reads the file through one check: all of them on the first wrong file,
        # then one each in turn (a CLI process per call is a second of this machine's CPU).
        for action in actions if number == 0 else [actions[number % len(actions)]]:
            run = reassign(cluster, "--reassignment-json-file", str(path), *action)
            assert run.returncode == 2, (action, run.stdout, run.stderr)
            assert f"error: {path}: {message}" in run.stderr, (action, run.stderr)
            assert run.stdout == ""
    for text, message in [("{", "not JSON"), (json.dumps({"version": 1, "partitions": [good], "x": 0}),
                                              "x: unknown field")]:
        path.write_text(text)
        run = reassign(cluster, "--reassignment-json-file", str(path), "--execute")
        assert run.returncode == 2 and f"error: {path}: {message}" in run.stderr, run.stderr
    assert _state(cluster) == before


def test_options_are_checked_before_anything_is_sent(cluster: BrokerProcess, tmp_path: Path) -> None:
    path = tmp_path / "reassignment.json"
    path.write_text(json.dumps({"version": 1, "partitions": [{"topic": TOPIC, "partition": 0, "replicas": [1]}]}))
    for args, message in [
        (["--execute", "--reassignment-json-file", str(path), "--throttle", "0"],
         "--throttle: must be a number of bytes per second >= 1, not 0"),
        (["--execute", "--verify", "--reassignment-json-file", str(path)], "give one action, not --execute and --verify"),
        (["--execute"], "--reassignment-json-file FILE is needed here"),
        (["--verify", "--reassignment-json-file", str(tmp_path / "missing.json")],
         "--reassignment-json-file: cannot read"),
        ([], "no action"),
    ]:
        run = reassign(cluster, *args)
        assert run.returncode == 2 and f"error: {message}" in run.stderr, (args, run.stderr)
    bare = subprocess.run([sys.executable, "-m", "minikafka", "reassign-partitions", "--list"], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60)
    assert bare.returncode == 2 and "error: --list needs --bootstrap-server HOST:PORT" in bare.stderr


def test_generate_proposes_a_placement_of_the_topics(cluster: BrokerProcess, tmp_path: Path) -> None:
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": TOPIC}]}))
    run = reassign(cluster, "--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "1")
    assert run.returncode == 0, run.stderr
    current_head, current, blank, proposed_head, proposed = run.stdout.splitlines()
    assert (current_head, blank, proposed_head) == ("Current partition replica assignment", "",
                                                    "Proposed partition reassignment configuration")
    expected = {"version": 1, "partitions": [
        {"topic": TOPIC, "partition": p, "replicas": [1], "log_dirs": ["any"]} for p in range(2)]}
    assert json.loads(current) == expected and json.loads(proposed) == expected

    wrong_broker = reassign(cluster, "--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "1,4")
    assert wrong_broker.returncode == 2
    assert "error: --broker-list: broker 4 is not in the cluster (brokers: [1])" in wrong_broker.stderr
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": TOPIC}, {"topic": "nope"}]}))
    unknown = reassign(cluster, "--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "1")
    assert unknown.returncode == 2 and f"error: {topics}: topics[1].topic: topic 'nope' does not exist" in unknown.stderr


def _broker_setting(broker: BrokerProcess, key: str) -> str:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    (future,) = admin.describe_configs([ConfigResource("broker", "1")]).values()
    return future.result(timeout=20)[key].value


def test_a_dir_move_through_execute_progress_verify_list_and_cancel(cluster: BrokerProcess, tmp_path: Path) -> None:
    """The embedded broker is its whole cluster: its replicas stay on it, but the file's log dirs
    move them between its dirs, under the move throttle --execute sets and --verify removes."""
    create_topic(cluster.bootstrap, "placed", 1)
    confluent_produce(cluster.bootstrap, "placed", [(b"k%d" % i, b"v" * 1000) for i in range(300)])
    home = replica_dirs(cluster.bootstrap)[("placed", 0)][0][0]
    elsewhere = next(str(d) for d in cluster.log_dirs if str(d) != home)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "placed", "partition": 0, "replicas": [1], "log_dirs": [elsewhere]}]}))
    default_rate = _broker_setting(cluster, "replica.alter.log.dirs.io.max.bytes.per.second")

    run = reassign(cluster, "--reassignment-json-file", str(path), "--execute", "--replica-alter-log-dirs-throttle",
                   "50000000", "--progress", "--interval", "0.1", "--timeout", "60")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Current partition replica assignment\n\n" in run.stdout
    assert '{"version":1,"partitions":[{"topic":"placed","partition":0,"replicas":[1],"log_dirs":["any"]}]}' in run.stdout
    assert "The replica-alter-dir throttle limit was set to 50000000 B/s" in run.stdout
    assert f"placed-0 on broker 1 -> {elsewhere}: moving" in run.stdout
    assert "Successfully started partition reassignment for placed-0" in run.stdout
    last = run.stdout.strip().split("\n\n")[-1].splitlines()
    assert any(f"broker 1 -> {elsewhere}" in line and "done" in line for line in last), last
    assert any("replica on broker 1" in line and "done" in line for line in last), last
    assert replica_dirs(cluster.bootstrap)[("placed", 0)] == [(elsewhere, False)]
    assert _broker_setting(cluster, "replica.alter.log.dirs.io.max.bytes.per.second") == "50000000"

    listed = reassign(cluster, "--list")
    assert listed.returncode == 0 and listed.stdout == "No partition reassignments found.\n"
    verify = reassign(cluster, "--reassignment-json-file", str(path), "--verify")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert verify.stdout.splitlines()[:3] == [
        "Status of partition reassignment:", "Reassignment of partition placed-0 is completed.",
        f"Reassignment of replica placed-0 on broker 1 to {elsewhere} is completed."]
    assert "Clearing broker-level throttles on brokers 1" in verify.stdout
    assert _broker_setting(cluster, "replica.alter.log.dirs.io.max.bytes.per.second") == default_rate

    cancel = reassign(cluster, "--reassignment-json-file", str(path), "--cancel")
    assert cancel.returncode == 0, cancel.stdout + cancel.stderr
    assert "Successfully cancelled partition reassignments for: placed-0" in cancel.stdout
    assert replica_dirs(cluster.bootstrap)[("placed", 0)] == [(elsewhere, False)]

    unchanged = path.with_name("two.json")
    unchanged.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "placed", "partition": 0, "replicas": [1]}, {"topic": TOPIC, "partition": 0, "replicas": [1]}]}))
    again = reassign(cluster, "--reassignment-json-file", str(unchanged), "--execute")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "Successfully started partition reassignments for placed-0,reassigned-0" in again.stdout
