"""MetadataCache.wait_until: a handler waits a bounded time for the cache to show what it needs,
woken by each update rather than polling."""

from __future__ import annotations

import asyncio
import uuid

from minikafka.metadata.cache import MetadataCache, PartitionMetadata, TopicMetadata


def _led(cache: MetadataCache) -> bool:
    topic = cache.topic("t")
    return topic is not None and all(p.available for p in topic.partitions.values())


async def test_a_wait_ends_at_the_update_that_satisfies_it() -> None:
    cache = MetadataCache()
    topic_id = uuid.uuid4()
    waiting = asyncio.create_task(cache.wait_until(lambda: _led(cache), timeout_s=30))
    await asyncio.sleep(0)
    cache.put_topic(TopicMetadata("t", topic_id, {0: PartitionMetadata(-1, 0, (1,), (1,))}))
    await asyncio.sleep(0)
    assert not waiting.done(), "a leaderless partition does not satisfy it"
    cache.update_partitions("t", topic_id, {0: PartitionMetadata(1, 0, (1,), (1,))})
    assert await asyncio.wait_for(waiting, 1) is True


async def test_a_wait_that_is_never_satisfied_ends_at_its_timeout() -> None:
    cache = MetadataCache()
    assert await cache.wait_until(lambda: _led(cache), timeout_s=0.05) is False
