"""``minikafka log-dirs`` against a real broker: --describe prints Kafka's JSON, --move refuses
a bad assignment file naming the wrong field before anything moves, --progress follows moves."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.broker_process import REPO_ROOT, BrokerProcess
from tests.integration.clients import confluent_produce, create_topic
from tests.integration.test_a2_move_every_replica import replica_dirs

pytestmark = pytest.mark.integration

TOPIC = "cli"


def log_dirs(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "minikafka", "log-dirs", "--bootstrap-server", broker.bootstrap,
                           *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def cluster(module_broker: BrokerProcess) -> BrokerProcess:
    create_topic(module_broker.bootstrap, TOPIC, 2)
    create_topic(module_broker.bootstrap, "other", 1)
    confluent_produce(module_broker.bootstrap, TOPIC, [(b"k%d" % i, b"v" * 100) for i in range(200)])
    return module_broker


def test_describe_prints_kafka_json(cluster: BrokerProcess) -> None:
    run = log_dirs(cluster, "--describe")
    assert run.returncode == 0, run.stderr
    assert "Querying brokers for log directories information" in run.stderr
    document = json.loads(run.stdout)
    assert document["version"] == 1
    (broker,) = document["brokers"]
    assert broker["broker"] == 1
    assert [d["logDir"] for d in broker["logDirs"]] == [str(d) for d in cluster.log_dirs]
    partitions = {}
    for log_dir in broker["logDirs"]:
        assert log_dir["error"] is None
        assert log_dir["totalBytes"] >= log_dir["usableBytes"] > 0
        for p in log_dir["partitions"]:
            assert set(p) == {"partition", "size", "offsetLag", "isFuture"}
            partitions[p["partition"]] = (log_dir["logDir"], p)
    assert {"cli-0", "cli-1", "other-0"} <= set(partitions)
    assert sum(partitions[f"cli-{i}"][1]["size"] for i in range(2)) > 200 * 100
    assert not any(p["isFuture"] or p["offsetLag"] for _, p in partitions.values())

    only = json.loads(log_dirs(cluster, "--describe", "--topic-list", "other", "--broker-list", "1").stdout)
    listed = [p["partition"] for d in only["brokers"][0]["logDirs"] for p in d["partitions"]]
    assert listed == ["other-0"]

    wrong = log_dirs(cluster, "--describe", "--broker-list", "7")
    assert wrong.returncode == 2 and "broker 7 is not in the cluster" in wrong.stderr


def _entry(**overrides: object) -> dict[str, object]:
    entry: dict[str, object] = {"topic": TOPIC, "partition": 0, "log_dir": "/somewhere"}
    entry.update(overrides)
    return {key: value for key, value in entry.items() if value is not None}


BAD_FILES = [
    ("not json {", "not JSON"),
    ("[]", "the top level must be an object"),
    (json.dumps({"partitions": [_entry()]}), "version: missing"),
    (json.dumps({"version": 2, "partitions": [_entry()]}), "version: must be 1, not 2"),
    (json.dumps({"version": 1, "partitions": []}), "partitions: must be a non-empty list"),
    (json.dumps({"version": 1, "partitions": [_entry()], "extra": 1}), "extra: unknown field"),
    (json.dumps({"version": 1, "partitions": ["x"]}), "partitions[0]: must be an object"),
    (json.dumps({"version": 1, "partitions": [_entry(log_dir=None)]}), "partitions[0].log_dir: missing"),
    (json.dumps({"version": 1, "partitions": [_entry(), _entry(topic="")]}),
     "partitions[1].topic: must be a non-empty string"),
    (json.dumps({"version": 1, "partitions": [_entry(partition="0")]}),
     "partitions[0].partition: must be an integer >= 0, not '0'"),
    (json.dumps({"version": 1, "partitions": [_entry(partition=-1)]}), "partitions[0].partition: must be"),
    (json.dumps({"version": 1, "partitions": [_entry(log_dir="relative/dir")]}),
     "partitions[0].log_dir: must be an absolute path"),
    (json.dumps({"version": 1, "partitions": [_entry(logdir="/x")]}), "partitions[0].logdir: unknown field"),
    (json.dumps({"version": 1, "partitions": [_entry(broker="1")]}), "partitions[0].broker: must be a broker id"),
    (json.dumps({"version": 1, "partitions": [_entry(), _entry()]}),
     "partitions[1]: cli-0 is already in partitions[0]"),
]


@pytest.mark.parametrize(("text", "message"), BAD_FILES, ids=[m.split(":")[0] for _, m in BAD_FILES])
def test_a_bad_assignment_file_names_the_wrong_field(cluster: BrokerProcess, tmp_path: Path, text: str,
                                                     message: str) -> None:
    path = tmp_path / "moves.json"
    path.write_text(text)
    run = log_dirs(cluster, "--move", "--assignment", str(path))
    assert run.returncode == 2
    assert f"error: {path}: {message}" in run.stderr, run.stderr


def test_what_the_cluster_cannot_do_is_refused_before_anything_moves(cluster: BrokerProcess, tmp_path: Path) -> None:
    before = replica_dirs(cluster.bootstrap)
    home = before[(TOPIC, 0)][0][0]
    elsewhere = next(str(d) for d in cluster.log_dirs if str(d) != home)
    good = {"topic": TOPIC, "partition": 0, "log_dir": elsewhere}
    cases = [
        ({"topic": "nope", "partition": 0, "log_dir": elsewhere}, "partitions[1].topic: topic 'nope' does not exist"),
        ({"topic": TOPIC, "partition": 9, "log_dir": elsewhere}, "partitions[1].partition: cli has no partition 9"),
        ({"topic": TOPIC, "partition": 1, "log_dir": "/not/a/log/dir"},
         "partitions[1].log_dir: /not/a/log/dir is not a log dir of broker 1"),
        ({"topic": TOPIC, "partition": 1, "log_dir": elsewhere, "broker": 4},
         "partitions[1].broker: broker 4 holds no replica of cli-1"),
    ]
    for bad, message in cases:
        path = tmp_path / "moves.json"
        path.write_text(json.dumps({"version": 1, "partitions": [good, bad]}))
        run = log_dirs(cluster, "--move", "--assignment", str(path))
        assert run.returncode == 2 and message in run.stderr, run.stderr
    assert replica_dirs(cluster.bootstrap) == before  # the good first entry did not move either


def test_move_with_progress_and_progress_alone(cluster: BrokerProcess, tmp_path: Path) -> None:
    idle = log_dirs(cluster, "--progress", "--interval", "0.1")
    assert idle.returncode == 0 and "no moves in progress" in idle.stdout
    before = replica_dirs(cluster.bootstrap)
    targets = {p: next(str(d) for d in cluster.log_dirs if str(d) != before[(TOPIC, p)][0][0]) for p in (0, 1)}
    path = tmp_path / "moves.json"
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": TOPIC, "partition": p, "log_dir": d} for p, d in targets.items()]}))
    run = log_dirs(cluster, "--move", "--assignment", str(path), "--progress", "--interval", "0.1", "--timeout", "30")
    assert run.returncode == 0, run.stdout + run.stderr
    last = run.stdout.strip().splitlines()[-2:]
    assert all("done" in line for line in last), run.stdout
    assert {key: value for key, value in replica_dirs(cluster.bootstrap).items() if key[0] == TOPIC} == {
        (TOPIC, p): [(d, False)] for p, d in targets.items()}
    again = log_dirs(cluster, "--move", "--assignment", str(path))  # already there: nothing to do
    assert again.returncode == 0 and again.stdout.count("moving") == 2


def test_no_action_and_missing_arguments(cluster: BrokerProcess) -> None:
    bare = subprocess.run([sys.executable, "-m", "minikafka", "log-dirs"], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=60)
    assert bare.returncode == 2 and "needs an action" in bare.stderr
    assert "--move needs --assignment FILE" in log_dirs(cluster, "--move").stderr
    no_server = subprocess.run([sys.executable, "-m", "minikafka", "log-dirs", "--describe"], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=60)
    assert no_server.returncode == 2 and "--describe needs --bootstrap-server" in no_server.stderr


def test_move_takes_kafkas_reassignment_entries(cluster: BrokerProcess, tmp_path: Path) -> None:
    """An entry with replicas and log_dirs (kafka-reassign-partitions.sh's file): each dir other than
    "any" is a move on that replica's broker; the replicas stay on their brokers."""
    home = replica_dirs(cluster.bootstrap)[("other", 0)][0][0]
    elsewhere = next(str(d) for d in cluster.log_dirs if str(d) != home)
    path = tmp_path / "reassignment.json"
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "other", "partition": 0, "replicas": [1], "log_dirs": [elsewhere]}]}))
    run = log_dirs(cluster, "--move", "--assignment", str(path), "--progress", "--interval", "0.1", "--timeout", "30")
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"other-0 on broker 1 -> {elsewhere}: moving" in run.stdout
    assert replica_dirs(cluster.bootstrap)[("other", 0)] == [(elsewhere, False)]
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "other", "partition": 0, "replicas": [1], "log_dirs": [home, "any"]}]}))
    wrong = log_dirs(cluster, "--move", "--assignment", str(path))
    assert wrong.returncode == 2 and "partitions[0].log_dirs: has 2 entries for 1 replicas" in wrong.stderr
    assert replica_dirs(cluster.bootstrap)[("other", 0)] == [(elsewhere, False)]
