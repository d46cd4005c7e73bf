"""TLS against plaintext on one broker: produce and consume throughput, and the broker's CPU.

One broker with a PLAINTEXT and an SSL listener (certificates from config/secure/make-certs.sh,
an EC P-256 key, TLS 1.3). For each transport, interleaved, R times: N uncompressed 1 KiB records
produced (acks=1, confluent-kafka) into a fresh 4-partition topic, then read back; each run's
throughput, and the broker's CPU seconds per MiB from /proc. Over TLS a fetch cannot use
sendfile: the broker reads record data from the segment into one reused buffer and OpenSSL
encrypts it from there onto the socket (net/streams.py), so the difference in the consume rows
is that copy and the encryption. As librdkafka's consumer decrypts on one thread, a last row shows
what the broker itself serves: a bare client (Python's ssl) reading the same four 8 MiB partition
fetches over and over, one 32 MiB Fetch response at a time.

Usage: .venv/bin/python bench/bench_tls.py [--records N] [--repeat R]
"""

from __future__ import annotations

import argparse
import os
import socket
import ssl
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.run import MiB, Result, consume, produce  # noqa: E402
from protocol import encode_request  # noqa: E402
from tests.integration.broker_process import HOST, BrokerProcess, free_port  # noqa: E402
from tests.integration.clients import create_topic  # noqa: E402
from tests.integration.security import Certs, confluent_tls  # noqa: E402

PARTITIONS = 4
FETCH, FETCH_VERSION = 1, 11
PARTITION_FETCH_BYTES = 8 * MiB


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def raw_fetch_rate(address: tuple[str, int], topic: str, tls: ssl.SSLContext | None, fetches: int) -> float:
    """MiB/s of Fetch responses read by a bare client: the same fetch of every partition from
    offset 0, ``fetches`` times, each response read into one buffer and dropped."""
    sock = socket.create_connection(address)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if tls is not None:
        sock = tls.wrap_socket(sock, server_hostname=address[0])
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": PARTITIONS * PARTITION_FETCH_BYTES,
            "isolation_level": 0, "topics": [{"topic": topic, "partitions": [
                {"partition": p, "fetch_offset": 0, "partition_max_bytes": PARTITION_FETCH_BYTES}
                for p in range(PARTITIONS)]}]}
    buffer = memoryview(bytearray(PARTITIONS * PARTITION_FETCH_BYTES + MiB))
    received = 0
    try:
        started = time.perf_counter()
        for correlation_id in range(1, fetches + 1):
            sock.sendall(encode_request(FETCH, FETCH_VERSION, correlation_id, "bench-tls", body))
            size = struct.unpack(">i", _read(sock, buffer, 4))[0]
            _read(sock, buffer, size)
            received += size
        return received / MiB / (time.perf_counter() - started)
    finally:
        sock.close()


def _read(sock: socket.socket, buffer: memoryview, count: int) -> bytes:
    got = 0
    while got < count:
        n = sock.recv_into(buffer[got:count], count - got)
        if not n:
            raise EOFError("the broker closed the connection")
        got += n
    return bytes(buffer[:min(count, 4)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=180.0)
    args = parser.parse_args(argv)
    rows: dict[tuple[str, str], list[tuple[Result, float]]] = {}
    raw_fetches: dict[str, list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="minikafka-bench-tls-") as tmp:
        certs = Certs(Path(tmp) / "certs").make("broker")
        tls_port = free_port()
        broker = BrokerProcess(Path(tmp) / "broker", overrides={
            "auto.create.topics.enable": "false",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL",
            "ssl.keystore.location": certs.keystore("broker"),
        })
        broker.overrides["listeners"] += f",SSL://{HOST}:{tls_port}"
        transports = {"plaintext": (broker.bootstrap, {}), "TLS": (f"{HOST}:{tls_port}", confluent_tls(certs))}
        try:
            broker.start()
            assert broker.process is not None
            pid = broker.process.pid
            for run in range(args.repeat):
                for name, (bootstrap, client) in transports.items():
                    topic = f"bench-{name.lower()}-{run}"
                    create_topic(broker.bootstrap, topic, PARTITIONS)
                    for operation in ("produce", "consume"):
                        before = cpu_seconds(pid)
                        if operation == "produce":
                            result = produce(bootstrap, topic, PARTITIONS, args.records, args.record_bytes, "1",
                                             args.timeout, client)
                        else:
                            result = consume(bootstrap, topic, PARTITIONS, args.records, "1", args.timeout, client)
                        cpu_per_mib = (cpu_seconds(pid) - before) / (result.payload_bytes / MiB)
                        rows.setdefault((operation, name), []).append((result, cpu_per_mib))
                        print(f"{operation} {name} run {run}: {result.mib_per_s:.1f} MiB/s", file=sys.stderr,
                              flush=True)
                    before = cpu_seconds(pid)
                    host, port = bootstrap.rsplit(":", 1)
                    context = ssl.create_default_context(cafile=certs.ca) if client else None
                    rate = raw_fetch_rate((host, int(port)), topic, context, 20)
                    raw_fetches.setdefault(name, []).append(
                        (rate, (cpu_seconds(pid) - before) / (20 * PARTITIONS * PARTITION_FETCH_BYTES / MiB)))
        except BaseException:
            print(broker.stderr_text(5000), file=sys.stderr)
            raise
        finally:
            broker.close()
    print("## TLS against plaintext on one broker (bench/bench_tls.py)\n")
    print(f"{args.records} records of {args.record_bytes} B per run, {PARTITIONS} partitions, acks=1, "
          f"confluent-kafka, {args.repeat} runs per row interleaved; TLS 1.3 with an EC P-256 certificate.\n")
    print("| operation | transport | MiB/s (median) | MiB/s min-max | broker CPU ms per MiB (median) | "
          "throughput vs plaintext |")
    print("|---|---|---:|---:|---:|---:|")
    for operation in ("produce", "consume"):
        plain = statistics.median(r.mib_per_s for r, _ in rows[(operation, "plaintext")])
        for name in ("plaintext", "TLS"):
            runs = rows[(operation, name)]
            rates = sorted(r.mib_per_s for r, _ in runs)
            median = statistics.median(rates)
            cpu = statistics.median(c for _, c in runs) * 1000
            print(f"| {operation} | {name} | {median:.1f} | {rates[0]:.1f}-{rates[-1]:.1f} | {cpu:.1f} | "
                  f"{median / plain:.2f} |")
    plain = statistics.median(rate for rate, _ in raw_fetches["plaintext"])
    for name in ("plaintext", "TLS"):
        rates = sorted(rate for rate, _ in raw_fetches[name])
        cpu = statistics.median(c for _, c in raw_fetches[name]) * 1000
        print(f"| fetch, bare client | {name} | {statistics.median(rates):.0f} | {rates[0]:.0f}-{rates[-1]:.0f} | "
              f"{cpu:.1f} | {statistics.median(rates) / plain:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
