"""``minikafka log-dirs``: what kafka-log-dirs.sh does, plus moving replicas and watching them.

    minikafka log-dirs --bootstrap-server HOST:PORT --describe [--broker-list 1,2] [--topic-list a,b]
    minikafka log-dirs --bootstrap-server HOST:PORT --move --assignment FILE [--progress]
    minikafka log-dirs --bootstrap-server HOST:PORT --progress
    minikafka log-dirs --bootstrap-server HOST:PORT --balance [--dry-run | --progress] [--threshold PERCENT]

``--describe`` prints Kafka's JSON (``{"version":1,"brokers":[{"broker":..,"logDirs":[..]}]}``),
each dir with ``totalBytes`` and ``usableBytes`` added and a partition whose last move failed
with ``moveError``.  ``--move`` takes KIP-113's file, ``{"version":1,"partitions":[{"topic":..,
"partition":..,"log_dir":..}]}`` (an entry may add ``"broker"`` to name one broker; by default
every broker holding a replica is asked), checks all of it against the file format and the
cluster first (a wrong field is named, and nothing moves), then sends AlterReplicaLogDirs.
``--progress`` shows every move live until all are done: bytes copied of total, rate, ETA and a
bar, read from DescribeLogDirs (a future replica's size against its current replica's).
``--balance`` plans, for each broker, the moves between its log dirs that the broker's own disk
balancer would make (replica/balance_plan.py, from two DescribeLogDirs a ``--interval`` apart and
the broker's log.dirs.balancer.threshold.percent and log.dir.min.free.bytes), prints them, and
unless ``--dry-run`` sends them at once as AlterReplicaLogDirs (each broker's mover runs them
under its throttle); ``--progress`` then follows them.

The client is a small blocking one built on this repository's ``protocol`` package, so the tool
needs nothing the broker does not (kafka-python is a test dependency only).  One function per
action (``ACTIONS``); another action is another function and another flag.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, TextIO

from minikafka.replica.balance_plan import BalancePlan, DirLoad, ReplicaLoad, plan_balance
from minikafka.tools.client import (
    ALTER_REPLICA_LOG_DIRS,
    Action,
    ClientSecurity,
    Cluster,
    ToolError,
    add_command_config,
    file_system,
    move_error,
    run_action,
)
from minikafka.tools.progress import Followed, follow, replica_sizes, sizes_of, take_snapshot
from minikafka.tools.reassignment import (
    ANY_DIR,
    check_fields,
    is_placement,
    load_document,
    parse_placement,
    topic_partition,
)
from protocol import ErrorCode

CLIENT_ID = "minikafka-log-dirs"
# The Java exception Kafka's tool prints for an error code of a log dir.
_EXCEPTIONS = {
    ErrorCode.KAFKA_STORAGE_ERROR: "org.apache.kafka.common.errors.KafkaStorageException",
    ErrorCode.LOG_DIR_NOT_FOUND: "org.apache.kafka.common.errors.LogDirNotFoundException",
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "org.apache.kafka.common.errors.ClusterAuthorizationException",
}


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
                    failure = move_error(p)
                    if failure is not None:
                        entry["moveError"] = failure
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


def describe(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    cluster = Cluster.discover(args.bootstrap_server, CLIENT_ID, ClientSecurity.from_file(args.command_config))
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


def parse_assignment(text: str) -> list[Assignment]:
    """KIP-113's move file, whose entries may also be in Kafka's reassignment form (``replicas``
    and ``log_dirs``: each dir other than "any" is a move on that broker); raises ToolError naming
    the first wrong field."""
    entries = load_document(text, "partitions", '{"topic", "partition", "log_dir"}')
    found: list[Assignment] = []
    seen: dict[tuple[str, int, int | None], int] = {}
    for i, entry in enumerate(entries):
        where = f"partitions[{i}]"
        if is_placement(entry):
            placement = parse_placement(entry, where)
            moves = [Assignment(placement.topic, placement.partition, log_dir, broker)
                     for broker, log_dir in placement.dir_moves()]
            if not moves:
                raise ToolError(f"{where}.log_dirs: every dir is {ANY_DIR!r}, so nothing would move")
        else:
            check_fields(entry, where, ("topic", "partition", "log_dir"), ("broker",))
            topic, partition = topic_partition(entry, where)
            log_dir, broker = entry["log_dir"], entry.get("broker")
            if not isinstance(log_dir, str) or not os.path.isabs(log_dir):
                raise ToolError(f"{where}.log_dir: must be an absolute path, not {log_dir!r}")
            if broker is not None and (not isinstance(broker, int) or isinstance(broker, bool) or broker < 0):
                raise ToolError(f"{where}.broker: must be a broker id (an integer >= 0), not {broker!r}")
            moves = [Assignment(topic, partition, os.path.normpath(log_dir), broker)]
        for move in moves:
            replica = (move.topic, move.partition, move.broker)
            if replica in seen:
                raise ToolError(f"{where}: {move.topic}-{move.partition} is already in partitions[{seen[replica]}]")
            seen[replica] = i
        found += moves
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
    """AlterReplicaLogDirs to each broker; returns one line per refused partition.  A replica the
    broker does not host yet (REPLICA_NOT_AVAILABLE) is not refused: the broker keeps the dir for
    when it creates the replica (a reassignment adding it)."""
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
                elif code == ErrorCode.REPLICA_NOT_AVAILABLE:
                    out.write(line + "the replica will be created there\n")
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
    cluster = Cluster.discover(args.bootstrap_server, CLIENT_ID, ClientSecurity.from_file(args.command_config))
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


def watch(cluster: Cluster, brokers: list[int], wanted: dict[tuple[int, str, int], str] | None,
          args: argparse.Namespace, out: TextIO) -> int:
    """Show the moves until all are done (``wanted``: the ones just requested, with their target
    dirs; None: every move found).  Returns 1 if any failed, 3 on --timeout."""
    followed = Followed(reassignments={}, dir_moves=wanted)
    return follow(lambda: take_snapshot(cluster, brokers, reassignments=False), followed, out, args.interval,
                  args.timeout)


def progress(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    cluster = Cluster.discover(args.bootstrap_server, CLIENT_ID, ClientSecurity.from_file(args.command_config))
    try:
        return watch(cluster, _broker_list(args.broker_list, cluster), None, args, out)
    finally:
        cluster.close()


# ---- --balance ----------------------------------------------------------------------------

THRESHOLD_KEY = "log.dirs.balancer.threshold.percent"
MIN_FREE_KEY = "log.dir.min.free.bytes"


def balance_inputs(cluster: Cluster, broker: int, window: float) -> tuple[list[DirLoad], list[ReplicaLoad]]:
    """The broker's live dirs and replicas as the planner takes them; growth is measured over
    ``window`` seconds (two DescribeLogDirs)."""
    first = sizes_of(cluster, [broker])
    started = time.monotonic()
    time.sleep(window)
    results = cluster.describe(broker)
    elapsed = max(time.monotonic() - started, 1e-3)
    dirs = [DirLoad(r.log_dir, r.total_bytes, r.usable_bytes, file_system(r) or r.log_dir)
            for r in results if not r.error_code and r.total_bytes > 0]
    if not dirs and any(not r.error_code for r in results):
        raise ToolError(f"broker {broker} does not say how large its log dirs are (DescribeLogDirs v4 needed)")
    replicas = []
    for key, now in sorted(replica_sizes(broker, results).items()):
        if now.log_dir is None:
            continue
        before = first.get(key)
        grew = now.size - before.size if before is not None and before.log_dir == now.log_dir else 0
        replicas.append(ReplicaLoad(key[1], key[2], now.log_dir, now.size, max(0.0, grew / elapsed), now.future_dir,
                                    now.future_size))
    return dirs, replicas


def plan_for(cluster: Cluster, broker: int, args: argparse.Namespace) -> BalancePlan:
    configs = cluster.broker_configs(broker, [THRESHOLD_KEY, MIN_FREE_KEY])
    threshold = args.threshold if args.threshold is not None else float(configs.get(THRESHOLD_KEY, "10"))
    dirs, replicas = balance_inputs(cluster, broker, args.interval)
    return plan_balance(dirs, replicas, threshold, int(configs.get(MIN_FREE_KEY, "0")))


def print_plan(broker: int, plan: BalancePlan, out: TextIO) -> None:
    out.write(f"broker {broker}: {plan.summary()}\n")
    for log_dir, share in plan.shares_before.items():
        after = f" -> {plan.shares_after[log_dir]:.1f}%" if plan.moves else ""
        out.write(f"  {log_dir}: {share:.1f}% used{after}\n")
    for planned in plan.moves:
        out.write(f"  move {planned.reason(plan.threshold_percent)}\n")


def balance(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.threshold is not None and not 0 <= args.threshold <= 100:
        raise ToolError(f"--threshold: must be between 0 and 100, not {args.threshold:g}")
    cluster = Cluster.discover(args.bootstrap_server, CLIENT_ID, ClientSecurity.from_file(args.command_config))
    try:
        brokers = _broker_list(args.broker_list, cluster)
        plans = {broker: plan_for(cluster, broker, args) for broker in brokers}
        for broker, plan in plans.items():
            print_plan(broker, plan, out)
        chosen = {broker: [Assignment(m.topic, m.partition, m.dest_dir, broker) for m in plan.moves]
                  for broker, plan in plans.items() if plan.moves}
        if args.dry_run:
            out.write("dry run: nothing was moved\n")
            return 0
        failures = send_moves(cluster, chosen, out)
        if failures:
            err.write(f"{len(failures)} move(s) refused\n")
            return 1
        if args.progress and chosen:
            wanted = {(broker, m.topic, m.partition): m.log_dir for broker, moves in chosen.items() for m in moves}
            return watch(cluster, sorted(chosen), wanted, args, out)
        return 0
    finally:
        cluster.close()


# ---- wiring -------------------------------------------------------------------------------

ACTIONS: dict[str, Action] = {"describe": describe, "move": move, "progress": progress, "balance": balance}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT[,HOST:PORT]",
                        help="a broker to ask (needed by --describe, --move, --progress)")
    add_command_config(parser)
    parser.add_argument("--describe", action="store_true", help="print the log dirs of brokers (Kafka's JSON)")
    parser.add_argument("--broker-list", metavar="ID,ID", help="brokers to describe or watch (default: all)")
    parser.add_argument("--topic-list", metavar="TOPIC,TOPIC", help="topics to describe (default: all)")
    parser.add_argument("--move", action="store_true",
                        help="move replicas between log dirs as --assignment says (KIP-113's JSON)")
    parser.add_argument("--assignment", metavar="FILE",
                        help='{"version":1,"partitions":[{"topic":..,"partition":..,"log_dir":..}]}')
    parser.add_argument("--progress", action="store_true",
                        help="show the moves live until all are done (with --move: the ones it started)")
    parser.add_argument("--balance", action="store_true",
                        help="plan the moves that even out each broker's disks (as its disk balancer would) and "
                             "run them")
    parser.add_argument("--dry-run", action="store_true", help="with --balance: print the plan, move nothing")
    parser.add_argument("--threshold", type=float, metavar="PERCENT",
                        help="with --balance: the spread of used share allowed between the fullest and the "
                             "emptiest disk (default: the broker's log.dirs.balancer.threshold.percent)")
    parser.add_argument("--interval", type=float, default=1.0, metavar="SECONDS",
                        help="--progress refresh; --balance measures replica growth over this long")
    parser.add_argument("--timeout", type=float, default=0.0, metavar="SECONDS",
                        help="--progress gives up after this long (default: never)")


def requested(args: argparse.Namespace) -> str | None:
    """The action of this module the arguments ask for (--move and --balance win over --progress)."""
    for name in ("move", "balance", "describe", "progress"):
        if getattr(args, name, False):
            return name
    return None


def _chosen(args: argparse.Namespace) -> str:
    action = requested(args)
    if action is None:
        raise ToolError("no action: use --describe, --move, --balance or --progress")
    if args.dry_run and action != "balance":
        raise ToolError("--dry-run goes with --balance")
    return action


def run(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    return run_action(ACTIONS, _chosen, args, out, err)
