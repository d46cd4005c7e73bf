"""A real ZooKeeper server (Debian's `zookeeper` package) in a child process, for system tests.

`ZooKeeperProcess` owns one server: its config and data dir under the test's temp dir, a free
port on 127.0.0.1, and its output file. It can be stopped, killed, paused and started again on
the same port and data, for "ZooKeeper goes away" scenarios. `close()` always leaves no process;
an atexit hook closes what a crashed run forgot.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.integration.broker_process import HOST, _die_with_parent, free_port

ZK_SERVER = Path("/usr/share/zookeeper/bin/zkServer.sh")
_live: set[ZooKeeperProcess] = set()


class ZooKeeperUnavailable(RuntimeError):
    """Debian's zookeeper package is not installed, or the server did not start."""


class ZooKeeperProcess:
    def __init__(self, root: Path, tick_ms: int = 200) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.data_dir = self.root / "data"
        self.data_dir.mkdir(exist_ok=True)
        self.tick_ms = tick_ms
        self.config = self.root / "zoo.cfg"
        self.output = self.root / "zookeeper.out"
        self._configure(free_port())
        self.process: subprocess.Popen[bytes] | None = None

    def _configure(self, port: int) -> None:
        self.port = port
        tick = self.tick_ms
        # Sessions from 2 to 100 ticks: the tests use short session timeouts.
        self.config.write_text("\n".join([
            f"tickTime={tick}", f"dataDir={self.data_dir}", f"clientPort={port}",
            f"clientPortAddress={HOST}", "admin.enableServer=false", "4lw.commands.whitelist=ruok,srvr",
            f"minSessionTimeout={2 * tick}", f"maxSessionTimeout={100 * tick}", "maxClientCnxns=0", ""]))

    @property
    def connect(self) -> str:
        return f"{HOST}:{self.port}"

    def start(self, timeout: float = 30.0) -> ZooKeeperProcess:
        """Start and wait until it answers. A first start whose free port was taken meanwhile
        (ZooKeeper exits at once) is tried again on another port; a restart keeps its port."""
        first_start = self.process is None and not any(self.data_dir.iterdir())
        for attempt in range(3 if first_start else 1):
            try:
                return self._start(timeout)
            except ZooKeeperUnavailable:
                if attempt == 2 or not first_start:
                    raise
                self._configure(free_port())
        raise AssertionError("unreachable")

    def command(self) -> list[str]:
        """The server's command line: Debian's package."""
        if not ZK_SERVER.exists():
            raise ZooKeeperUnavailable(f"{ZK_SERVER} is missing: install Debian's zookeeper package (make test does)")
        return [str(ZK_SERVER), "start-foreground", str(self.config)]

    def _start(self, timeout: float) -> ZooKeeperProcess:
        env = dict(os.environ, ZOO_LOG_DIR=str(self.root), ZOO_LOG4J_PROP="WARN,CONSOLE")
        with open(self.output, "ab") as out:
            self.process = subprocess.Popen(
                self.command(), cwd=self.root, stdin=subprocess.DEVNULL,
                stdout=out, stderr=out, env=env, preexec_fn=_die_with_parent, start_new_session=True)
        _live.add(self)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.process = None
                _live.discard(self)
                raise ZooKeeperUnavailable(f"ZooKeeper exited during startup:\n{self.output.read_text()[-4000:]}")
            if self.answers():
                return self
            time.sleep(0.1)
        self.close()
        raise ZooKeeperUnavailable(f"ZooKeeper did not answer within {timeout:.0f}s")

    def answers(self) -> bool:
        try:
            with socket.create_connection((HOST, self.port), timeout=1.0) as sock:
                sock.sendall(b"ruok")
                return sock.recv(4) == b"imok"
        except OSError:
            return False

    def _signal(self, sig: int) -> None:
        if self.process is not None and self.process.poll() is None:
            # zkServer.sh execs java in the same process group: signal the whole group.
            os.killpg(self.process.pid, sig)

    def stop(self) -> None:
        """Stop (SIGTERM) and wait; the data stays for a restart."""
        if self.process is None:
            return
        self._signal(signal.SIGTERM)
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGKILL)
            self.process.wait(10)
        self.process = None
        _live.discard(self)

    def kill9(self) -> None:
        if self.process is None:
            return
        self._signal(signal.SIGKILL)
        self.process.wait(10)
        self.process = None
        _live.discard(self)

    def pause(self) -> None:
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def close(self) -> None:
        if self.process is not None:
            with contextlib.suppress(Exception):
                self.resume()
                self.kill9()
        _live.discard(self)


@atexit.register
def _close_forgotten() -> None:
    for server in list(_live):
        server.close()
