"""``minikafka log-dirs``: what kafka-log-dirs.sh does, plus moving replicas and watching them.

    minikafka log-dirs --bootstrap-server HOST:PORT --describe [--broker-list 1,2] [--topic-list a,b]
    minikafka log-dirs --bootstrap-server HOST:PORT --move --assignment FILE [--progress]
    minikafka log-dirs --bootstrap-server HOST:PORT --progress

``--describe`` prints Kafka's JSON (``{"version":1,"brokers":[{"broker":..,"logDirs":[..]}]}``),
each dir with ``totalBytes`` and ``usableBytes`` added and a partition whose last move failed
with ``moveError``.  ``--move`` takes KIP-113's file, ``{"version":1,"partitions":[{"topic":..,
"partition":..,"log_dir":..}]}`` (an entry may add ``"broker"`` to name one broker; by default
every broker holding a replica is asked), checks all of it against the file format and the
cluster first (a wrong field is named, and nothing moves), then sends AlterReplicaLogDirs.
``--progress`` shows every move live until all are done: bytes copied of total, rate, ETA and a
bar, read from DescribeLogDirs (a future replica's size against its current replica's).

The client is a small blocking one built on this repository's ``protocol`` package, so the tool
needs nothing the broker does not (kafka-python is a test dependency only).  One function per
action (``ACTIONS``); another action is another function and another flag.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from protocol import SUPPORTED_APIS, ErrorCode, encode_request, parse_response

API_VERSIONS, METADATA, ALTER_REPLICA_LOG_DIRS, DESCRIBE_LOG_DIRS = 18, 3, 34, 35
# Private tagged field of DescribeLogDirs v2+ partition entries: why the replica's last move failed.
MOVE_ERROR_TAG = 10_000
# The Java exception Kafka's tool prints for an error code of a log dir.
_EXCEPTIONS = {
    ErrorCode.KAFKA_STORAGE_ERROR: "org.apache.kafka.common.errors.KafkaStorageException",
    ErrorCode.LOG_DIR_NOT_FOUND: "org.apache.kafka.common.errors.LogDirNotFoundException",
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "org.apache.kafka.common.errors.ClusterAuthorizationException",
}


class ToolError(Exception):
    """Something the operator must fix; the message says what, and nothing was changed."""


# ---- a small blocking client --------------------------------------------------------------


class Connection:
    """One blocking connection to one broker; the versions it speaks are asked once."""

    def __init__(self, host: str, port: int, timeout: float = 15.0) -> None:
        self.address = f"{host}:{port}"
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise ToolError(f"cannot connect to {self.address}: {exc.strerror or exc}") from None
        self._correlation_id = 0
        response = self._send(API_VERSIONS, 0, {})
        if response.error_code:
            raise ToolError(f"{self.address} refused ApiVersions: {ErrorCode(response.error_code).name}")
        self.versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}

    def close(self) -> None:
        self.sock.close()

    def version_of(self, api_key: int) -> int:
        ours = SUPPORTED_APIS[api_key]
        low, high = self.versions.get(api_key, (0, -1))
        version = min(high, ours.max_version)
        if version < max(low, ours.min_version):
            raise ToolError(f"{self.address} does not speak {ours.name} (needed here)")
        return version

    def request(self, api_key: int, body: dict[str, Any]) -> tuple[int, Any]:
        """Send at the newest version both sides speak; returns (version, response body)."""
        version = self.version_of(api_key)
        return version, self._send(api_key, version, body)

    def _send(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        self._correlation_id += 1
        try:
            self.sock.sendall(encode_request(api_key, version, self._correlation_id, "minikafka-log-dirs", body))
            (size,) = struct.unpack(">i", self._recv(4))
            payload = self._recv(size)
        except OSError as exc:
            raise ToolError(f"connection to {self.address} failed: {exc.strerror or exc}") from None
        correlation_id, response = parse_response(api_key, version, payload)
        if correlation_id != self._correlation_id:
            raise ToolError(f"{self.address} answered request {correlation_id}, not {self._correlation_id}")
        return response

    def _recv(self, count: int) -> bytes:
        data = bytearray()
        while len(data) < count:
            chunk = self.sock.recv(count - len(data))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            data += chunk
        return bytes(data)


@dataclass
class Cluster:
    """The brokers and partitions a bootstrap broker knows, and a connection per broker."""

    brokers: dict[int, tuple[str, int]]
    partitions: dict[tuple[str, int], list[int]]  # -> replica broker ids
    connections: dict[int, Connection] = field(default_factory=dict)

    @classmethod
    def discover(cls, bootstrap: str) -> Cluster:
        errors = []
        for address in bootstrap.split(","):
            host, _, port = address.strip().rpartition(":")
            if not host or not port.isdigit():
                raise ToolError(f"--bootstrap-server: {address!r} is not HOST:PORT")
            try:
                connection = Connection(host, int(port))
            except ToolError as exc:
                errors.append(str(exc))
                continue
            try:
                _, metadata = connection.request(
                    METADATA, {"topics": None, "allow_auto_topic_creation": False})
            finally:
                connection.close()
            brokers = {b.node_id: (b.host, b.port) for b in metadata.brokers}
            partitions = {(t.name, p.partition_index): list(p.replica_nodes)
                          for t in metadata.topics if t.error_code == 0 for p in t.partitions}
            return cls(brokers, partitions)
        raise ToolError("no bootstrap server answered: " + "; ".join(errors))

    def connection(self, broker: int) -> Connection:
        if broker not in self.connections:
            if broker not in self.brokers:
                raise ToolError(f"broker {broker} is not in the cluster (brokers: {sorted(self.brokers)})")
            host, port = self.brokers[broker]
            self.connections[broker] = Connection(host, port)
        return self.connections[broker]

    def close(self) -> None:
        for connection in self.connections.values():
            connection.close()

    def describe(self, broker: int) -> list[Any]:
        _, response = self.connection(broker).request(DESCRIBE_LOG_DIRS, {"topics": None})
        return list(response.results)


# ---- --describe ---------------------------------------------------------------------------


def _broker_list(text: str | None, cluster: Cluster) -> list[int]:
    if not text:
        return sorted(cluster.brokers)
    try:
        brokers = [int(item) for item in text.split(",") if item.strip()]
    except ValueError:
        raise ToolError(f"--broker-list: {text!r} is not a comma-separated list of broker ids") from None
    unknown = [b for b in brokers if b not in cluster.brokers]
    if unknown:
        raise ToolError(f"--broker-list: broker {unknown[0]} is not in the cluster (brokers: {sorted(cluster.brokers)})")
    return brokers


def describe_json(cluster: Cluster, brokers: list[int], topics: set[str] | None) -> dict[str, Any]:
    """Kafka's kafka-log-dirs.sh JSON for ``brokers`` (partitions of ``topics`` only, if given).
    A broker that does not answer gets an ``error`` instead of its dirs."""
    out: list[dict[str, Any]] = []
    for broker in brokers:
        try:
            results = cluster.describe(broker)
        except ToolError as exc:
            out.append({"broker": broker, "error": str(exc), "logDirs": []})
            continue
        dirs = []
        for result in results:
            partitions = []
            for topic in result.topics:
                if topics is not None and topic.name not in topics:
                    continue
                for p in topic.partitions:
                    entry = {"partition": f"{topic.name}-{p.partition_index}", "size": p.partition_size,
                             "offsetLag": p.offset_lag, "isFuture": p.is_future_key}
                    move_error = _move_error(p)
                    if move_error is not None:
                        entry["moveError"] = move_error
                    partitions.append(entry)
            error = None
            if result.error_code:
                code = ErrorCode(result.error_code)
                error = _EXCEPTIONS.get(code, code.name)
            dirs.append({"logDir": result.log_dir, "error": error, "partitions": partitions,
                         "totalBytes": result.total_bytes, "usableBytes": result.usable_bytes})
        out.append({"broker": broker, "logDirs": dirs})
    return {"version": 1, "brokers": out}


def problems(document: dict[str, Any]) -> list[str]:
    """One line per broker that did not answer and per failed log dir, for the operator."""
    lines = []
    for broker in document["brokers"]:
        if "error" in broker:
            lines.append(f"broker {broker['broker']} did not answer: {broker['error']}")
        for log_dir in broker["logDirs"]:
            if log_dir["error"] is not None:
                lines.append(f"broker {broker['broker']}: log dir {log_dir['logDir']} is offline ({log_dir['error']})")
    return lines


def _move_error(partition: Any) -> str | None:
    raw = (partition.get("_unknown_tagged_fields") or {}).get(MOVE_ERROR_TAG)
    return raw.decode("utf-8", "replace") if raw is not None else None


def describe(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    cluster = Cluster.discover(args.bootstrap_server)
    try:
        brokers = _broker_list(args.broker_list, cluster)
        topics = {t.strip() for t in args.topic_list.split(",") if t.strip()} if args.topic_list else None
        err.write("Querying brokers for log directories information\n")
        document = describe_json(cluster, brokers, topics)
        answered = [b["broker"] for b in document["brokers"] if "error" not in b]
        err.write(f"Received log directory information from brokers {','.join(map(str, answered))}\n")
        for line in problems(document):
            err.write(line + "\n")
        out.write(json.dumps(document) + "\n")
        return 0 if len(answered) == len(brokers) else 1
    finally:
        cluster.close()


# ---- --move -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Assignment:
    topic: str
    partition: int
    log_dir: str
    broker: int | None = None


_ENTRY_KEYS = {"topic", "partition", "log_dir", "broker"}


def parse_assignment(text: str) -> list[Assignment]:
    """KIP-113's move file; raises ToolError naming the first wrong field."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolError(f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    if not isinstance(document, dict):
        raise ToolError("the top level must be an object with \"version\" and \"partitions\"")
    unknown = sorted(set(document) - {"version", "partitions"})
    if unknown:
        raise ToolError(f"{unknown[0]}: unknown field (expected \"version\" and \"partitions\")")
    if "version" not in document:
        raise ToolError("version: missing (must be 1)")
    if document["version"] != 1 or isinstance(document["version"], bool):
        raise ToolError(f"version: must be 1, not {document['version']!r}")
    entries = document.get("partitions")
    if not isinstance(entries, list) or not entries:
        raise ToolError("partitions: must be a non-empty list of {\"topic\", \"partition\", \"log_dir\"}")
    found: list[Assignment] = []
    seen: dict[tuple[str, int, int | None], int] = {}
    for i, entry in enumerate(entries):
        where = f"partitions[{i}]"
        if not isinstance(entry, dict):
            raise ToolError(f"{where}: must be an object with \"topic\", \"partition\" and \"log_dir\"")
        unknown = sorted(set(entry) - _ENTRY_KEYS)
        if unknown:
            raise ToolError(f"{where}.{unknown[0]}: unknown field (expected topic, partition, log_dir, broker)")
        for key in ("topic", "partition", "log_dir"):
            if key not in entry:
                raise ToolError(f"{where}.{key}: missing")
        topic, partition, log_dir, broker = entry["topic"], entry["partition"], entry["log_dir"], entry.get("broker")
        if not isinstance(topic, str) or not topic:
            raise ToolError(f"{where}.topic: must be a non-empty string, not {topic!r}")
        if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
            raise ToolError(f"{where}.partition: must be an integer >= 0, not {partition!r}")
        if not isinstance(log_dir, str) or not os.path.isabs(log_dir):
            raise ToolError(f"{where}.log_dir: must be an absolute path, not {log_dir!r}")
        if broker is not None and (not isinstance(broker, int) or isinstance(broker, bool) or broker < 0):
            raise ToolError(f"{where}.broker: must be a broker id (an integer >= 0), not {broker!r}")
        replica = (topic, partition, broker)
        if replica in seen:
            raise ToolError(f"{where}: {topic}-{partition} is already in partitions[{seen[replica]}]")
        seen[replica] = i
        found.append(Assignment(topic, partition, os.path.normpath(log_dir), broker))
    return found


