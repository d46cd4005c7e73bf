"""minikafka topics: kafka-topics.sh's --create, --list, --describe, --alter and --delete.

    minikafka topics --bootstrap-server HOST:PORT --create --topic orders --partitions 3 \\
        --replication-factor 3 --config cleanup.policy=compact --config segment.ms=10000
    minikafka topics --bootstrap-server HOST:PORT --list
    minikafka topics --bootstrap-server HOST:PORT --describe [--topic orders]
    minikafka topics --bootstrap-server HOST:PORT --alter --topic orders --partitions 6
    minikafka topics --bootstrap-server HOST:PORT --delete --topic orders

As in Kafka, --topic of --describe, --alter and --delete also takes a regular expression; a name
that matches no topic fails (exit 1) unless --if-exists.  --alter also takes --config (set) and
--delete-config (back to the default), which Kafka's kafka-topics.sh leaves to kafka-configs.sh.
"""

from __future__ import annotations

import argparse
import base64
import re
import sys
from typing import Any, TextIO

from minikafka.tools.admin import (
    TOPIC_RESOURCE,
    add_connection_arguments,
    check,
    connect,
    parse_config_list,
    refusal,
    run_tool,
    split_names,
)
from minikafka.tools.client import METADATA, Cluster, RequestFailed, ToolError
from protocol import ErrorCode

CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 19, 20, 37, 32, 44
DYNAMIC_TOPIC_CONFIG = 1
SET, DELETE = 0, 1
TIMEOUT_MS = 30_000
ACTIONS = ("create", "list", "describe", "alter", "delete")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_arguments(parser)
    action = parser.add_mutually_exclusive_group()
    for name, text in [("create", "create a topic"), ("list", "list the topics"),
                       ("describe", "partitions, leaders, replicas, in-sync replicas and configs set"),
                       ("alter", "more partitions (--partitions), configs (--config, --delete-config)"),
                       ("delete", "delete topics")]:
        action.add_argument(f"--{name}", action="store_true", help=text)
    parser.add_argument("--topic", metavar="TOPIC", help="a topic name (a regular expression, except for --create)")
    parser.add_argument("--partitions", type=int, metavar="N", help="partitions (create: the broker's "
                        "num.partitions if not given; alter: the new count, more than now)")
    parser.add_argument("--replication-factor", type=int, metavar="N",
                        help="replicas of each partition (the broker's default.replication.factor if not given)")
    parser.add_argument("--replica-assignment", metavar="B1:B2,B3:B4,...",
                        help="brokers of each partition, partitions separated by commas, replicas by colons")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="a topic config (repeatable; create or alter)")
    parser.add_argument("--delete-config", action="append", default=[], metavar="KEY",
                        help="with --alter: put a config back to its default (repeatable)")
    parser.add_argument("--if-exists", action="store_true", help="alter or delete only if the topic exists")
    parser.add_argument("--if-not-exists", action="store_true", help="create only if the topic does not exist")
    parser.add_argument("--exclude-internal", action="store_true", help="leave out __consumer_offsets and the like")
    parser.add_argument("--under-replicated-partitions", action="store_true",
                        help="describe only partitions with fewer in-sync replicas than replicas")
    parser.add_argument("--unavailable-partitions", action="store_true",
                        help="describe only partitions without a leader")


