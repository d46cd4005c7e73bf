"""Waiting on Structured Streaming queries, for the streaming tests of both Kafka sources."""

from __future__ import annotations

from pyspark.sql.streaming import StreamingQuery

QUERY_TIMEOUT_S = 120


def finish(query: StreamingQuery) -> None:
    """Wait for an availableNow query to end by itself; re-raise what stopped it."""
    try:
        finished = query.awaitTermination(QUERY_TIMEOUT_S)
    finally:
        if query.isActive:
            query.stop()
    assert finished, f"query still running after {QUERY_TIMEOUT_S}s"
    if query.exception() is not None:
        raise AssertionError(f"query failed: {query.exception()}")


def data_batches(query: StreamingQuery) -> list[int]:
    """The input row counts of the query's micro-batches that read anything."""
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