def plan_moves(cluster: Cluster, assignments: list[Assignment]) -> dict[int, list[Assignment]]:
    """{broker: [assignment]}; raises ToolError naming the first entry
    the cluster cannot do (no such partition, broker or log dir)."""
    dirs_of: dict[int, list[str]] = {}
    plan: dict[int, list[Assignment]] = {}
    for i, move in enumerate(assignments):
        where = f"partitions[{i}]"
        replicas = cluster.partitions.get((move.topic, move.partition))
        if replicas is None:
            if not any(topic == move.topic for topic, _ in cluster.partitions):
                raise ToolError(f"{where}.topic: topic {move.topic!r} does not exist")
            raise ToolError(f"{where}.partition: {move.topic} has no partition {move.partition}")
        if move.broker is not None and move.broker not in replicas:
            raise ToolError(f"{where}.broker: broker {move.broker} holds no replica of "
                            f"{move.topic}-{move.partition} (replicas: {replicas})")
        for broker in [move.broker] if move.broker is not None else replicas:
            if broker not in dirs_of:
                dirs_of[broker] = [r.log_dir for r in cluster.describe(broker)]
            if move.log_dir not in dirs_of[broker]:
                raise ToolError(f"{where}.log_dir: {move.log_dir} is not a log dir of broker {broker} "
                                f"(its log dirs: {', '.join(dirs_of[broker])})")
            plan.setdefault(broker, []).append(move)
    return plan