def run(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    return run_tool(lambda: _run(args, out), err)


def _run(args: argparse.Namespace, out: TextIO) -> int:
    chosen = [name for name in ACTIONS if getattr(args, name)]
    if not chosen:
        raise ToolError("no action: use --create, --list, --describe, --alter or --delete")
    action = chosen[0]
    if action in ("create", "alter", "delete") and not args.topic:
        raise ToolError(f"--{action} needs --topic")
    if action != "alter" and args.delete_config:
        raise ToolError("--delete-config goes with --alter")
    if action not in ("create", "alter") and args.config:
        raise ToolError("--config goes with --create or --alter")
    if action != "create" and (args.replication_factor is not None or args.replica_assignment):
        raise ToolError("--replication-factor and --replica-assignment go with --create")
    configs = parse_config_list(args.config, "--config")
    cluster = connect(args, "minikafka-topics")
    try:
        if action == "create":
            return _create(cluster, args, configs, out)
        if action == "list":
            for name, topic in sorted(_metadata(cluster).items()):
                if not (args.exclude_internal and topic.is_internal):
                    out.write(f"{name}\n")
            return 0
        if action == "describe":
            return _describe(cluster, args, out)
        if action == "alter":
            return _alter(cluster, args, configs, out)
        return _delete(cluster, args, out)
    finally:
        cluster.close()


def _metadata(cluster: Cluster) -> dict[str, Any]:
    response = cluster.ask_any(METADATA, {"topics": None, "allow_auto_topic_creation": False,
                                          "include_topic_authorized_operations": False})
    return {t.name: t for t in response.topics if t.error_code == 0}


def _matching(cluster: Cluster, args: argparse.Namespace) -> dict[str, Any]:
    """The topics --topic names (all without it): its exact name, else the topics its regular
    expression matches whole; none found is a failure unless --if-exists."""
    topics = _metadata(cluster)
    if args.exclude_internal:
        topics = {name: t for name, t in topics.items() if not t.is_internal}
    if not args.topic:
        return topics
    if args.topic in topics:
        return {args.topic: topics[args.topic]}
    try:
        pattern = re.compile(args.topic)
    except re.error:
        pattern = re.compile(re.escape(args.topic))
    found = {name: t for name, t in topics.items() if pattern.fullmatch(name)}
    if not found and not args.if_exists:
        raise RequestFailed(f"topic '{args.topic}' does not exist (minikafka topics --list shows the topics)")
    return found


def _create(cluster: Cluster, args: argparse.Namespace, configs: dict[str, str], out: TextIO) -> int:
    topic: dict[str, Any] = {"name": args.topic, "num_partitions": -1, "replication_factor": -1, "assignments": [],
                             "configs": [{"name": k, "value": v} for k, v in configs.items()]}
    if args.replica_assignment:
        if args.partitions is not None or args.replication_factor is not None:
            raise ToolError("--replica-assignment replaces --partitions and --replication-factor")
        topic["assignments"] = _parse_assignment(args.replica_assignment)
    else:
        if args.partitions is not None:
            if args.partitions < 1:
                raise ToolError(f"--partitions: must be at least 1, not {args.partitions}")
            topic["num_partitions"] = args.partitions
        if args.replication_factor is not None:
            if args.replication_factor < 1:
                raise ToolError(f"--replication-factor: must be at least 1, not {args.replication_factor}")
            topic["replication_factor"] = args.replication_factor
    response = cluster.ask_controller(CREATE_TOPICS, {"topics": [topic], "timeout_ms": TIMEOUT_MS, "validate_only": False})
    (result,) = response.topics
    if result.error_code == ErrorCode.TOPIC_ALREADY_EXISTS and args.if_not_exists:
        return 0
    check(f"topic {args.topic} was not created", result.error_code, result.error_message)
    out.write(f"Created topic {args.topic}.\n")
    return 0


def _parse_assignment(text: str) -> list[dict[str, Any]]:
    assignments = []
    sizes = set()
    for index, part in enumerate(text.split(",")):
        try:
            brokers = [int(b) for b in part.split(":")]
        except ValueError:
            raise ToolError(f"--replica-assignment: {part!r} is not broker ids separated by colons") from None
        if len(set(brokers)) != len(brokers):
            raise ToolError(f"--replica-assignment: partition {index} lists a broker twice ({part})")
        assignments.append({"partition_index": index, "broker_ids": brokers})
        sizes.add(len(brokers))
    if len(sizes) != 1:
        raise ToolError("--replica-assignment: every partition needs the same number of replicas")
    return assignments


def _describe(cluster: Cluster, args: argparse.Namespace, out: TextIO) -> int:
    topics = _matching(cluster, args)
    configs = _dynamic_configs(cluster, sorted(topics))
    only_partitions = args.under_replicated_partitions or args.unavailable_partitions
    for name in sorted(topics):
        topic = topics[name]
        partitions = sorted(topic.partitions, key=lambda p: p.partition_index)
        if not only_partitions:
            replication = len(partitions[0].replica_nodes) if partitions else 0
            shown = ",".join(f"{k}={v}" for k, v in sorted(configs.get(name, {}).items()))
            out.write(f"Topic: {name}\tTopicId: {_topic_id(topic.topic_id)}\tPartitionCount: {len(partitions)}\t"
                      f"ReplicationFactor: {replication}\tConfigs: {shown}\n")
        for p in partitions:
            under = len(p.isr_nodes) < len(p.replica_nodes)
            unavailable = p.leader_id < 0
            if (args.under_replicated_partitions and not under) or (args.unavailable_partitions and not unavailable):
                continue
            leader = "none" if p.leader_id < 0 else str(p.leader_id)
            line = (f"\tTopic: {name}\tPartition: {p.partition_index}\tLeader: {leader}\t"
                    f"Replicas: {_ids(p.replica_nodes)}\tIsr: {_ids(p.isr_nodes)}")
            if p.offline_replicas:
                line += f"\tOffline: {_ids(p.offline_replicas)}"
            out.write(line + "\n")
    return 0


def _ids(ids: Any) -> str:
    return ",".join(str(i) for i in ids)


def _topic_id(value: Any) -> str:
    """Kafka's text form of a topic id: URL-safe base64 of its 16 bytes, unpadded."""
    raw = getattr(value, "bytes", None)
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode() if raw else str(value)


def _dynamic_configs(cluster: Cluster, names: list[str]) -> dict[str, dict[str, str]]:
    """The configs set on each topic (not its defaults), as kafka-topics.sh --describe shows."""
    if not names:
        return {}
    body = {"resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": n, "configuration_keys": None}
                          for n in names], "include_synonyms": False, "include_documentation": False}
    found: dict[str, dict[str, str]] = {}
    for result in cluster.ask_any(DESCRIBE_CONFIGS, body).results:
        if result.error_code == 0:
            found[result.resource_name] = {c.name: c.value for c in result.configs
                                           if c.config_source == DYNAMIC_TOPIC_CONFIG and c.value is not None}
    return found


