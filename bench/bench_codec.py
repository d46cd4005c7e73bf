"""The protocol codec's cost per call, in microseconds.

Usage: .venv/bin/python bench/bench_codec.py [--seconds S]

Times the calls the broker makes per request on its hot paths: parse a Produce v9
request (8 partitions x 16 KiB records), encode its response, encode a Fetch v12
response whose 8 partitions' records are FileRegions, parse a Metadata v12 request and
encode a Metadata v12 response (8 partitions). Each line is the best of a few repeats.
"""

from __future__ import annotations

import argparse
import sys
import timeit
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from protocol import (  # noqa: E402
    FrameDecoder,
    encode_request,
    encode_response,
    message_schema,
    parse_request,
)

PRODUCE, FETCH, METADATA = 0, 1, 3
PARTITIONS = 8


class Region:
    """Stands for record data the server would send with sendfile."""

    def __init__(self, size: int) -> None:
        self.size = size


def payload(framed: bytes) -> bytes:
    (frame,) = FrameDecoder(1 << 26).feed(framed)
    return frame


def produce_request() -> bytes:
    records = bytes(range(256)) * 64  # 16 KiB
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30000,
        "topic_data": [
            {
                "name": "bench-topic",
                "partition_data": [{"index": i, "records": records} for i in range(PARTITIONS)],
            }
        ],
    }
    return payload(encode_request(PRODUCE, 9, 1, "bench-client", body))


def produce_response() -> dict[str, Any]:
    return {
        "responses": [
            {
                "name": "bench-topic",
                "partition_responses": [
                    {"index": i, "error_code": 0, "base_offset": 1000 * i, "log_start_offset": 0}
                    for i in range(PARTITIONS)
                ],
            }
        ],
        "throttle_time_ms": 0,
    }


def fetch_response() -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [
            {
                "topic": "bench-topic",
                "partitions": [
                    {
                        "partition_index": i,
                        "error_code": 0,
                        "high_watermark": 5000,
                        "last_stable_offset": 5000,
                        "log_start_offset": 0,
                        "aborted_transactions": None,
                        "preferred_read_replica": -1,
                        "records": Region(1 << 20),
                    }
                    for i in range(PARTITIONS)
                ],
            }
        ],
    }


def metadata_request() -> bytes:
    body = {
        "topics": [{"topic_id": uuid.UUID(int=0), "name": "bench-topic"}],
        "allow_auto_topic_creation": True,
        "include_topic_authorized_operations": False,
    }
    return payload(encode_request(METADATA, 12, 1, "bench-client", body))


def metadata_response() -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": b, "host": "127.0.0.1", "port": 9092 + b, "rack": None} for b in range(3)],
        "cluster_id": "minikafka-bench",
        "controller_id": 0,
        "topics": [
            {
                "error_code": 0,
                "name": "bench-topic",
                "topic_id": uuid.UUID(int=42),
                "is_internal": False,
                "partitions": [
                    {
                        "error_code": 0,
                        "partition_index": i,
                        "leader_id": i % 3,
                        "leader_epoch": 3,
                        "replica_nodes": [0, 1, 2],
                        "isr_nodes": [0, 1, 2],
                        "offline_replicas": [],
                    }
                    for i in range(PARTITIONS)
                ],
                "topic_authorized_operations": -2147483648,
            }
        ],
    }


def per_call_us(call: Callable[[], Any], seconds: float) -> float:
    timer = timeit.Timer(call)
    number, elapsed = timer.autorange()
    repeats = max(3, min(20, int(seconds / max(elapsed, 1e-3))))
    return min(timer.repeat(repeat=repeats, number=number)) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="rough time budget per case")
    args = parser.parse_args()

    produce = produce_request()
    metadata = metadata_request()
    produce_body, fetch_body, metadata_body = produce_response(), fetch_response(), metadata_response()
    for key, version, request in ((PRODUCE, 9, True), (PRODUCE, 9, False), (FETCH, 12, False),
                                  (METADATA, 12, True), (METADATA, 12, False)):
        message_schema(key, version, request)  # compile outside the timings

    cases: list[tuple[str, Callable[[], Any]]] = [
        ("parse Produce v9 request (8 x 16 KiB)", lambda: parse_request(produce)),
        ("encode Produce v9 response (8 partitions)", lambda: encode_response(PRODUCE, 9, 1, produce_body)),
        ("encode Fetch v12 response (8 FileRegions)", lambda: encode_response(FETCH, 12, 1, fetch_body)),
        ("parse Metadata v12 request", lambda: parse_request(metadata)),
        ("encode Metadata v12 response (8 partitions)",
         lambda: encode_response(METADATA, 12, 1, metadata_body)),
    ]
    print(f"{'case':<46} {'us/call':>9}")
    for name, call in cases:
        print(f"{name:<46} {per_call_us(call, args.seconds):>9.1f}")


if __name__ == "__main__":
    main()
