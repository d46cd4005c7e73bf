"""``minikafka reassign-partitions``: what kafka-reassign-partitions.sh does, plus live progress.

    minikafka reassign-partitions --bootstrap-server HOST:PORT --reassignment-json-file F --execute
        [--throttle B/S] [--replica-alter-log-dirs-throttle B/S] [--additional] [--progress]
    ... --reassignment-json-file F --verify [--preserve-throttles]
    ... --reassignment-json-file F --cancel [--preserve-throttles]
    ... --list
    ... --progress [--reassignment-json-file F]
    ... --generate --topics-to-move-json-file T --broker-list 1,2,3

The files are Apache Kafka's (minikafka.tools.reassignment).  A file is checked whole, against its
format and then against the cluster (topics, partitions, brokers, log dirs), before anything is
sent; a wrong one exits 2 naming the field.  ``--execute`` sends the log dirs first
(AlterReplicaLogDirs: a replica the broker does not host yet is created in the dir it was given),
then one AlterPartitionReassignments.  ``--throttle`` sets Kafka's replication throttles (rates on
the brokers involved, throttled replicas on the topics), ``--replica-alter-log-dirs-throttle`` the
move throttle of the brokers with dir moves; ``--verify`` and ``--cancel`` remove them once nothing
is moving.  ``--progress`` follows every moving replica in bytes (minikafka.tools.progress).

Exit status: 0 done, 1 the cluster refused something or a reassignment failed, 2 a wrong file or
option (nothing changed), 3 still in progress (``--verify``, or ``--progress`` at ``--timeout``).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TextIO

from minikafka.tools.client import (
    ALTER_PARTITION_REASSIGNMENTS,
    ALTER_REPLICA_LOG_DIRS,
    INCREMENTAL_ALTER_CONFIGS,
    LIST_PARTITION_REASSIGNMENTS,
    Action,
    ClientSecurity,
    Cluster,
    ToolError,
    add_command_config,
    run_action,
)
from minikafka.tools.log_dirs import Assignment, send_moves
from minikafka.tools.progress import (
    FAILED,
    Followed,
    Snapshot,
    follow,
    reassignments_of,
    sizes_of,
    take_snapshot,
)
from minikafka.tools.reassignment import (
    ANY_DIR,
    PartitionPlacement,
    check_placements,
    generate,
    parse_broker_list,
    parse_reassignment,
    parse_topics_to_move,
    reassignment_json,
    throttled_replicas,
)
from protocol import ErrorCode

CLIENT_ID = "minikafka-reassign-partitions"
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
SET, DELETE = 0, 1
LEADER_RATE, FOLLOWER_RATE = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
LEADER_REPLICAS, FOLLOWER_REPLICAS = "leader.replication.throttled.replicas", "follower.replication.throttled.replicas"
LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
STILL_MOVING = 3
VERIFY_ATTEMPTS = 3


def _read(path: str | None, option: str) -> str:
    if not path:
        raise ToolError(f"{option} FILE is needed here")
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError as exc:
        raise ToolError(f"{option}: cannot read {path}: {exc.strerror}") from None


def _with_path(path: str, parse: Callable[[], Any]) -> Any:
    try:
        return parse()
    except ToolError as exc:
        raise ToolError(f"{path}: {exc}") from None


def load_plan(args: argparse.Namespace, cluster: Cluster) -> list[PartitionPlacement]:
    """The reassignment file, checked whole against its format and the cluster."""
    text = _read(args.reassignment_json_file, "--reassignment-json-file")
    path = args.reassignment_json_file
    placements: list[PartitionPlacement] = _with_path(path, lambda: parse_reassignment(text))
    dir_brokers = sorted({b for p in placements for b, _ in p.dir_moves() if b in cluster.brokers})
    log_dirs = {}
    for broker in dir_brokers:
        log_dirs[broker] = {r.log_dir: r.error_code == ErrorCode.NONE for r in cluster.describe(broker)}
    _with_path(path, lambda: check_placements(placements, cluster.partitions, cluster.brokers, log_dirs))
    return placements


def current_json(placements: Iterable[PartitionPlacement], cluster: Cluster) -> str:
    current = [cluster.partitions[(p.topic, p.partition)] for p in placements]
    return reassignment_json(PartitionPlacement(p.topic, p.partition, tuple(r), (ANY_DIR,) * len(r))
                             for p, r in zip(placements, current, strict=True))


def followed_by(placements: list[PartitionPlacement]) -> Followed:
    return Followed(reassignments={(p.topic, p.partition): p.replicas for p in placements},
                    dir_moves={(b, p.topic, p.partition): d for p in placements for b, d in p.dir_moves()})


# ---- configs (throttles) ------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigChange:
    """Keys to set (a value) or delete (None) on one topic or broker."""

    resource_type: int
    name: str
    values: tuple[tuple[str, str | None], ...]

    @property
    def what(self) -> str:
        return f"{'topic' if self.resource_type == TOPIC_RESOURCE else 'broker'} {self.name}"


def throttle_changes(placements: list[PartitionPlacement], cluster: Cluster, rate: int | None,
                     log_dirs_rate: int | None) -> list[ConfigChange]:
    """Kafka's throttles for a reassignment: the leaders' current replicas and the adding replicas
    of each moving partition, the rates on every broker involved, and the move rate on the brokers
    given a log dir."""
    changes: list[ConfigChange] = []
    rates: dict[int, list[tuple[str, str | None]]] = {}
    if rate is not None:
        leading: dict[str, set[tuple[int, int]]] = {}
        following: dict[str, set[tuple[int, int]]] = {}
        for p in placements:
            current = cluster.partitions[(p.topic, p.partition)]
            adding = [b for b in p.replicas if b not in current]
            if not adding:
                continue
            leading.setdefault(p.topic, set()).update((p.partition, b) for b in current)
            following.setdefault(p.topic, set()).update((p.partition, b) for b in adding)
            for broker in {*current, *p.replicas}:
                rates[broker] = [(LEADER_RATE, str(rate)), (FOLLOWER_RATE, str(rate))]
        for topic in sorted(leading):
            changes.append(ConfigChange(TOPIC_RESOURCE, topic, (
                (LEADER_REPLICAS, throttled_replicas(leading[topic])),
                (FOLLOWER_REPLICAS, throttled_replicas(following[topic])))))
    if log_dirs_rate is not None:
        for broker in {b for p in placements for b, _ in p.dir_moves()}:
            rates.setdefault(broker, []).append((LOG_DIRS_RATE, str(log_dirs_rate)))
    changes += [ConfigChange(BROKER_RESOURCE, str(b), tuple(values)) for b, values in sorted(rates.items())]
    return changes


def clearing_changes(topics: Iterable[str], brokers: Iterable[int]) -> list[ConfigChange]:
    return ([ConfigChange(BROKER_RESOURCE, str(b), ((LEADER_RATE, None), (FOLLOWER_RATE, None),
                                                    (LOG_DIRS_RATE, None))) for b in sorted(brokers)]
            + [ConfigChange(TOPIC_RESOURCE, t, ((LEADER_REPLICAS, None), (FOLLOWER_REPLICAS, None)))
               for t in sorted(set(topics))])


def alter_configs(cluster: Cluster, changes: list[ConfigChange], validate_only: bool) -> list[str]:
    """IncrementalAlterConfigs: a broker's own configs to that broker (the only one that takes
    them), topics' to any broker.  Returns one line per refused resource."""
    by_connection: dict[int | None, list[ConfigChange]] = {}
    for change in changes:
        broker = int(change.name) if change.resource_type == BROKER_RESOURCE else None
        by_connection.setdefault(broker, []).append(change)
    refused = []
    for broker, batch in by_connection.items():
        body = {"validate_only": validate_only, "resources": [
            {"resource_type": c.resource_type, "resource_name": c.name, "configs": [
                {"name": key, "config_operation": DELETE if value is None else SET, "value": value}
                for key, value in c.values]} for c in batch]}
        try:
            if broker is None:
                response = cluster.ask_any(INCREMENTAL_ALTER_CONFIGS, body)
            else:
                _, response = cluster.connection(broker).request(INCREMENTAL_ALTER_CONFIGS, body)
        except ToolError as exc:
            refused += [f"{change.what}: {exc}" for change in batch]
            continue
        for change, answer in zip(batch, response.responses, strict=True):
            if answer.error_code:
                keys = ", ".join(key for key, _ in change.values)
                refused.append(f"{change.what} refused {keys}: {ErrorCode(answer.error_code).name}"
                               + (f" ({answer.error_message})" if answer.error_message else ""))
    return refused


