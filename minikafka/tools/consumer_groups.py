"""minikafka consumer-groups: kafka-consumer-groups.sh's --list, --describe, --reset-offsets and --delete.

    minikafka consumer-groups --bootstrap-server HOST:PORT --list
    minikafka consumer-groups --bootstrap-server HOST:PORT --describe --group billing [--members | --state]
    minikafka consumer-groups --bootstrap-server HOST:PORT --reset-offsets --group billing --topic orders \\
        --to-earliest [--execute]
    minikafka consumer-groups --bootstrap-server HOST:PORT --delete --group billing

--describe prints each partition's committed offset, log end offset and lag, and the member that
holds it.  --reset-offsets shows the new offsets and commits them only with --execute, and only
while the group has no members (Kafka's rule: a live consumer would overwrite them).  The group
requests go to the group's coordinator (FindCoordinator); ListGroups to every broker.
"""

from __future__ import annotations

import argparse
import io
import struct
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from types import SimpleNamespace
from typing import Any, TextIO

from minikafka.coordinator.records import RecordFormatError
from minikafka.group.schemas import CONSUMER_ASSIGNMENT
from minikafka.tools.admin import add_connection_arguments, check, connect, refusal, run_tool
from minikafka.tools.client import Cluster, Connection, RequestFailed, ToolError
from protocol import ErrorCode

LIST_OFFSETS, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS = (
    2, 8, 9, 10, 15, 16, 42)
CONSUMER_GROUP_DESCRIBE = 69
# Newer versions name topics by id or several groups at once; these are the newest by name for one group.
OFFSET_FETCH_BY_NAME, OFFSET_COMMIT_BY_NAME = 7, 9
EARLIEST, LATEST = -2, -1
COORDINATOR_ATTEMPTS = 20
RETRIABLE = {ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR}
INACTIVE_STATES = {"Empty", "Dead"}


@dataclass(frozen=True)
class Member:
    member_id: str
    host: str
    client_id: str


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_arguments(parser)
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--list", action="store_true", help="list the groups")
    action.add_argument("--describe", action="store_true", help="offsets and lag (or --members, --state)")
    action.add_argument("--reset-offsets", action="store_true", help="move a group's committed offsets")
    action.add_argument("--delete", action="store_true", help="delete groups that have no members")
    parser.add_argument("--group", action="append", default=[], metavar="GROUP", help="a group (repeatable)")
    parser.add_argument("--all-groups", action="store_true", help="every group (--describe, --reset-offsets, --delete)")
    parser.add_argument("--members", action="store_true", help="with --describe: the members and what they hold")
    parser.add_argument("--state", action="store_true", help="with --describe or --list: the groups' states")
    parser.add_argument("--topic", action="append", default=[], metavar="TOPIC[:P,P]",
                        help="with --reset-offsets: a topic, or some of its partitions (repeatable)")
    parser.add_argument("--all-topics", action="store_true",
                        help="with --reset-offsets: every topic the group has committed offsets of")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--to-earliest", action="store_true", help="the first offset still in the log")
    target.add_argument("--to-latest", action="store_true", help="the log end offset")
    target.add_argument("--to-current", action="store_true", help="the offset committed now")
    target.add_argument("--to-offset", type=int, metavar="OFFSET", help="this offset (kept within the log)")
    target.add_argument("--shift-by", type=int, metavar="N", help="the committed offset plus N (may be negative)")
    target.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss",
                        help="the first offset at or after this time (ISO 8601; local time unless it has a zone)")
    parser.add_argument("--dry-run", action="store_true", help="show the new offsets only (the default)")
    parser.add_argument("--execute", action="store_true", help="commit the new offsets")


