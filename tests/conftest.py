"""Session-wide test settings: only what every kind of test needs (kept light on purpose)."""

from __future__ import annotations

from importlib import metadata

import pytest


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Name the client library versions, since integration results depend on them."""
    found = []
    for distribution in ("kafka-python", "confluent-kafka", "aiokafka"):
        try:
            found.append(f"{distribution} {metadata.version(distribution)}")
        except metadata.PackageNotFoundError:
            continue
    return ["clients: " + ", ".join(found)] if found else []
