"""The ``minikafka`` command."""

from __future__ import annotations

import argparse
import asyncio
import atexit
import logging
import os
import signal
import sys
from importlib import metadata
from typing import NoReturn

from minikafka.config.broker import (
    DEFINITIONS,
    KAFKA_KEYS_WITHOUT_EFFECT,
    BrokerConfig,
    ConfigError,
    overrides_from_environment,
    shown_value,
)
from minikafka.tools import acls as acls_tool
from minikafka.tools import configs as configs_tool
from minikafka.tools import consumer_groups as groups_tool
from minikafka.tools import log_dirs as log_dirs_tool
from minikafka.tools import reassign_partitions as reassign_tool
from minikafka.tools import topics as topics_tool
from minikafka.tools.client import ClientSecurity, Connection, ToolError, add_command_config

EXIT_CODES = "exit codes: 0 done, 1 failed (a broker refused or could not be reached), 2 usage (a wrong option " \
             "or file; nothing sent), 4 authentication failed"

log = logging.getLogger("minikafka")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="minikafka", description="A small Kafka-compatible broker built for JBOD")
    parser.add_argument("--version", action="version", version=f"minikafka {_version()}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser(
        "serve", help="run a broker", description="Run a broker (with no arguments: the embedded broker of make run).",
        epilog="Configuration keys are Apache Kafka's; `minikafka config-keys` lists every key with its default "
               "and meaning.")
    serve.add_argument("--config", help="server.properties file")
    serve.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                       help="set a configuration value (repeatable)")
    serve.add_argument("--from-env", action="store_true",
                       help="take KAFKA_* environment variables as settings, as Kafka's container images do "
                            "(KAFKA_ZOOKEEPER_CONNECT is zookeeper.connect); --override still wins")
    serve.add_argument("--log-level", default=os.environ.get("MINIKAFKA_LOG_LEVEL", "INFO"),
                       metavar="LEVEL[,LOGGER=LEVEL...]",
                       help="the log level, then a level for any logger and those under it (as log4j's loggers "
                            "in Kafka), e.g. INFO,minikafka.group=DEBUG; default $MINIKAFKA_LOG_LEVEL or INFO")
    ping = commands.add_parser("ping", help="exit 0 when a broker answers ApiVersions (a health check)")
    ping.add_argument("--bootstrap-server", default="127.0.0.1:9092", metavar="HOST:PORT")
    ping.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the answer")
    add_command_config(ping)
    ping.add_argument("--log-level", default="WARNING")
    log_dirs = commands.add_parser("log-dirs", help="operate on the log dirs of a broker")
    log_dirs.add_argument("--config", help="server.properties file of the broker")
    log_dirs.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                          help="set a configuration value (repeatable)")
    log_dirs.add_argument("--recreate", nargs="+", metavar="TOPIC-PARTITION",
                          help="with the broker stopped: accept that these replicas lost their data (their "
                               "log dir failed or was replaced) and have the broker re-create them empty")
    log_dirs.add_argument("--yes", action="store_true", help="confirm --recreate (the data is lost for good)")
    log_dirs_tool.add_arguments(log_dirs)
    log_dirs.add_argument("--log-level", default="WARNING")
    reassign = commands.add_parser(
        "reassign-partitions", help="move partitions' replicas between brokers (kafka-reassign-partitions.sh)",
        description="Move partitions' replicas between brokers and log dirs, with Apache Kafka's reassignment "
                    "files, and follow them live (--progress).")
    reassign_tool.add_arguments(reassign)
    reassign.add_argument("--log-level", default="WARNING")
    admin_tools = {
        "topics": (topics_tool, "create, list, describe, alter and delete topics (kafka-topics.sh)",
                   "Create, list, describe, alter and delete topics, with kafka-topics.sh's options."),
        "configs": (configs_tool, "describe and alter configs of topics, brokers, users and client quotas "
                    "(kafka-configs.sh)",
                    "Describe and alter the dynamic configs of topics and brokers, users' SCRAM credentials "
                    "(in ZooKeeper before the brokers start, or through a broker: KIP-554), and the client "
                    "quotas of users and client ids (KIP-546), with kafka-configs.sh's options."),
        "acls": (acls_tool, "add, remove and list ACLs (kafka-acls.sh)",
                 "Add, remove and list ACLs, with kafka-acls.sh's options."),
        "consumer-groups": (groups_tool, "list, describe (with lag), reset offsets of and delete consumer groups "
                                         "(kafka-consumer-groups.sh)",
                            "List, describe, reset the offsets of and delete consumer groups, with "
                            "kafka-consumer-groups.sh's options."),
    }
    for name, (tool, summary, description) in admin_tools.items():
        tool_parser = commands.add_parser(name, help=summary, description=description, epilog=EXIT_CODES,
                                          formatter_class=argparse.RawDescriptionHelpFormatter)
        tool.add_arguments(tool_parser)
        tool_parser.add_argument("--log-level", default="WARNING")
    commands.add_parser("config-keys", help="list every configuration key of serve, its default and meaning")
    args = parser.parse_args(argv)
    if args.command == "config-keys":
        print_config_keys()
        return 0
    try:
        root_level, logger_levels = parse_log_levels(args.log_level)
    except ValueError as exc:
        parser.error(f"--log-level: {exc}")
    logging.basicConfig(level=root_level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for name, level in logger_levels.items():
        logging.getLogger(name).setLevel(level)
    if args.command == "serve":
        environment = overrides_from_environment(os.environ) if args.from_env else []
        return serve_command(args.config, [*environment, *args.override])
    if args.command == "ping":
        return ping_command(args.bootstrap_server, args.timeout, args.command_config)
    if args.command == "log-dirs":
        return log_dirs_command(args, parser)
    if args.command == "reassign-partitions":
        return reassign_tool.run(args)
    if args.command in admin_tools:
        return admin_tools[args.command][0].run(args)
    return 2


def parse_log_levels(text: str) -> tuple[str, dict[str, str]]:
    """``LEVEL[,LOGGER=LEVEL...]``: the root level and a level per named logger."""
    root, *named = [part.strip() for part in text.split(",")]

    known = logging.getLevelNamesMapping()

    def level(value: str, where: str) -> str:
        if value.upper() not in known:
            raise ValueError(f"{value!r} {where} is not a level (one of {', '.join(known)})")
        return value.upper()

    loggers: dict[str, str] = {}
    for part in named:
        name, equals, value = part.partition("=")
        if not equals or not name.strip():
            raise ValueError(f"{part!r} is not LOGGER=LEVEL")
        loggers[name.strip()] = level(value.strip(), f"for {name.strip()}")
    return level(root, "(the first item)"), loggers


def run() -> NoReturn:
    """The command's entry point: ``main``, then the process ends at once. Everything is closed
    by then (a broker has stopped cleanly, its files synced and closed); the interpreter's own
    teardown of some 300 modules would take another 0.3 to 1.5 s, which every restart of a broker
    and every command in a script waits for."""
    code = main()
    # What Python runs at exit still runs (logging's flush, multiprocessing's release of the log
    # cleaner's shared memory and semaphore); only the teardown of the modules is skipped.
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _version() -> str:
    try:
        return metadata.version("minikafka")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "(not installed)"


def print_config_keys() -> None:
    for name, definition in DEFINITIONS.items():
        default = "" if definition.default is None else shown_value(definition.default)
        # Said once: a description may already say how it changes (cluster-wide or per broker).
        dynamic = "; changeable at run time" if definition.dynamic and "run time" not in definition.doc else ""
        print(f"{name}={default}\n    {definition.doc}{dynamic}")
    print("\nKafka keys accepted without effect: " + ", ".join(sorted(KAFKA_KEYS_WITHOUT_EFFECT)))


def log_dirs_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if log_dirs_tool.requested(args) is not None:
        return log_dirs_tool.run(args)
    if not args.recreate:
        parser.error("log-dirs needs an action (--describe, --move, --balance, --progress or --recreate)")
    try:
        config = BrokerConfig.load(args.config, args.override)
    except ConfigError as exc:
        log.error("%s", exc)
        return 2
    from minikafka.tools.recreate import recreate

    return recreate([os.path.abspath(d) for d in config.log_dirs], config.broker_id, args.recreate, args.yes,
                    sys.stdout)


def ping_command(address: str, timeout: float, command_config: str | None = None) -> int:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        print(f"error: --bootstrap-server: {address!r} is not HOST:PORT", file=sys.stderr)
        return 2
    try:
        connection = Connection(host, int(port), timeout=timeout, security=ClientSecurity.from_file(command_config))
    except ToolError as exc:
        print(f"{address} does not answer: {exc}" if exc.exit_code != 2 else f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    connection.close()
    return 0


def serve_command(config_path: str | None, overrides: list[str]) -> int:
    if os.environ.get("MINIKAFKA_STRICT_FIELD_NAMES") == "1":  # set by the test suite
        from protocol.messages import check_field_names

        check_field_names(True)
    try:
        config = BrokerConfig.load(config_path, overrides)
    except ConfigError as exc:
        log.error("%s", exc)
        return 2
    import uvloop

    return uvloop.run(_serve(config))


async def _serve(config: BrokerConfig) -> int:
    from minikafka.server.broker import Broker, BrokerStartupError

    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    try:
        broker = Broker(config)
        await broker.start()
    except ConfigError as exc:  # a setting only usable once its files are read (TLS stores, JAAS)
        log.error("%s", exc)
        return 2
    except BrokerStartupError as exc:
        log.error("broker cannot start: %s", exc)
        return 1
    requested = asyncio.ensure_future(broker.shutdown_requested.wait())
    signalled = asyncio.ensure_future(stopping.wait())
    await asyncio.wait([requested, signalled], return_when=asyncio.FIRST_COMPLETED)
    for waiter in (requested, signalled):
        waiter.cancel()
    await broker.stop()
    # A broker that stopped on its own (a log dir failure the controller could not be told of)
    # exits non-zero, so a supervisor notices and restarts it.
    return 1 if broker.shutdown_requested.is_set() and not stopping.is_set() else 0


if __name__ == "__main__":
    run()