def send_moves(cluster: Cluster, plan: dict[int, list[Assignment]], out: TextIO) -> list[str]:
    """AlterReplicaLogDirs to each broker; returns one line per refused partition."""
    failures = []
    for broker, moves in sorted(plan.items()):
        by_dir: dict[str, dict[str, list[int]]] = {}
        for move in moves:
            by_dir.setdefault(move.log_dir, {}).setdefault(move.topic, []).append(move.partition)
        body = {"dirs": [{"path": path, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
                         for path, topics in by_dir.items()]}
        _, response = cluster.connection(broker).request(ALTER_REPLICA_LOG_DIRS, body)
        for topic in response.results:
            for p in topic.partitions:
                code = ErrorCode(p.error_code)
                target = next(m.log_dir for m in moves
                              if (m.topic, m.partition) == (topic.topic_name, p.partition_index))
                line = f"{topic.topic_name}-{p.partition_index} on broker {broker} -> {target}: "
                if code == ErrorCode.NONE:
                    out.write(line + "moving\n")
                else:
                    failures.append(line + code.name)
                    out.write(line + f"refused ({code.name})\n")
    return failures


def move(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if not args.assignment:
        raise ToolError("--move needs --assignment FILE")
    try:
        with open(args.assignment, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise ToolError(f"--assignment: cannot read {args.assignment}: {exc.strerror}") from None
    try:
        assignments = parse_assignment(text)
    except ToolError as exc:
        raise ToolError(f"{args.assignment}: {exc}") from None
    cluster = Cluster.discover(args.bootstrap_server)
    try:
        try:
            plan = plan_moves(cluster, assignments)
        except ToolError as exc:
            raise ToolError(f"{args.assignment}: {exc}") from None
        failures = send_moves(cluster, plan, out)
        if failures:
            err.write(f"{len(failures)} move(s) refused\n")
            return 1
        if args.progress:
            wanted = {(broker, m.topic, m.partition): m.log_dir for broker, moves in plan.items() for m in moves}
            return watch(cluster, sorted(plan), wanted, args, out)
        return 0
    finally:
        cluster.close()


# ---- --progress ---------------------------------------------------------------------------


@dataclass
class Watched:
    """One move as --progress follows it."""

    broker: int
    topic: str
    partition: int
    target: str | None = None
    copied: int = 0
    total: int = 0
    rate: float | None = None
    last: tuple[float, int] | None = None  # (time, copied) of the previous sample
    state: str = "waiting"  # waiting, copying, done, failed
    detail: str = ""

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


def _sample(cluster: Cluster, brokers: list[int]) -> dict[tuple[int, str, int], dict[str, Any]]:
    """{(broker, topic, partition): {"dir", "size", "future_dir", "future_size", "error"}}."""
    seen: dict[tuple[int, str, int], dict[str, Any]] = {}
    for broker in brokers:
        for result in cluster.describe(broker):
            for topic in result.topics:
                for p in topic.partitions:
                    entry = seen.setdefault((broker, topic.name, p.partition_index), {})
                    if p.is_future_key:
                        entry.update(future_dir=result.log_dir, future_size=p.partition_size)
                    else:
                        entry.update(dir=result.log_dir, size=p.partition_size, error=_move_error(p))
    return seen


def _update(watched: Watched, entry: dict[str, Any], now: float) -> None:
    if "future_dir" in entry:
        watched.state = "copying"
        watched.target = watched.target or entry["future_dir"]
        watched.copied, watched.total = entry["future_size"], max(entry.get("size", 0), entry["future_size"])
        if watched.last is not None and now > watched.last[0]:
            instant = max(0.0, (watched.copied - watched.last[1]) / (now - watched.last[0]))
            watched.rate = instant if watched.rate is None else 0.5 * watched.rate + 0.5 * instant
        watched.last = (now, watched.copied)
        return
    if watched.target is not None and entry.get("dir") == watched.target:
        watched.state, watched.copied = "done", entry.get("size", 0)
        watched.total = watched.copied
        return
    if entry.get("error"):
        watched.state, watched.detail = "failed", entry["error"]
        return
    if watched.state == "copying":
        # The copy is gone and the replica did not move: cancelled, or failed without a record.
        watched.state, watched.detail = "failed", "the move stopped (cancelled, or its dir failed)"


def _bytes(n: float) -> str:
    if abs(n) < 1024:
        return f"{n:.0f} B"
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024
        if abs(n) < 1024:
            return f"{n:.1f} {unit}"
    return f"{n / 1024:.1f} TiB"


def progress_line(w: Watched, width: int = 30) -> str:
    fraction = w.copied / w.total if w.total else (1.0 if w.state == "done" else 0.0)
    filled = int(round(fraction * width))
    bar = "#" * filled + "." * (width - filled)
    head = f"{w.name:<30} broker {w.broker} -> {w.target or '?'}"
    if w.state == "done":
        return f"{head} [{'#' * width}] done ({_bytes(w.total)})"
    if w.state == "failed":
        return f"{head} FAILED: {w.detail}"
    if w.state == "waiting":
        return f"{head} [{bar}] waiting"
    rate = f"{_bytes(w.rate)}/s" if w.rate else "- B/s"
    eta = "-"
    if w.rate:
        seconds = max(0, int((w.total - w.copied) / w.rate))
        eta = f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    return (f"{head} [{bar}] {fraction * 100:5.1f}% {_bytes(w.copied)} of {_bytes(w.total)} "
            f"{rate} ETA {eta}")


def watch(cluster: Cluster, brokers: list[int], wanted: dict[tuple[int, str, int], str] | None,
          args: argparse.Namespace, out: TextIO) -> int:
    """Show the moves until all are done (``wanted``: the ones just requested, with their target
    dirs; None: every move found).  Returns 1 if any failed."""
    watched: dict[tuple[int, str, int], Watched] = {}
    if wanted is not None:
        for (broker, topic, partition), target in wanted.items():
            watched[(broker, topic, partition)] = Watched(broker, topic, partition, target)
    tty = hasattr(out, "isatty") and out.isatty()
    drawn = 0
    deadline = time.monotonic() + args.timeout if args.timeout else None
    while True:
        now = time.monotonic()
        sample = _sample(cluster, brokers)
        for key, entry in sample.items():
            if key not in watched and wanted is None and "future_dir" in entry:
                watched[key] = Watched(*key)
        for key, w in watched.items():
            if w.state not in ("done", "failed"):
                _update(w, sample.get(key, {}), now)
        lines = [progress_line(w) for _, w in sorted(watched.items())] or ["no moves in progress"]
        if tty and drawn:
            out.write(f"\x1b[{drawn}F\x1b[J")
        out.write("\n".join(lines) + "\n")
        if not tty:
            out.write("\n")
        out.flush()
        drawn = len(lines)
        if all(w.state in ("done", "failed") for w in watched.values()):
            return 1 if any(w.state == "failed" for w in watched.values()) else 0
        if deadline is not None and now > deadline:
            out.write(f"gave up after {args.timeout:g}s with moves still running\n")
            return 3
        time.sleep(args.interval)


def progress(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    cluster = Cluster.discover(args.bootstrap_server)
    try:
        return watch(cluster, _broker_list(args.broker_list, cluster), None, args, out)
    finally:
        cluster.close()


# ---- wiring -------------------------------------------------------------------------------

Action = Callable[[argparse.Namespace, TextIO, TextIO], int]
ACTIONS: dict[str, Action] = {"describe": describe, "move": move, "progress": progress}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT[,HOST:PORT]",
                        help="a broker to ask (needed by --describe, --move, --progress)")
    parser.add_argument("--describe", action="store_true", help="print the log dirs of brokers (Kafka's JSON)")
    parser.add_argument("--broker-list", metavar="ID,ID", help="brokers to describe or watch (default: all)")
    parser.add_argument("--topic-list", metavar="TOPIC,TOPIC", help="topics to describe (default: all)")
    parser.add_argument("--move", action="store_true",
                        help="move replicas between log dirs as --assignment says (KIP-113's JSON)")
    parser.add_argument("--assignment", metavar="FILE",
                        help='{"version":1,"partitions":[{"topic":..,"partition":..,"log_dir":..}]}')
    parser.add_argument("--progress", action="store_true",
                        help="show the moves live until all are done (with --move: the ones it started)")
    parser.add_argument("--interval", type=float, default=1.0, metavar="SECONDS", help="--progress refresh")
    parser.add_argument("--timeout", type=float, default=0.0, metavar="SECONDS",
                        help="--progress gives up after this long (default: never)")


def requested(args: argparse.Namespace) -> str | None:
    """The action of this module the arguments ask for (--move wins over --progress)."""
    for name in ("move", "describe", "progress"):
        if getattr(args, name, False):
            return name
    return None


def run(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    action = requested(args)
    if action is None:
        raise ToolError("no action: use --describe, --move or --progress")
    try:
        if not args.bootstrap_server:
            raise ToolError(f"--{action} needs --bootstrap-server HOST:PORT")
        return ACTIONS[action](args, out, err)
    except ToolError as exc:
        err.write(f"error: {exc}\n")
        return 2
