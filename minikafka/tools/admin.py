"""What ``minikafka topics``, ``configs``, ``acls`` and ``consumer-groups`` share: the options
that reach a cluster (Kafka's --bootstrap-server and --command-config), Kafka's ``k=v,k=[a,b]``
config syntax, and one way to turn a broker's refusal into words and an exit code.

Exit codes, the same for every minikafka tool: 0 done, 1 failed (a broker could not be reached
or refused; nothing or only what the output lists was changed), 2 usage (an option or a file is
wrong; nothing was sent), 4 the broker refused the login of --command-config.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TextIO

from minikafka.tools.client import ClientSecurity, Cluster, RequestFailed, ToolError, add_command_config
from protocol import ErrorCode

TOPIC_RESOURCE, GROUP_RESOURCE, BROKER_RESOURCE = 2, 3, 4


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT[,HOST:PORT...]", help="brokers to ask (required)")
    add_command_config(parser)


def connect(args: argparse.Namespace, client_id: str) -> Cluster:
    if not args.bootstrap_server:
        raise ToolError("--bootstrap-server HOST:PORT is required")
    return Cluster.discover(args.bootstrap_server, client_id, ClientSecurity.from_file(args.command_config))


def run_tool(work: Callable[[], int], err: TextIO = sys.stderr) -> int:
    """Run a tool's work; an error is printed as one line and exits with its code."""
    try:
        return work()
    except ToolError as exc:
        err.write(f"error: {exc}\n")
        return exc.exit_code


def refusal(what: str, error_code: int, message: str | None = None) -> RequestFailed:
    """A broker's refusal of ``what``, in its words when it gave any."""
    name = ErrorCode(error_code).name if error_code in ErrorCode._value2member_map_ else str(error_code)
    return RequestFailed(f"{what}: {name}" + (f": {message}" if message else ""))


def check(what: str, error_code: int, message: str | None = None) -> None:
    if error_code:
        raise refusal(what, error_code, message)


def parse_configs(text: str, option: str) -> dict[str, str]:
    """Kafka's config syntax: ``k1=v1,k2=v2``, a list value in brackets (``k=[a,b]``)."""
    found: dict[str, str] = {}
    for item in _split_top_level(text):
        key, equals, value = item.partition("=")
        key = key.strip()
        if not equals or not key:
            raise ToolError(f"{option}: {item!r} is not KEY=VALUE (several: k1=v1,k2=v2; a list: k=[a,b])")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        if key in found:
            raise ToolError(f"{option}: {key} is given twice")
        found[key] = value
    if not found:
        raise ToolError(f"{option}: no KEY=VALUE given")
    return found


def parse_config_list(values: list[str], option: str) -> dict[str, str]:
    """Repeated ``--config k=v`` options (each may hold several, comma-separated)."""
    found: dict[str, str] = {}
    for text in values:
        for key, value in parse_configs(text, option).items():
            if key in found:
                raise ToolError(f"{option}: {key} is given twice")
            found[key] = value
    return found


def _split_top_level(text: str) -> list[str]:
    items, depth, current = [], 0, ""
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth = max(0, depth - 1)
        if char == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += char
    items.append(current)
    return [item for item in items if item.strip()]


def split_names(text: str, option: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise ToolError(f"{option}: no name given")
    return names
