"""Request metrics of the server, exported to Prometheus."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

from protocol import SUPPORTED_APIS

REQUESTS = Counter("minikafka_requests", "Requests handled, per API", ["api"])
LATENCY = Histogram(
    "minikafka_request_latency_seconds",
    "Time from a request's arrival to its response being ready, per API",
    ["api"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)
REQUEST_VERSIONS = Counter(
    "minikafka_request_versions", "Requests per API and version, to see what clients negotiate",
    ["api", "version"],
)


def api_name(api_key: int) -> str:
    spec = SUPPORTED_APIS.get(api_key)
    return spec.name if spec is not None else str(api_key)