def _alter(cluster: Cluster, args: argparse.Namespace, configs: dict[str, str], out: TextIO) -> int:
    deletes = [key for text in args.delete_config for key in split_names(text, "--delete-config")]
    if args.partitions is None and not configs and not deletes:
        raise ToolError("--alter needs --partitions, --config or --delete-config")
    both = sorted(set(configs) & set(deletes))
    if both:
        raise ToolError(f"{both[0]} is both in --config and --delete-config")
    topics = _matching(cluster, args)
    if configs or deletes:
        changes = [{"name": k, "config_operation": SET, "value": v} for k, v in configs.items()]
        changes += [{"name": k, "config_operation": DELETE, "value": None} for k in deletes]
        resources = [{"resource_type": TOPIC_RESOURCE, "resource_name": name, "configs": changes}
                     for name in sorted(topics)]
        # Checked on every topic first, so a bad name or value changes none of them.
        for validate_only in (True, False):
            response = cluster.ask_any(INCREMENTAL_ALTER_CONFIGS, {"resources": resources,
                                                                   "validate_only": validate_only})
            for result in response.responses:
                check(f"the configs of topic {result.resource_name} were not changed", result.error_code,
                      result.error_message)
        for name in sorted(topics):
            out.write(f"Updated the configs of topic {name}.\n")
    if args.partitions is not None:
        body = {"topics": [{"name": name, "count": args.partitions, "assignments": None} for name in sorted(topics)],
                "timeout_ms": TIMEOUT_MS, "validate_only": False}
        failed = []
        for result in cluster.ask_controller(CREATE_PARTITIONS, body).results:
            if result.error_code:
                failed.append(refusal(f"topic {result.name} keeps its partitions", result.error_code,
                                      result.error_message))
            else:
                out.write(f"Topic {result.name} now has {args.partitions} partitions.\n")
        if failed:
            raise RequestFailed("; ".join(str(f) for f in failed))
    return 0


def _delete(cluster: Cluster, args: argparse.Namespace, out: TextIO) -> int:
    topics = sorted(_matching(cluster, args))
    if not topics:
        return 0
    body = {"topics": [{"name": name, "topic_id": None} for name in topics], "topic_names": topics,
            "timeout_ms": TIMEOUT_MS}
    failed = []
    for result in cluster.ask_controller(DELETE_TOPICS, body).responses:
        if result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and args.if_exists:
            continue
        if result.error_code:
            failed.append(refusal(f"topic {result.name} was not deleted", result.error_code, result.error_message))
        else:
            out.write(f"Deleted topic {result.name}.\n")
    if failed:
        raise RequestFailed("; ".join(str(f) for f in failed))
    return 0