def run(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    return run_tool(lambda: _run(args, out, err), err)


def _run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if not (args.list or args.describe or args.reset_offsets or args.delete):
        raise ToolError("no action: use --list, --describe, --reset-offsets or --delete")
    if args.group and args.all_groups:
        raise ToolError("give --group or --all-groups, not both")
    if not args.list and not (args.group or args.all_groups):
        raise ToolError("--group GROUP (or --all-groups) is required here")
    resetting = any((args.to_earliest, args.to_latest, args.to_current, args.to_offset is not None,
                     args.shift_by is not None, args.to_datetime))
    if not args.reset_offsets and (resetting or args.topic or args.all_topics or args.execute or args.dry_run):
        raise ToolError("--topic, --all-topics, --to-*, --shift-by, --dry-run and --execute go with --reset-offsets")
    if args.reset_offsets:
        if not resetting:
            raise ToolError("--reset-offsets needs where to: --to-earliest, --to-latest, --to-current, --to-offset, "
                            "--shift-by or --to-datetime")
        if bool(args.topic) == bool(args.all_topics):
            raise ToolError("--reset-offsets needs --topic or --all-topics (one of them)")
        if args.execute and args.dry_run:
            raise ToolError("give --dry-run or --execute, not both")
    if (args.members or args.state) and not args.describe and not (args.list and args.state and not args.members):
        raise ToolError("--members and --state go with --describe (--state also with --list)")
    datetime_ms = _parse_datetime(args.to_datetime) if args.to_datetime else None
    topics_wanted = [_parse_topic(text) for text in args.topic]
    cluster = connect(args, "minikafka-consumer-groups")
    try:
        groups = args.group or sorted(_list_groups(cluster))
        if args.list:
            return _print_list(cluster, args.state, out)
        if args.describe:
            return _describe(cluster, groups, args, out)
        if args.delete:
            return _delete(cluster, groups, out)
        failed = 0
        for group in groups:
            failed |= _reset(cluster, group, args, topics_wanted, datetime_ms, out, err)
        return failed
    finally:
        cluster.close()


def _parse_topic(text: str) -> tuple[str, list[int] | None]:
    name, colon, partitions = text.partition(":")
    if not name:
        raise ToolError(f"--topic: {text!r} has no topic name")
    if not colon:
        return name, None
    try:
        return name, sorted({int(p) for p in partitions.split(",") if p.strip()})
    except ValueError:
        raise ToolError(f"--topic: {text!r} is not TOPIC or TOPIC:PARTITION,PARTITION,...") from None


def _parse_datetime(text: str) -> int:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ToolError(f"--to-datetime: {text!r} is not a date and time such as 2024-05-01T12:00:00.000") from None
    return int(moment.timestamp() * 1000)


def _list_groups(cluster: Cluster) -> dict[str, str]:
    """Every group of every broker (each coordinator lists its own) -> its state."""
    groups: dict[str, str] = {}
    for broker in sorted(cluster.brokers):
        _, response = cluster.connection(broker).request(LIST_GROUPS, {"states_filter": [], "types_filter": []})
        check(f"broker {broker} did not list its groups", response.error_code)
        for group in response.groups:
            groups[group.group_id] = getattr(group, "group_state", "") or ""
    return groups


def _print_list(cluster: Cluster, with_state: bool, out: TextIO) -> int:
    groups = _list_groups(cluster)
    if not with_state:
        for group in sorted(groups):
            out.write(f"{group}\n")
        return 0
    rows = [("GROUP", "STATE")] + [(g, groups[g] or _state(cluster, g)) for g in sorted(groups)]
    _table(rows, out)
    return 0


def _coordinator(cluster: Cluster, group: str) -> Connection:
    """A connection to the group's coordinator (created on first use, so retried a little)."""
    last = ""
    for _ in range(COORDINATOR_ATTEMPTS):
        response = cluster.ask_any(FIND_COORDINATOR, {"key": group, "key_type": 0, "coordinator_keys": [group]})
        found = response.coordinators[0] if getattr(response, "coordinators", None) else response
        if found.error_code in RETRIABLE:
            last = ErrorCode(found.error_code).name
            time.sleep(0.25)
            continue
        check(f"no coordinator found for group {group}", found.error_code, found.error_message)
        if found.node_id not in cluster.brokers:
            cluster.refresh()
        return cluster.connection(found.node_id)
    raise RequestFailed(f"no coordinator found for group {group}: still {last} after "
                        f"{COORDINATOR_ATTEMPTS} attempts")


def _describe_group(cluster: Cluster, group: str) -> Any:
    coordinator = _coordinator(cluster, group)
    _, response = coordinator.request(DESCRIBE_GROUPS, {"groups": [group], "include_authorized_operations": False})
    (described,) = response.groups
    if described.error_code == ErrorCode.GROUP_ID_NOT_FOUND or (
            described.error_code == ErrorCode.NONE and described.group_state == "Dead"):
        # DescribeGroups knows only classic groups: a KIP-848 group is ConsumerGroupDescribe's.
        consumer_group = _describe_consumer_group(coordinator, group)
        if consumer_group is not None:
            return consumer_group
    if described.error_code == ErrorCode.GROUP_ID_NOT_FOUND:  # Kafka 4's answer for a group it does not have
        return SimpleNamespace(group_state="Dead", members=[], protocol_type="")
    check(f"group {group} was not described", described.error_code, getattr(described, "error_message", None))
    return described


def _describe_consumer_group(coordinator: Connection, group: str) -> Any | None:
    """A consumer-protocol group in DescribeGroups' shape, its members' partitions by name; None
    if the coordinator has no such group (or does not serve the consumer protocol)."""
    if CONSUMER_GROUP_DESCRIBE not in coordinator.versions:
        return None
    _, response = coordinator.request(CONSUMER_GROUP_DESCRIBE, {"group_ids": [group],
                                                                "include_authorized_operations": False})
    (described,) = response.groups
    if described.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
        return None
    check(f"group {group} was not described", described.error_code, described.error_message)
    members = [SimpleNamespace(member_id=m.member_id, client_host=m.client_host, client_id=m.client_id,
                               partitions=[(t.topic_name, p) for t in m.assignment.topic_partitions
                                           for p in t.partitions])
               for m in described.members]
    return SimpleNamespace(group_state=described.group_state, members=members, protocol_type="consumer")


def _state(cluster: Cluster, group: str) -> str:
    return str(_describe_group(cluster, group).group_state)


def _assignments(described: Any) -> dict[tuple[str, int], Member]:
    held: dict[tuple[str, int], Member] = {}
    if described.protocol_type != "consumer":
        return held
    for member in described.members:
        if hasattr(member, "partitions"):  # a consumer-protocol member: ConsumerGroupDescribe named them
            for tp in member.partitions:
                held[tp] = Member(member.member_id, member.client_host, member.client_id)
            continue
        data = bytes(member.member_assignment or b"")
        if len(data) < 2:
            continue
        (version,) = struct.unpack(">h", data[:2])
        try:
            assignment = CONSUMER_ASSIGNMENT.decode_body(min(max(version, 0), 3), io.BytesIO(data[2:]))
        except RecordFormatError:
            continue
        for topic in assignment.assigned_partitions:
            for partition in topic.partitions:
                held[(topic.topic, partition)] = Member(member.member_id, member.client_host, member.client_id)
    return held


def _committed(cluster: Cluster, group: str) -> dict[tuple[str, int], int]:
    _, response = _coordinator(cluster, group).request(
        OFFSET_FETCH, {"group_id": group, "topics": None, "require_stable": False}, max_version=OFFSET_FETCH_BY_NAME)
    check(f"the offsets of group {group} were not fetched", response.error_code)
    committed = {}
    for topic in response.topics:
        for p in topic.partitions:
            check(f"the offset of group {group} in {topic.name}-{p.partition_index} was not fetched", p.error_code)
            if p.committed_offset >= 0:
                committed[(topic.name, p.partition_index)] = p.committed_offset
    return committed


def _list_offsets(cluster: Cluster, partitions: list[tuple[str, int]], timestamp: int) -> dict[tuple[str, int], int]:
    """ListOffsets of each partition at its leader: EARLIEST, LATEST or the first offset at a time
    (-1 when no record is that late)."""
    by_leader: dict[int, list[tuple[str, int]]] = {}
    for tp in partitions:
        leader = cluster.leaders.get(tp, -1)
        if leader < 0:
            raise RequestFailed(f"{tp[0]}-{tp[1]} has no leader, so its offsets are unknown")
        by_leader.setdefault(leader, []).append(tp)
    found = {}
    for leader, tps in by_leader.items():
        topics: dict[str, list[dict[str, Any]]] = {}
        for topic, partition in tps:
            topics.setdefault(topic, []).append({"partition_index": partition, "current_leader_epoch": -1,
                                                 "timestamp": timestamp})
        body = {"replica_id": -1, "isolation_level": 0, "timeout_ms": 10_000,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
        _, response = cluster.connection(leader).request(LIST_OFFSETS, body)
        for topic in response.topics:
            for p in topic.partitions:
                check(f"the offsets of {topic.name}-{p.partition_index} are unknown", p.error_code)
                found[(topic.name, p.partition_index)] = p.offset
    return found


def _describe(cluster: Cluster, groups: list[str], args: argparse.Namespace, out: TextIO) -> int:
    missing = []
    for group in groups:
        described = _describe_group(cluster, group)
        if described.group_state == "Dead":
            missing.append(group)
            continue
        held = _assignments(described)
        if args.state:
            _table([("GROUP", "STATE", "#MEMBERS"), (group, described.group_state, str(len(described.members)))], out)
            continue
        if args.members:
            rows: list[tuple[str, ...]] = [("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS")]
            for m in described.members:
                count = sum(1 for member in held.values() if member.member_id == m.member_id)
                rows.append((group, m.member_id, m.client_host, m.client_id, str(count)))
            if not described.members:
                out.write(f"\nConsumer group '{group}' has no active members.\n")
            _table(rows, out)
            continue
        committed = _committed(cluster, group)
        partitions = sorted(set(committed) | set(held))
        cluster.refresh()
        ends = _list_offsets(cluster, [tp for tp in partitions if tp in cluster.leaders], LATEST)
        if not described.members:
            out.write(f"\nConsumer group '{group}' has no active members.\n")
        rows = [("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                 "CLIENT-ID")]
        for tp in partitions:
            current, end, member = committed.get(tp), ends.get(tp), held.get(tp)
            lag = "-" if current is None or end is None else str(max(0, end - current))
            rows.append((group, tp[0], str(tp[1]), _dash(current), _dash(end), lag,
                         member.member_id if member else "-", member.host if member else "-",
                         member.client_id if member else "-"))
        _table(rows, out)
    if missing:
        raise RequestFailed("consumer group " + ", ".join(f"'{g}'" for g in missing) + " does not exist")
    return 0


def _dash(value: int | None) -> str:
    return "-" if value is None else str(value)


def _table(rows: Sequence[Sequence[str]], out: TextIO) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out.write("\n")
    for row in rows:
        out.write(" ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() + "\n")


def _reset(cluster: Cluster, group: str, args: argparse.Namespace, topics_wanted: list[tuple[str, list[int] | None]],
           datetime_ms: int | None, out: TextIO, err: TextIO) -> int:
    described = _describe_group(cluster, group)
    if described.group_state not in INACTIVE_STATES:
        raise RequestFailed(f"the offsets of group '{group}' can only be reset while it has no members, but it is "
                            f"{described.group_state} with {len(described.members)} member(s); stop its consumers "
                            "first")
    committed = _committed(cluster, group)
    cluster.refresh()
    if args.all_topics:
        partitions = sorted(committed)
    else:
        partitions = []
        for topic, wanted in topics_wanted:
            existing = sorted(p for t, p in cluster.partitions if t == topic)
            if not existing:
                raise RequestFailed(f"topic '{topic}' does not exist (minikafka topics --list shows the topics)")
            unknown = sorted(set(wanted or []) - set(existing))
            if unknown:
                raise ToolError(f"--topic: {topic} has no partition {unknown[0]} (it has {len(existing)})")
            partitions += [(topic, p) for p in (wanted or existing)]
    if not partitions:
        raise RequestFailed(f"group '{group}' has no committed offsets to reset (--all-topics)")
    earliest = _list_offsets(cluster, partitions, EARLIEST)
    latest = _list_offsets(cluster, partitions, LATEST)
    at_time = _list_offsets(cluster, partitions, datetime_ms) if datetime_ms is not None else {}
    targets = {}
    for tp in partitions:
        low, high = earliest[tp], latest[tp]
        current = committed.get(tp)
        if args.to_earliest:
            target = low
        elif args.to_latest:
            target = high
        elif args.to_offset is not None:
            target = args.to_offset
        elif args.to_datetime:
            target = at_time[tp] if at_time[tp] >= 0 else high
        else:  # --to-current and --shift-by start from the committed offset
            if current is None:
                raise RequestFailed(f"group '{group}' has no committed offset in {tp[0]}-{tp[1]} to start from")
            target = current + (args.shift_by or 0)
        if not low <= target <= high:
            err.write(f"warning: {tp[0]}-{tp[1]}: offset {target} is outside the log ({low} to {high}); "
                      f"{min(max(target, low), high)} is used\n")
        targets[tp] = min(max(target, low), high)
    _table([("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")]
           + [(group, t, str(p), str(o)) for (t, p), o in sorted(targets.items())], out)
    if not args.execute:
        out.write("\nDry run: nothing committed (--execute commits these offsets).\n")
        return 0
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), offset in sorted(targets.items()):
        by_topic.setdefault(topic, []).append({"partition_index": partition, "committed_offset": offset,
                                               "committed_leader_epoch": -1, "committed_metadata": ""})
    body = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
    _, response = _coordinator(cluster, group).request(OFFSET_COMMIT, body, max_version=OFFSET_COMMIT_BY_NAME)
    failed = [refusal(f"{t.name}-{p.partition_index}", p.error_code) for t in response.topics for p in t.partitions
              if p.error_code]
    if failed:
        raise RequestFailed(f"group '{group}': offsets not committed: " + "; ".join(str(f) for f in failed))
    return 0


def _delete(cluster: Cluster, groups: list[str], out: TextIO) -> int:
    failed = []
    for group in groups:
        _, response = _coordinator(cluster, group).request(DELETE_GROUPS, {"groups_names": [group]})
        (result,) = response.results
        if result.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
            failed.append(f"group '{group}' does not exist")
        elif result.error_code == ErrorCode.NON_EMPTY_GROUP:
            failed.append(f"group '{group}' still has members; stop its consumers first")
        elif result.error_code:
            failed.append(str(refusal(f"group '{group}'", result.error_code)))
        else:
            out.write(f"Deleted consumer group '{group}'.\n")
    if failed:
        raise RequestFailed("; ".join(failed))
    return 0
