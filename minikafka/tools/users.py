"""minikafka configs --entity-type users: users' SCRAM credentials, as kafka-configs.sh makes them.

    minikafka configs --zookeeper HOST:PORT[/chroot] --entity-type users --entity-name alice \\
        --alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=...]'
    minikafka configs --bootstrap-server HOST:PORT [--command-config FILE] --entity-type users \\
        --entity-name alice --alter --delete-config SCRAM-SHA-512
    minikafka configs (--zookeeper ... | --bootstrap-server ...) --entity-type users [--entity-name alice] --describe

Its options are parsed by configs.py, which hands it --entity-type users.  With --zookeeper the
credential is written to /config/users/<user> with its change notification,
as a cluster broker writes it (the way to give the brokers their own credential before the first
one starts, when they log in to each other with SCRAM); with --bootstrap-server it goes through
KIP-554's AlterUserScramCredentials, the salted password computed here. The password never leaves
this process.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import secrets
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO, TypeVar

from minikafka.security import scram
from minikafka.security.scram import ScramCredential
from minikafka.tools.client import ClientSecurity, Connection, RequestFailed, ToolError
from protocol import ErrorCode

if TYPE_CHECKING:
    from minikafka.security.stores import ZkSecurityStore

T = TypeVar("T")
DESCRIBE_USERS, ALTER_USERS = 50, 51
_ADD = re.compile(r"\s*(SCRAM-SHA-(?:256|512))=\[([^\]]*)\]\s*(?:,|$)")


@dataclass(frozen=True)
class Upsertion:
    mechanism: str
    password: str
    iterations: int


def parse_add_config(text: str) -> list[Upsertion]:
    """``SCRAM-SHA-256=[iterations=8192,password=...],SCRAM-SHA-512=[password=...]`` (Kafka's syntax)."""
    found: list[Upsertion] = []
    position = 0
    while position < len(text.strip()):
        match = _ADD.match(text, position)
        if match is None:
            raise ToolError(f"--add-config: cannot read {text[position:][:40]!r}: expected "
                            "SCRAM-SHA-256=[password=...] or SCRAM-SHA-512=[iterations=N,password=...]")
        position = match.end()
        options = dict(part.split("=", 1) for part in match.group(2).split(",") if "=" in part)
        unknown = set(options) - {"password", "iterations"}
        if unknown or "password" not in options:
            raise ToolError(f"--add-config {match.group(1)}: takes password=... and optionally iterations=N"
                            + (f", not {', '.join(sorted(unknown))}" if unknown else ""))
        try:
            iterations = int(options.get("iterations", scram.MIN_ITERATIONS))
        except ValueError:
            raise ToolError(f"--add-config {match.group(1)}: iterations must be a number") from None
        problem = scram.iteration_error(iterations)
        if problem is not None:
            raise ToolError(f"--add-config {match.group(1)}: {problem}")
        found.append(Upsertion(match.group(1), options["password"], iterations))
    return found


def parse_delete_config(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    wrong = [name for name in names if name not in scram.HASHES]
    if wrong or not names:
        raise ToolError(f"--delete-config: {', '.join(wrong) or 'nothing'} is not SCRAM-SHA-256 or SCRAM-SHA-512")
    return names


def run(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    try:
        if args.alter:
            if not args.entity_name or not (args.add_config or args.delete_config):
                raise ToolError("--alter needs --entity-name and --add-config and/or --delete-config")
            adds = parse_add_config(args.add_config or "")
            deletes = parse_delete_config(args.delete_config) if args.delete_config else []
            _alter(args, args.entity_name, adds, deletes)
            out.write(f"Completed updating config for user {args.entity_name}.\n")
        else:
            for user, infos in _describe(args, args.entity_name):
                described = ",".join(f"{mechanism}=iterations={iterations}" for mechanism, iterations in infos)
                out.write(f"SCRAM credential configs for user-principal '{user}' are {described}\n")
        return 0
    except ToolError as exc:
        err.write(f"error: {exc}\n")
        return exc.exit_code


def _alter(args: argparse.Namespace, user: str, adds: list[Upsertion], deletes: list[str]) -> None:
    credentials = {a.mechanism: scram.new_credential(a.mechanism, a.password, a.iterations) for a in adds}
    if args.zookeeper:
        def change(current: dict[str, ScramCredential]) -> dict[str, ScramCredential]:
            missing = [m for m in deletes if m not in current]
            if missing:
                raise RequestFailed(f"user {user} has no {', '.join(missing)} credential to delete")
            return {**{m: c for m, c in current.items() if m not in deletes}, **credentials}
        asyncio.run(_in_zookeeper(args.zookeeper, lambda store: store.update_credentials(user, change)))
        return
    upsertions = []
    for upsertion in adds:
        salt = secrets.token_bytes(32)
        upsertions.append({"name": user, "mechanism": scram.MECHANISM_IDS[upsertion.mechanism],
                           "iterations": upsertion.iterations, "salt": salt, "salted_password":
                           scram.salted_password(upsertion.mechanism, upsertion.password, salt, upsertion.iterations)})
    body = {"deletions": [{"name": user, "mechanism": scram.MECHANISM_IDS[m]} for m in deletes],
            "upsertions": upsertions}
    connection = _connect(args)
    try:
        _, response = connection.request(ALTER_USERS, body)
    finally:
        connection.close()
    for result in response.results:
        if result.error_code:
            raise RequestFailed(f"user {result.user}: {ErrorCode(result.error_code).name}: {result.error_message}")


def _describe(args: argparse.Namespace, user: str | None) -> list[tuple[str, list[tuple[str, int]]]]:
    if args.zookeeper:
        found = asyncio.run(_in_zookeeper(args.zookeeper, lambda store: store.credentials()))
        wanted = [user] if user else sorted(found)
        return [(name, [(m, c.iterations) for m, c in sorted(found.get(name, {}).items())]) for name in wanted]
    connection = _connect(args)
    try:
        _, response = connection.request(DESCRIBE_USERS, {"users": [{"name": user}] if user else None})
    finally:
        connection.close()
    if response.error_code:
        raise RequestFailed(f"{ErrorCode(response.error_code).name}: {response.error_message}")
    described: list[tuple[str, list[tuple[str, int]]]] = []
    for result in response.results:
        if result.error_code == ErrorCode.RESOURCE_NOT_FOUND:
            described.append((result.user, []))
        elif result.error_code:
            raise RequestFailed(f"user {result.user}: {ErrorCode(result.error_code).name}: {result.error_message}")
        else:
            described.append((result.user, [(scram.MECHANISMS_BY_ID.get(i.mechanism, str(i.mechanism)), i.iterations)
                                             for i in result.credential_infos]))
    return described


def _connect(args: argparse.Namespace) -> Connection:
    host, _, port = args.bootstrap_server.rpartition(":")
    if not host or not port.isdigit():
        raise ToolError(f"--bootstrap-server: {args.bootstrap_server!r} is not HOST:PORT")
    return Connection(host, int(port), "minikafka-configs", security=ClientSecurity.from_file(args.command_config))


async def _in_zookeeper(connect: str, work: Callable[[ZkSecurityStore], Awaitable[T]]) -> T:
    # Loaded here, not at the top: every minikafka command builds this tool's options, and only
    # this path needs ZooKeeper's client and the stores.
    from minikafka.security.stores import ZkSecurityStore
    from minikafka.zk.kafka_zk import KafkaZk, ZooKeeperUnavailable

    zk = KafkaZk(connect, 10_000, 10_000)
    try:
        await zk.start()
    except ZooKeeperUnavailable as exc:
        raise RequestFailed(str(exc)) from None
    try:
        return await work(ZkSecurityStore(zk))
    finally:
        await zk.close()