def clear_throttles(cluster: Cluster, topics: Iterable[str], args: argparse.Namespace, out: TextIO) -> int:
    """Remove the throttles --execute sets, from every broker and the given topics (unless
    --preserve-throttles)."""
    if args.preserve_throttles:
        return 0
    brokers = sorted(cluster.brokers)
    topics = sorted(set(topics))
    out.write(f"Clearing broker-level throttles on brokers {','.join(map(str, brokers))}\n")
    out.write(f"Clearing topic-level throttles on topic(s) {','.join(topics)}\n")
    refused = alter_configs(cluster, clearing_changes(topics, brokers), validate_only=False)
    for line in refused:
        out.write(line + "\n")
    return 1 if refused else 0


# ---- --execute ----------------------------------------------------------------------------


def _positive(value: int | None, option: str) -> int | None:
    if value is not None and value < 1:
        raise ToolError(f"{option}: must be a number of bytes per second >= 1, not {value}")
    return value


def execute(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    rate = _positive(args.throttle, "--throttle")
    log_dirs_rate = _positive(args.replica_alter_log_dirs_throttle, "--replica-alter-log-dirs-throttle")
    cluster = Cluster.discover(args.bootstrap_server, CLIENT_ID, ClientSecurity.from_file(args.command_config))
    try:
        placements = load_plan(args, cluster)
        controller = cluster.any_connection()
        controller.version_of(ALTER_PARTITION_REASSIGNMENTS)
        controller.version_of(LIST_PARTITION_REASSIGNMENTS)
        dir_plan: dict[int, list[Assignment]] = {}
        for p in placements:
            for broker, log_dir in p.dir_moves():
                dir_plan.setdefault(broker, []).append(Assignment(p.topic, p.partition, log_dir, broker))
        for broker in dir_plan:
            cluster.connection(broker).version_of(ALTER_REPLICA_LOG_DIRS)
        ongoing = reassignments_of(cluster)
        if ongoing and not args.additional:
            names = ", ".join(f"{t}-{p}" for t, p in sorted(ongoing))
            raise ToolError(f"reassignments are already under way ({names}); wait for them (--verify, "
                            "--progress), cancel them, or add --additional to start these besides them")
        changes = throttle_changes(placements, cluster, rate, log_dirs_rate)
        # Every throttle is checked by its broker before any is set, so a refused one changes nothing.
        refused = alter_configs(cluster, changes, validate_only=True)
        if refused:
            raise ToolError("the throttles were refused: " + "; ".join(refused))

        out.write("Current partition replica assignment\n\n" + current_json(placements, cluster) + "\n\n")
        out.write("Save this to use as the --reassignment-json-file option during rollback\n")
        if changes:
            out.write("Warning: run --verify until the reassignment is done, so that the throttles are "
                      "removed.\n")
            refused = alter_configs(cluster, changes, validate_only=False)
            if refused:
                err.write("".join(line + "\n" for line in refused) + "nothing was moved\n")
                return 1
            if rate is not None:
                out.write(f"The inter-broker throttle limit was set to {rate} B/s\n")
            if log_dirs_rate is not None:
                out.write(f"The replica-alter-dir throttle limit was set to {log_dirs_rate} B/s\n")
        if send_moves(cluster, dir_plan, out):
            err.write("log dir moves were refused; the partition reassignments were not sent\n")
            return 1
        failures = reassign(cluster, [(p.topic, p.partition, list(p.replicas)) for p in placements])
        if failures:
            out.write("Error reassigning partition(s):\n" + "".join(line + "\n" for line in failures))
            return 1
        out.write(f"Successfully started partition reassignment{'s' if len(placements) > 1 else ''} for "
                  + ",".join(p.name for p in placements) + "\n")
        if args.progress:
            return follow(lambda: take_snapshot(cluster), followed_by(placements), out, args.interval,
                          args.timeout)
        return 0
    finally:
        cluster.close()


def reassign(cluster: Cluster, targets: list[tuple[str, int, list[int] | None]],
             tolerated: tuple[ErrorCode, ...] = ()) -> list[str]:
    """One AlterPartitionReassignments (replicas None: cancel); one line per refused partition."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for topic, partition, replicas in targets:
        topics.setdefault(topic, []).append({"partition_index": partition, "replicas": replicas})
    body = {"timeout_ms": 60000, "allow_replication_factor_change": True,
            "topics": [{"name": name, "partitions": partitions} for name, partitions in topics.items()]}
    response = cluster.ask_controller(ALTER_PARTITION_REASSIGNMENTS, body)
    if response.error_code:
        return [f"AlterPartitionReassignments failed: {ErrorCode(response.error_code).name}"
                + (f" ({response.error_message})" if response.error_message else "")]
    return [f"{topic.name}-{p.partition_index}: {ErrorCode(p.error_code).name}"
            + (f" ({p.error_message})" if p.error_message else "")
            for topic in response.responses for p in topic.partitions
            if p.error_code and ErrorCode(p.error_code) not in tolerated]


# ---- --verify -----------------------------------------------------------------------------


def verify_lines(placements: list[PartitionPlacement], snapshot: Snapshot) -> tuple[list[str], list[str]]:
    """(lines, states): one line per partition and per replica given a dir, and its state
    (done, moving or failed)."""
    lines, states = [], []
    for p in placements:
        key = (p.topic, p.partition)
        replicas = snapshot.replicas.get(key, ())
        if key in snapshot.reassignments:
            lines.append(f"Reassignment of partition {p.name} is still in progress.")
            states.append("moving")
        elif tuple(replicas) == p.replicas:
            lines.append(f"Reassignment of partition {p.name} is completed.")
            states.append("done")
        else:
            lines.append(f"There is no active reassignment of partition {p.name}, but replica set is "
                         f"{list(replicas)} rather than {list(p.replicas)}.")
            states.append(FAILED)
    for p in placements:
        for broker, log_dir in p.dir_moves():
            sizes = snapshot.sizes.get((broker, p.topic, p.partition))
            replica = f"replica {p.name} on broker {broker}"
            if sizes is not None and sizes.log_dir == log_dir and sizes.future_dir is None:
                lines.append(f"Reassignment of {replica} to {log_dir} is completed.")
                states.append("done")
            elif (sizes is not None and sizes.future_dir == log_dir) or (
                    sizes is None and (p.topic, p.partition) in snapshot.reassignments):
                lines.append(f"Reassignment of {replica} to {log_dir} is still in progress.")
                states.append("moving")
            else:
                where = "absent" if sizes is None else f"in {sizes.log_dir}"
                why = f": {sizes.move_error}" if sizes is not None and sizes.move_error else ""
                lines.append(f"The {replica} is {where}, not being moved to {log_dir}{why}.")
                states.append(FAILED)
    return lines, states


def verify(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    cluster = Cluster.discover(args.bootstrap_server, CLIENT_ID, ClientSecurity.from_file(args.command_config))
    try:
        placements = load_plan(args, cluster)
        dir_brokers = sorted({b for p in placements for b, _ in p.dir_moves()})
        for attempt in range(VERIFY_ATTEMPTS):
            if attempt:
                time.sleep(1.0)
            lines, states = verify_lines(placements, take_snapshot(cluster, dir_brokers))
            # A failure may be a broker's Metadata not showing what the controller did yet.
            if FAILED not in states:
                break
        out.write("Status of partition reassignment:\n" + "".join(line + "\n" for line in lines))
        if FAILED in states:
            return 1
        if "moving" in states:
            return STILL_MOVING
        return clear_throttles(cluster, [p.topic for p in placements], args, out)
    finally:
        cluster.close()


# ---- --cancel -----------------------------------------------------------------------------


def cancel(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    cluster = Cluster.discover(args.bootstrap_server, CLIENT_ID, ClientSecurity.from_file(args.command_config))
    try:
        placements = load_plan(args, cluster)
        failures = reassign(cluster, [(p.topic, p.partition, None) for p in placements],
                            tolerated=(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,))
        if failures:
            out.write("Error cancelling partition reassignment(s):\n" + "".join(line + "\n" for line in failures))
            return 1
        out.write("Successfully cancelled partition reassignments for: "
                  + ",".join(p.name for p in placements) + "\n")
        # A move between dirs still copying is cancelled by asking for the dir the replica is in.
        sizes = sizes_of(cluster, sorted({b for p in placements for b, _ in p.dir_moves()}))
        back: dict[int, list[Assignment]] = {}
        for p in placements:
            for broker, log_dir in p.dir_moves():
                found = sizes.get((broker, p.topic, p.partition))
                if found is not None and found.future_dir == log_dir and found.log_dir is not None:
                    back.setdefault(broker, []).append(Assignment(p.topic, p.partition, found.log_dir, broker))
        if back and send_moves(cluster, back, out):
            return 1
        return clear_throttles(cluster, [p.topic for p in placements], args, out)
    finally:
        cluster.close()


# ---- --list, --progress, --generate -------------------------------------------------------


def list_reassignments(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    cluster = Cluster.discover(args.bootstrap_server, CLIENT_ID, ClientSecurity.from_file(args.command_config))
    try:
        ongoing = reassignments_of(cluster)
    finally:
        cluster.close()
    if not ongoing:
        out.write("No partition reassignments found.\n")
        return 0
    out.write("Current partition reassignments:\n")
    for (topic, partition), state in sorted(ongoing.items()):
        out.write(f"{topic}-{partition}: replicas: {_ids(state.replicas)}. adding: {_ids(state.adding)}. "
                  f"removing: {_ids(state.removing)}.\n")
    return 0


def _ids(brokers: Iterable[int]) -> str:
    return ",".join(map(str, brokers))


def watch(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    cluster = Cluster.discover(args.bootstrap_server, CLIENT_ID, ClientSecurity.from_file(args.command_config))
    try:
        followed = followed_by(load_plan(args, cluster)) if args.reassignment_json_file else Followed()
        return follow(lambda: take_snapshot(cluster), followed, out, args.interval, args.timeout,
                      idle="no reassignments or log dir moves in progress")
    finally:
        cluster.close()


def propose(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    path = args.topics_to_move_json_file
    text = _read(path, "--topics-to-move-json-file")
    topics: list[str] = _with_path(path, lambda: parse_topics_to_move(text))
    if not args.broker_list:
        raise ToolError("--generate needs --broker-list ID,ID,...")
    brokers = parse_broker_list(args.broker_list)
    cluster = Cluster.discover(args.bootstrap_server, CLIENT_ID, ClientSecurity.from_file(args.command_config))
    try:
        for i, topic in enumerate(topics):
            if topic not in cluster.topics():
                raise ToolError(f"{path}: topics[{i}].topic: topic {topic!r} does not exist")
        unknown = [b for b in brokers if b not in cluster.brokers]
        if unknown:
            raise ToolError(f"--broker-list: broker {unknown[0]} is not in the cluster "
                            f"(brokers: {sorted(cluster.brokers)})")
        wanted = set(topics)
        current = {tp: tuple(r) for tp, r in sorted(cluster.partitions.items()) if tp[0] in wanted}
        sizes: dict[tuple[str, int], int] = {}
        for (_, topic, partition), found in sizes_of(cluster, sorted(cluster.brokers)).items():
            if topic in wanted and found.log_dir is not None:
                sizes[(topic, partition)] = max(sizes.get((topic, partition), 0), found.size)
        plan = generate(current, sizes, brokers)
    finally:
        cluster.close()
    out.write("Current partition replica assignment\n")
    out.write(reassignment_json(PartitionPlacement(t, p, r, (ANY_DIR,) * len(r))
                                for (t, p), r in current.items()) + "\n\n")
    out.write("Proposed partition reassignment configuration\n" + reassignment_json(plan) + "\n")
    return 0


# ---- wiring -------------------------------------------------------------------------------

ACTIONS: dict[str, Action] = {"execute": execute, "verify": verify, "cancel": cancel, "list": list_reassignments,
                              "generate": propose, "progress": watch}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT[,HOST:PORT]", help="a broker to ask")
    add_command_config(parser)
    for name, text in (("execute", "start the reassignment of --reassignment-json-file"),
                       ("verify", "say which partitions of the file are done, moving or failed; once all are "
                                  "done, remove the throttles"),
                       ("cancel", "cancel the reassignments (and dir moves) of the file, remove the throttles"),
                       ("list", "list the reassignments under way: replicas, adding, removing"),
                       ("generate", "propose a balanced placement of --topics-to-move-json-file's topics on "
                                    "--broker-list")):
        parser.add_argument(f"--{name}", action="store_true", help=text)
    parser.add_argument("--progress", action="store_true",
                        help="show every moving replica live (bytes copied, rate, ETA) until all are done; "
                             "with --execute: the ones it started")
    parser.add_argument("--reassignment-json-file", metavar="FILE",
                        help='{"version":1,"partitions":[{"topic":..,"partition":..,"replicas":[..],'
                             '"log_dirs":[..]}]}')
    parser.add_argument("--topics-to-move-json-file", metavar="FILE", help='{"version":1,"topics":[{"topic":..}]}')
    parser.add_argument("--broker-list", metavar="ID,ID", help="the brokers --generate places replicas on")
    parser.add_argument("--throttle", type=int, metavar="BYTES/S",
                        help="replication throttle of the brokers and replicas involved (--execute)")
    parser.add_argument("--replica-alter-log-dirs-throttle", type=int, metavar="BYTES/S",
                        help="throttle of moves between log dirs on the brokers given a dir (--execute)")
    parser.add_argument("--additional", action="store_true",
                        help="--execute although other reassignments are under way")
    parser.add_argument("--preserve-throttles", action="store_true", help="--verify and --cancel keep the throttles")
    parser.add_argument("--interval", type=float, default=1.0, metavar="SECONDS", help="--progress refresh")
    parser.add_argument("--timeout", type=float, default=0.0, metavar="SECONDS",
                        help="--progress gives up after this long (default: never)")


def requested(args: argparse.Namespace) -> str:
    chosen = [name for name in ("execute", "verify", "cancel", "list", "generate") if getattr(args, name)]
    if len(chosen) > 1:
        raise ToolError("give one action, not " + " and ".join(f"--{name}" for name in chosen))
    if chosen:
        return chosen[0]
    if args.progress:
        return "progress"
    raise ToolError("no action: use --execute, --verify, --cancel, --list, --progress or --generate")


def run(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    return run_action(ACTIONS, requested, args, out, err)
