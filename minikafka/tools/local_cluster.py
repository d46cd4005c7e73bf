"""`make cluster`: a local ZooKeeper and three brokers in the foreground; Ctrl-C stops them all.

ZooKeeper is Debian's package (config/zookeeper.properties: 127.0.0.1:2181, data in
./data/zookeeper); the brokers use config/broker-1..3.properties. Every line a process prints is
shown prefixed with its name. "cluster up" is printed once every broker answers Metadata with all
three brokers in it. On Ctrl-C (or SIGTERM) the brokers stop one at a time, each once the one before
has exited, the controller last: each hands its leaderships to the brokers still running
(controlled shutdown), so no partition is left without a leader while another broker could lead
it, and the controller does not move while the others stop. Then ZooKeeper stops.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from minikafka.config.broker import read_properties
from minikafka.tools.client import METADATA, Connection, ToolError

ZK_SERVER = Path("/usr/share/zookeeper/bin/zkServer.sh")
BROKER_CONFIGS = [f"config/broker-{i}.properties" for i in (1, 2, 3)]
SERVING_TIMEOUT_S = 90
STOP_TIMEOUT_S = 90


def _pipe(name: str, process: subprocess.Popen[bytes]) -> None:
    assert process.stdout is not None
    noted = False
    for line in iter(process.stdout.readline, b""):
        text = line.decode(errors="replace")
        if text.startswith("SLF4J:"):
            # Debian's ZooKeeper has no SLF4J binding, and says so in three warnings at each start;
            # one line says what it means.
            if not noted:
                sys.stdout.write(f"[{name}] (ZooKeeper's own log is off: Debian's package ships no SLF4J binding)\n")
                noted = True
            continue
        sys.stdout.write(f"[{name}] {text}")
        sys.stdout.flush()


def _spawn(name: str, command: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               env=env, start_new_session=True)
    threading.Thread(target=_pipe, args=(name, process), daemon=True).start()
    return process


def _zookeeper_answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"ruok")
            return sock.recv(4) == b"imok"
    except OSError:
        return False


def _zookeeper_port(config: Path) -> int:
    for line in config.read_text().splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "clientPort":
            return int(value)
    return 2181


def _client_address(config: Path) -> tuple[str, int]:
    """The listener clients use: the first one that is not the inter-broker listener."""
    props = read_properties(config.read_text(), str(config))
    internal = props.get("inter.broker.listener.name", "").upper()
    for listener in props.get("listeners", "PLAINTEXT://127.0.0.1:9092").split(","):
        name, _, address = listener.strip().partition("://")
        if name.upper() != internal or not internal:
            host, _, port = address.rpartition(":")
            return host or "127.0.0.1", int(port)
    raise ValueError(f"{config}: no client listener")


def _metadata(address: tuple[str, int]) -> tuple[int, int] | None:
    """(brokers in Metadata, controller id) as the broker at ``address`` answers, None if it does not."""
    try:
        connection = Connection(*address, client_id="make-cluster", timeout=5)
    except ToolError:
        return None
    try:
        _, response = connection.request(METADATA, {"topics": [], "allow_auto_topic_creation": False})
        return len(response.brokers), response.controller_id
    except ToolError:
        return None
    finally:
        connection.close()


def _wait_until_serving(addresses: list[tuple[str, int]], brokers: list[subprocess.Popen[bytes]]) -> int | None:
    """The controller's id once every broker answers Metadata listing them all; None if a broker
    exited or the time ran out (the reason is printed)."""
    deadline = time.monotonic() + SERVING_TIMEOUT_S
    while time.monotonic() < deadline:
        exited = [i for i, b in enumerate(brokers, start=1) if b.poll() is not None]
        if exited:
            print(f"broker-{exited[0]} exited (its lines above say why); stopping the cluster", file=sys.stderr)
            return None
        answers = [_metadata(address) for address in addresses]
        if all(a is not None and a[0] == len(addresses) and a[1] >= 0 for a in answers):
            return answers[0][1] if answers[0] is not None else None
        time.sleep(0.5)
    print(f"the brokers did not all serve within {SERVING_TIMEOUT_S} s; stopping the cluster", file=sys.stderr)
    return None


def _stop_order(addresses: list[tuple[str, int]], controller: int | None) -> list[int]:
    """Broker ids (1-based), the controller last; the controller is asked again (it may have moved)."""
    for address in addresses:
        answer = _metadata(address)
        if answer is not None and answer[1] >= 0:
            controller = answer[1]
            break
    ids = list(range(len(addresses), 0, -1))
    return [i for i in ids if i != controller] + [i for i in ids if i == controller]


def _stop_one_at_a_time(brokers: list[subprocess.Popen[bytes]], order: list[int]) -> None:
    for broker_id in order:
        broker = brokers[broker_id - 1]
        if broker.poll() is not None:
            continue
        print(f"stopping broker-{broker_id} (controlled shutdown: its leaderships go to the brokers still "
              "running)", flush=True)
        broker.send_signal(signal.SIGTERM)
        try:
            broker.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            print(f"broker-{broker_id} did not stop within {STOP_TIMEOUT_S} s; killing it", file=sys.stderr)
            broker.kill()
            broker.wait()


def main() -> int:
    if not ZK_SERVER.exists():
        print(f"{ZK_SERVER} is missing: install Debian's zookeeper package (apt-get install zookeeper)",
              file=sys.stderr)
        return 1
    Path("data/zookeeper").mkdir(parents=True, exist_ok=True)
    zookeeper_port = _zookeeper_port(Path("config/zookeeper.properties"))
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    zookeeper = _spawn("zookeeper", [str(ZK_SERVER), "start-foreground", os.path.abspath("config/zookeeper.properties")],
                       env=dict(os.environ, ZOO_LOG_DIR=os.path.abspath("data/zookeeper"),
                                ZOO_LOG4J_PROP="WARN,CONSOLE"))
    brokers: list[subprocess.Popen[bytes]] = []
    addresses = [_client_address(Path(config)) for config in BROKER_CONFIGS]
    controller: int | None = None
    try:
        deadline = time.monotonic() + 30
        while not _zookeeper_answers(zookeeper_port):
            if zookeeper.poll() is not None or time.monotonic() > deadline:
                print(f"ZooKeeper did not start on 127.0.0.1:{zookeeper_port} (is the port taken?)", file=sys.stderr)
                return 1
            time.sleep(0.2)
        for index, config in enumerate(BROKER_CONFIGS, start=1):
            brokers.append(_spawn(f"broker-{index}", [sys.executable, "-m", "minikafka", "serve", "--config", config]))
        controller = _wait_until_serving(addresses, brokers)
        if controller is None:
            return 1
        listed = ", ".join(f"{host}:{port}" for host, port in addresses)
        print(f"cluster up: ZooKeeper on 127.0.0.1:{zookeeper_port}, brokers 1-{len(brokers)} serving on {listed} "
              f"(controller: broker {controller}); Ctrl-C stops them one at a time", flush=True)
        while not stopping.is_set() and all(b.poll() is None for b in brokers):
            stopping.wait(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        # A second Ctrl-C must not cut the stop short: a broker killed mid-way leaves its
        # partitions without a leader.
        signal.signal(signal.SIGINT, lambda *_: print("stopping already; the brokers stop one at a time",
                                                       flush=True))
        if brokers:
            _stop_one_at_a_time(brokers, _stop_order(addresses, controller))
        if zookeeper.poll() is None:
            os.killpg(zookeeper.pid, signal.SIGTERM)
            try:
                zookeeper.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(zookeeper.pid, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
