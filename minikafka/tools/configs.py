"""minikafka configs: kafka-configs.sh's --describe and --alter of topics, brokers, users and
client quotas.

    minikafka configs --bootstrap-server HOST:PORT --entity-type topics --entity-name orders \\
        --alter --add-config retention.ms=3600000,cleanup.policy=[compact,delete]
    minikafka configs --bootstrap-server HOST:PORT --entity-type brokers --entity-name 1 \\
        --alter --add-config log.dirs.balancer.enable=true
    minikafka configs --bootstrap-server HOST:PORT --entity-type brokers --entity-default \\
        --alter --delete-config log.retention.ms
    minikafka configs --bootstrap-server HOST:PORT --entity-type topics|brokers [--entity-name N] --describe [--all]

Topics and brokers go through DescribeConfigs and IncrementalAlterConfigs (a broker's own configs
to that broker, the cluster-wide defaults of --entity-default to any); users' SCRAM credentials
are users.py's, the client quotas of users and client ids (--entity-type users|clients, or
--user/--client) quotas.py's.  A resource's changes are taken whole or not at all: a bad name or value names
the key and changes nothing.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from minikafka.tools import quotas as quotas_tool
from minikafka.tools import users as users_tool
from minikafka.tools.admin import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    add_connection_arguments,
    check,
    connect,
    parse_configs,
    run_tool,
    split_names,
)
from minikafka.tools.client import Cluster, RequestFailed, ToolError
from protocol import ErrorCode

DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 44
SET, DELETE = 0, 1
ENTITY_TYPES = ("topics", "brokers", "users", "clients")
# Kafka's names of DescribeConfigs' config sources, as kafka-configs.sh prints them.
SOURCES = {1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
           4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG"}
DYNAMIC_SOURCES = {1, 2, 3}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_arguments(parser)
    parser.add_argument("--zookeeper", metavar="HOST:PORT[/chroot]",
                        help="users only: write SCRAM credentials to the cluster's ZooKeeper (before brokers start)")
    parser.add_argument("--entity-type", choices=ENTITY_TYPES, help="what to describe or alter")
    parser.add_argument("--entity-name", metavar="NAME", help="the topic, broker id or user")
    parser.add_argument("--entity-default", action="store_true",
                        help="brokers: the cluster-wide defaults every broker takes unless it has its own")
    parser.add_argument("--user", metavar="USER", help="quotas: same as --entity-type users --entity-name USER "
                        "(with --client: the quotas of that user's client id)")
    parser.add_argument("--client", metavar="CLIENT_ID", help="quotas: same as --entity-type clients --entity-name")
    parser.add_argument("--user-defaults", action="store_true", help="quotas: the default user")
    parser.add_argument("--client-defaults", action="store_true", help="quotas: the default client id")
    parser.add_argument("--topic", metavar="TOPIC", help="same as --entity-type topics --entity-name TOPIC")
    parser.add_argument("--broker", metavar="ID", help="same as --entity-type brokers --entity-name ID")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--describe", action="store_true", help="the configs set (with --all: every config)")
    action.add_argument("--alter", action="store_true", help="with --add-config and/or --delete-config")
    parser.add_argument("--add-config", metavar="K1=V1,K2=[A,B]",
                        help="configs to set (users: SCRAM credentials or quotas; clients: quotas)")
    parser.add_argument("--delete-config", metavar="K1,K2", help="configs to put back to their defaults")
    parser.add_argument("--all", action="store_true", help="with --describe: every config, defaults included")


def run(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    return run_tool(lambda: _run(args, out, err), err)


def _run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    _resolve_shortcuts(args)
    if not (args.describe or args.alter):
        raise ToolError("no action: use --describe or --alter")
    quota_entity = _quota_entity(args)
    if quota_entity is not None:
        return _quotas(args, quota_entity, out, err)
    if not args.entity_type:
        raise ToolError("--entity-type is required: topics, brokers, users or clients")
    if args.entity_type == "users":
        if bool(args.zookeeper) == bool(args.bootstrap_server):
            raise ToolError("users: give either --bootstrap-server or --zookeeper")
        return users_tool.run(args, out, err)
    if args.zookeeper:
        raise ToolError(f"--zookeeper serves only --entity-type users; {args.entity_type} need --bootstrap-server")
    if args.entity_default and (args.entity_type != "brokers" or args.entity_name):
        raise ToolError("--entity-default goes with --entity-type brokers and no --entity-name")
    if args.alter:
        if not (args.entity_name or args.entity_default):
            raise ToolError(f"--alter needs --entity-name (a {args.entity_type[:-1]}) or, for brokers, "
                            "--entity-default")
        adds = parse_configs(args.add_config, "--add-config") if args.add_config else {}
        deletes = split_names(args.delete_config, "--delete-config") if args.delete_config else []
        if not adds and not deletes:
            raise ToolError("--alter needs --add-config and/or --delete-config")
        both = sorted(set(adds) & set(deletes))
        if both:
            raise ToolError(f"{both[0]} is both in --add-config and --delete-config")
    elif args.add_config or args.delete_config:
        raise ToolError("--add-config and --delete-config go with --alter")
    if args.entity_type == "brokers" and args.entity_name is not None and not args.entity_name.isdigit():
        raise ToolError(f"--entity-name: a broker is named by its id (a number), not {args.entity_name!r}")
    cluster = connect(args, "minikafka-configs")
    try:
        if args.alter:
            return _alter(cluster, args, adds, deletes, out)
        return _describe(cluster, args, out)
    finally:
        cluster.close()


def _quota_entity(args: argparse.Namespace) -> quotas_tool.EntityParts | None:
    """The client quota entity named (a part named "" stands for every entity of its type), or
    None when the command is not about quotas (a user's SCRAM credentials)."""
    if args.user is not None or args.client is not None or args.user_defaults or args.client_defaults:
        if args.entity_type is not None or args.entity_name is not None or args.entity_default:
            raise ToolError("--user/--client (and their --*-defaults) replace --entity-type, --entity-name and "
                            "--entity-default; give one form")
        parts: quotas_tool.EntityParts = []
        if args.user is not None or args.user_defaults:
            parts.append(("user", None if args.user_defaults else args.user))
        if args.client is not None or args.client_defaults:
            parts.append(("client-id", None if args.client_defaults else args.client))
        return parts
    if args.entity_type not in ("users", "clients"):
        return None
    kind = "user" if args.entity_type == "users" else "client-id"
    if args.entity_type == "users":
        keys = list(parse_configs(args.add_config, "--add-config")) if args.add_config else []
        keys += split_names(args.delete_config, "--delete-config") if args.delete_config else []
        quota_keys = [k for k in keys if quotas_tool.is_quota_key(k)]
        if args.alter and len(quota_keys) < len(keys):
            if quota_keys:
                raise ToolError("give a user's quotas and its SCRAM credentials in two commands")
            return None  # SCRAM credentials
        if args.zookeeper:
            if quota_keys:
                raise ToolError("quotas go through --bootstrap-server, not --zookeeper")
            return None
    return [(kind, None if args.entity_default else "" if args.entity_name is None else args.entity_name)]


def _quotas(args: argparse.Namespace, parts: quotas_tool.EntityParts, out: TextIO, err: TextIO) -> int:
    if args.zookeeper:
        raise ToolError("client quotas go through --bootstrap-server, not --zookeeper")
    if args.alter and any(name == "" for _, name in parts):
        raise ToolError("--alter needs --entity-name or --entity-default (or --user/--client NAME, "
                        "--user-defaults/--client-defaults)")
    adds = parse_configs(args.add_config, "--add-config") if args.add_config else {}
    deletes = split_names(args.delete_config, "--delete-config") if args.delete_config else []
    if args.alter and not (adds or deletes):
        raise ToolError("--alter needs --add-config and/or --delete-config")
    if not args.alter and (adds or deletes):
        raise ToolError("--add-config and --delete-config go with --alter")
    cluster = connect(args, "minikafka-configs")
    try:
        if args.alter:
            return quotas_tool.alter(cluster, parts, adds, deletes, out)
        quotas_tool.describe(cluster, parts, out)
    finally:
        cluster.close()
    # `--describe --entity-type users` shows the users' SCRAM credentials after their quotas, as Kafka does.
    if parts[0][0] == "user" and len(parts) == 1 and args.entity_type == "users":
        return users_tool.run(args, out, err)
    return 0


def _resolve_shortcuts(args: argparse.Namespace) -> None:
    for option, entity_type in (("topic", "topics"), ("broker", "brokers")):
        value = getattr(args, option)
        if value is None:
            continue
        if args.entity_type not in (None, entity_type) or args.entity_name is not None:
            raise ToolError(f"--{option} replaces --entity-type {entity_type} --entity-name; give one of them")
        args.entity_type, args.entity_name = entity_type, value


def _resource(args: argparse.Namespace, name: str) -> tuple[int, str, str]:
    """(resource type, resource name, words for the output) of one entity."""
    if args.entity_type == "topics":
        return TOPIC_RESOURCE, name, f"topic {name}"
    if name == "":
        return BROKER_RESOURCE, "", "brokers in the cluster"
    return BROKER_RESOURCE, name, f"broker {name}"


def _ask(cluster: Cluster, resource_type: int, name: str, api_key: int, body: dict[str, Any]) -> Any:
    """A broker's own configs are its to answer; anything else any broker answers."""
    if resource_type == BROKER_RESOURCE and name:
        return cluster.connection(int(name)).request(api_key, body)[1]
    return cluster.ask_any(api_key, body)


def _alter(cluster: Cluster, args: argparse.Namespace, adds: dict[str, str], deletes: list[str], out: TextIO) -> int:
    resource_type, name, words = _resource(args, "" if args.entity_default else args.entity_name)
    changes = [{"name": k, "config_operation": SET, "value": v} for k, v in adds.items()]
    changes += [{"name": k, "config_operation": DELETE, "value": None} for k in deletes]
    body = {"resources": [{"resource_type": resource_type, "resource_name": name, "configs": changes}],
            "validate_only": False}
    (result,) = _ask(cluster, resource_type, name, INCREMENTAL_ALTER_CONFIGS, body).responses
    check(f"the configs of {words} were not changed", result.error_code, result.error_message)
    kind = "default config for" if args.entity_default else "config for"
    out.write(f"Completed updating {kind} {words}.\n")
    return 0


def _describe(cluster: Cluster, args: argparse.Namespace, out: TextIO) -> int:
    if args.entity_default:
        names = [""]
    elif args.entity_name is not None:
        names = [args.entity_name]
    elif args.entity_type == "topics":
        names = sorted(cluster.topics())
    else:
        names = [*(str(b) for b in sorted(cluster.brokers)), ""]
    for name in names:
        resource_type, resource_name, words = _resource(args, name)
        body = {"resources": [{"resource_type": resource_type, "resource_name": resource_name,
                               "configuration_keys": None}], "include_synonyms": True,
                "include_documentation": False}
        (result,) = _ask(cluster, resource_type, resource_name, DESCRIBE_CONFIGS, body).results
        if result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise RequestFailed(f"topic '{name}' does not exist (minikafka topics --list shows the topics)")
        check(f"the configs of {words} were not described", result.error_code, result.error_message)
        entries = [c for c in result.configs if args.all or c.config_source in DYNAMIC_SOURCES]
        if args.all:
            heading = f"All configs for {words} are:"
        elif resource_name == "" and resource_type == BROKER_RESOURCE:
            heading = "Default configs for brokers in the cluster are:"
        else:
            heading = f"Dynamic configs for {words} are:"
        out.write(heading + "\n")
        for entry in sorted(entries, key=lambda c: c.name):
            synonyms = ", ".join(f"{SOURCES.get(s.source, s.source)}:{s.name}={_text(s.value)}" for s in entry.synonyms)
            out.write(f"  {entry.name}={_text(entry.value)} sensitive={str(entry.is_sensitive).lower()} "
                      f"synonyms={{{synonyms}}}\n")
    return 0


def _text(value: str | None) -> str:
    return "null" if value is None else value
