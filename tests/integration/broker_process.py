"""A real minikafka broker in a child process, for integration and system tests.

`BrokerProcess` owns one child process, its port, metrics port, log dirs and stderr file. Only
the test (and its fixtures) that created it may touch it; every method is blocking and meant
to be called from the test's own thread. `close()` is idempotent and always leaves no process
behind; an atexit hook closes whatever a crashed test run forgot.

`KafkaWire` is a minimal blocking Kafka client over one socket, built on kafka-python's
message classes, for tests that need to see or shape raw frames.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import random
import re
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafka import KafkaAdminClient
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.structs import TopicPartitionReplica

REPO_ROOT = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"

_live_brokers: set[BrokerProcess] = set()


def _first_ephemeral_port() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as ports:
            return int(ports.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


_PORTS = random.SystemRandom()
_handed_out: set[int] = set()


def _port_range() -> range:
    """This process's share of the ports below the kernel's ephemeral range: each pytest-xdist
    worker draws from its own slice, so two workers never pick the same port."""
    ports = range(10_000, max(_first_ephemeral_port(), 10_001))
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    worker = int((os.environ.get("PYTEST_XDIST_WORKER") or "gw0").removeprefix("gw") or 0)
    share = len(ports) // max(workers, 1)
    return ports[worker * share:(worker + 1) * share] if share else ports


def ctrl_c_as_in_a_terminal() -> None:
    """preexec_fn of a process a test stops with Ctrl-C (SIGINT to its process group): SIGINT
    back to its default. A suite started as a background job of a non-interactive shell has
    SIGINT ignored, and a Python child started with SIGINT ignored never turns it into
    KeyboardInterrupt, so the test would wait on a process that cannot hear it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on and that this process never handed out
    before, from below the kernel's ephemeral range: a port from that range (what binding port 0
    gives) can be taken by any outgoing connection of another test's clients or brokers before
    the process it is meant for binds it, and that broker then fails to start ("Address already
    in use", seen in CI)."""
    ports = _port_range()
    for _ in range(200):
        port = _PORTS.choice(ports)
        if port in _handed_out:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((HOST, port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def wait_until(condition: Callable[[], Any], timeout: float, interval: float = 0.05, what: str = "condition") -> Any:
    """Poll `condition` until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            result = condition()
        except Exception as exc:  # a condition may raise until it holds
            last_error = exc
            result = None
        if result:
            return result
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what} not reached within {timeout:.0f}s (last error: {last_error!r})")
        time.sleep(interval)


def _die_with_parent() -> None:
    """In the child before exec: ask Linux to SIGKILL it if the test process dies abruptly
    (e.g. a hard timeout), so no broker outlives its test run."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except OSError:
        pass


class BrokerNotReady(RuntimeError):
    """The broker did not become ready, or died; the message carries its stderr."""


class KafkaWire:
    """One blocking connection speaking framed Kafka requests. Not thread-safe."""

    def __init__(self, address: tuple[str, int], timeout: float = 10.0, client_id: str = "minikafka-tests"):
        self.sock = socket.create_connection(address, timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client_id = client_id
        self._next_correlation_id = 1

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> KafkaWire:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def encode(self, request: Any, version: int, correlation_id: int | None = None) -> bytes:
        """The whole frame (size prefix included) of a kafka-python request object."""
        if correlation_id is None:
            correlation_id = self._next_correlation_id
            self._next_correlation_id += 1
        request.with_header(correlation_id=correlation_id, client_id=self.client_id)
        return bytes(request.encode(version=version, header=True, framed=True))

    def send_raw(self, frame: bytes) -> None:
        self.sock.sendall(frame)

    def recv_exactly(self, count: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < count:
            chunk = self.sock.recv(count - len(chunks))
            if not chunk:
                raise ConnectionError(f"connection closed after {len(chunks)} of {count} bytes")
            chunks += chunk
        return bytes(chunks)

    def recv_frame(self) -> bytes:
        """The body of the next response frame (size prefix removed)."""
        (size,) = struct.unpack(">i", self.recv_exactly(4))
        if size < 4:
            raise ValueError(f"response frame of size {size}")
        return self.recv_exactly(size)

    def request(self, request: Any, version: int, response_class: Any) -> Any:
        """Send a request and decode its response with kafka-python's response class."""
        frame = self.encode(request, version)
        (correlation_id,) = struct.unpack_from(">i", frame, 8)
        self.send_raw(frame)
        body = self.recv_frame()
        (got_id,) = struct.unpack_from(">i", body, 0)
        if got_id != correlation_id:
            raise ValueError(f"correlation id {got_id}, expected {correlation_id}")
        return response_class.decode(body, version=version, header=True)

    def api_versions(self, version: int = 3) -> Any:
        request = ApiVersionsRequest(client_software_name="minikafka-tests", client_software_version="1")
        return self.request(request, version, ApiVersionsResponse)

    def metadata(self, topics: list[str] | None = None, version: int = 1) -> Any:
        wanted = None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
        return self.request(MetadataRequest(topics=wanted, allow_auto_topic_creation=False), version,
                            MetadataResponse)


_VERSION_SAMPLE = re.compile(
    r'^minikafka_request_versions_total\{(?P<labels>[^}]*)\}\s+(?P<value>[0-9.eE+-]+)\s*$', re.M)
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_request_versions(metrics_text: str) -> dict[tuple[str, int], int]:
    """{(api name, version): requests} from the broker's Prometheus text."""
    counts: dict[tuple[str, int], int] = {}
    for match in _VERSION_SAMPLE.finditer(metrics_text):
        labels = dict(_LABEL.findall(match["labels"]))
        counts[(labels["api"], int(labels["version"]))] = int(float(match["value"]))
    return counts


class BrokerProcess:
    """One minikafka broker process with its own port, metrics port, log dirs and stderr file.

    Owned by the test or fixture that created it. `restart()` keeps port and dirs, so clients
    reconnect to the same address. `close()` always runs in fixture teardown. Call `start()`
    from a thread that outlives the broker (the test's own): Linux ties the child's life to the
    thread that started it.
    """

    def __init__(
        self,
        root: Path,
        *,
        log_dir_count: int = 2,
        broker_id: int = 1,
        overrides: dict[str, str] | None = None,
        ready_timeout: float = 30.0,
    ):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.broker_id = broker_id
        self.port = free_port()
        self.metrics_port = free_port()
        self.log_dirs = [self.root / f"logdir{i}" for i in range(1, log_dir_count + 1)]
        self.stderr_path = self.root / "broker.stderr"
        self.ready_timeout = ready_timeout
        self.overrides = {
            "broker.id": str(broker_id),
            "listeners": f"PLAINTEXT://{HOST}:{self.port}",
            "log.dirs": ",".join(str(d) for d in self.log_dirs),
            "metrics.port": str(self.metrics_port),
            "auto.create.topics.enable": "true",
        }
        self.overrides.update(overrides or {})
        # Environment variables of this broker's next start only (a test hook for one broker).
        self.extra_env: dict[str, str] = {}
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def address(self) -> tuple[str, int]:
        return (HOST, self.port)

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "minikafka", "serve"]
        for key, value in self.overrides.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd

    def environment(self) -> dict[str, str]:
        return dict(os.environ, PYTHONUNBUFFERED="1", **self.extra_env)

    def start(self) -> BrokerProcess:
        self.launch()
        try:
            self.wait_ready(self.ready_timeout)
        except BaseException:
            self.close()
            raise
        return self

    def launch(self) -> BrokerProcess:
        """Start the process without waiting for it to be ready (``wait_ready`` does): a cluster
        launches its brokers together, so their interpreters start up side by side."""
        if self.is_running():
            raise RuntimeError("broker already running")
        self.starts += 1
        with open(self.stderr_path, "ab") as stderr:
            stderr.write(f"\n===== start #{self.starts}: {' '.join(self.command())}\n".encode())
            stderr.flush()
            self.process = subprocess.Popen(
                self.command(), cwd=self.root, stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr,
                env=self.environment(),
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
        _live_brokers.add(self)
        return self

    def wait_ready(self, timeout: float) -> None:
        """Ready = the port accepts a connection and a Metadata request is answered."""
        deadline = time.monotonic() + timeout
        last_error: BaseException | None = None
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                raise BrokerNotReady(self.describe_failure("broker exited during startup"))
            try:
                with KafkaWire(self.address, timeout=2.0) as wire:
                    response = wire.metadata(topics=[], version=1)
                if any(b.node_id == self.broker_id for b in response.brokers):
                    return
                last_error = RuntimeError(f"metadata lists brokers {response.brokers}")
            except (OSError, ValueError, ConnectionError) as exc:
                last_error = exc
            time.sleep(0.05)
        raise BrokerNotReady(self.describe_failure(f"not ready after {timeout:.0f}s (last: {last_error!r})"))

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait for a clean exit; the exit code is returned (0 for a clean stop)."""
        if self.process is None:
            return 0
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
                raise RuntimeError(self.describe_failure(f"broker ignored SIGTERM for {timeout:.0f}s; killed")) from None
        code = self.process.returncode
        self.process = None
        _live_brokers.discard(self)
        return code

    def kill9(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)
        self.process = None
        _live_brokers.discard(self)

    def restart(self, clean: bool = True) -> BrokerProcess:
        """Stop (SIGTERM if `clean`, else kill -9) and start again on the same port and dirs."""
        if clean:
            code = self.stop()
            if code != 0:
                raise RuntimeError(self.describe_failure(f"clean stop exited with {code}"))
        else:
            self.kill9()
        return self.start()

    def close(self) -> None:
        """Leave no process behind, whatever state the broker is in."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(Exception):
                self.stop(timeout=10)
        if self.process is not None:
            with contextlib.suppress(Exception):
                self.process.kill()
                self.process.wait(10)
        self.process = None
        _live_brokers.discard(self)

    def stderr_text(self, tail_chars: int = 20_000) -> str:
        try:
            text = self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return text[-tail_chars:]

    def stderr_size(self) -> int:
        """Where the broker's stderr ends now: a mark for ``stderr_since``."""
        try:
            return self.stderr_path.stat().st_size
        except FileNotFoundError:
            return 0

    def stderr_since(self, mark: int) -> str:
        """What the broker wrote after ``mark`` (a test sharing a broker reads only its own part)."""
        try:
            with open(self.stderr_path, "rb") as stderr:
                stderr.seek(mark)
                return stderr.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def describe_failure(self, what: str) -> str:
        code = None if self.process is None else self.process.poll()
        return f"{what} (exit code {code}); broker stderr ({self.stderr_path}):\n{self.stderr_text()}"

    def metrics_text(self) -> str:
        url = f"http://{HOST}:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.read().decode()

    def request_versions(self) -> dict[tuple[str, int], int]:
        return parse_request_versions(self.metrics_text())

    def wire(self, timeout: float = 10.0) -> KafkaWire:
        return KafkaWire(self.address, timeout=timeout)

    def advertised_versions(self) -> dict[int, tuple[int, int]]:
        """{api key: (min, max)} from the broker's ApiVersions v0 response."""
        with self.wire() as wire:
            response = wire.api_versions(version=0)
        assert response.error_code == 0, response
        return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}

    def partition_dirs(self) -> dict[str, Path]:
        """{'topic-partition': log dir} for every partition directory found on disk."""
        found: dict[str, Path] = {}
        for log_dir in self.log_dirs:
            if not log_dir.is_dir():
                continue
            for entry in log_dir.iterdir():
                if entry.is_dir() and re.fullmatch(r".+-\d+", entry.name):
                    found[entry.name] = log_dir
        return found

    def move_replica(self, topic: str, partition: int, target: Path, timeout: float = 30.0) -> None:
        """AlterReplicaLogDirs (kafka-python's admin client), then wait until the replica's
        directory is in ``target``."""
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap)
        try:
            admin.alter_replica_log_dirs({TopicPartitionReplica(topic, partition, self.broker_id): str(target)})
        finally:
            admin.close()
        wait_until(lambda: self.partition_dirs().get(f"{topic}-{partition}") == target, timeout, interval=0.1,
                   what=f"{topic}-{partition} moved to {target}")

    def __repr__(self) -> str:
        return f"BrokerProcess(port={self.port}, dirs={[str(d) for d in self.log_dirs]})"


@atexit.register
def _close_forgotten_brokers() -> None:
    for broker in list(_live_brokers):
        broker.close()
