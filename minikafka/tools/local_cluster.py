"""`make cluster`: a local ZooKeeper and three brokers in the foreground; Ctrl-C stops them all.

ZooKeeper is Debian's package (config/zookeeper.properties: 127.0.0.1:2181, data in
./data/zookeeper); the brokers use config/broker-1..3.properties. Every line a process prints is
shown prefixed with its name. On Ctrl-C (or SIGTERM) the brokers stop cleanly first (controlled
shutdown: leadership moves before each one goes), then ZooKeeper.
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

ZK_SERVER = Path("/usr/share/zookeeper/bin/zkServer.sh")
BROKER_CONFIGS = [f"config/broker-{i}.properties" for i in (1, 2, 3)]


def _pipe(name: str, process: subprocess.Popen[bytes]) -> None:
    assert process.stdout is not None
    for line in iter(process.stdout.readline, b""):
        sys.stdout.write(f"[{name}] {line.decode(errors='replace')}")
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
    try:
        deadline = time.monotonic() + 30
        while not _zookeeper_answers(zookeeper_port):
            if zookeeper.poll() is not None or time.monotonic() > deadline:
                print(f"ZooKeeper did not start on 127.0.0.1:{zookeeper_port} (is the port taken?)", file=sys.stderr)
                return 1
            time.sleep(0.2)
        for index, config in enumerate(BROKER_CONFIGS, start=1):
            brokers.append(_spawn(f"broker-{index}", [sys.executable, "-m", "minikafka", "serve", "--config", config]))
        print("cluster up: ZooKeeper and three brokers started (Ctrl-C stops them all)", flush=True)
        while not stopping.is_set() and all(b.poll() is None for b in brokers):
            stopping.wait(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        for broker in brokers:
            if broker.poll() is None:
                broker.send_signal(signal.SIGTERM)
        for broker in brokers:
            try:
                broker.wait(60)
            except subprocess.TimeoutExpired:
                broker.kill()
        if zookeeper.poll() is None:
            os.killpg(zookeeper.pid, signal.SIGTERM)
            try:
                zookeeper.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(zookeeper.pid, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
