import json
import os
import uuid

from minikafka.metadata.store import METADATA_FILE, LocalMetadataStore, PartitionState, TopicState
from minikafka.storage.failure_channel import LogDirFailureChannel


def _topic(name: str) -> TopicState:
    return TopicState(name, uuid.uuid4(), {0: PartitionState(1, 0, [1], [1])}, {"retention.ms": "1000"})


def _dirs(tmp_path, n=2):
    dirs = [str(tmp_path / f"d{i}") for i in range(n)]
    for d in dirs:
        os.makedirs(d)
    return dirs


def test_every_dir_gets_a_copy_and_reload_finds_it(tmp_path):
    dirs = _dirs(tmp_path)
    store = LocalMetadataStore(dirs, LogDirFailureChannel())
    store.load()
    topic = _topic("orders")
    store.put_topic(topic)
    block = store.allocate_producer_id_block()
    for d in dirs:
        assert json.loads(open(os.path.join(d, METADATA_FILE)).read())["topics"][0]["name"] == "orders"
    again = LocalMetadataStore(dirs, LogDirFailureChannel())
    again.load()
    assert again.cluster_id == store.cluster_id
    assert again.topics()["orders"] == topic
    assert again.allocate_producer_id_block().start == block.stop


def test_survives_the_loss_of_any_one_dir(tmp_path):
    dirs = _dirs(tmp_path, 3)
    store = LocalMetadataStore(dirs, LogDirFailureChannel())
    store.load()
    store.put_topic(_topic("a"))
    for lost in dirs:
        os.remove(os.path.join(lost, METADATA_FILE))
        reloaded = LocalMetadataStore(dirs, LogDirFailureChannel())
        reloaded.load()  # rewrites the copy of the lost dir
        assert set(reloaded.topics()) == {"a"}
        assert os.path.exists(os.path.join(lost, METADATA_FILE))


def test_newest_copy_wins_and_a_torn_copy_is_ignored(tmp_path):
    dirs = _dirs(tmp_path)
    store = LocalMetadataStore(dirs, LogDirFailureChannel())
    store.load()
    store.put_topic(_topic("old"))
    stale = open(os.path.join(dirs[0], METADATA_FILE)).read()
    store.put_topic(_topic("new"))
    open(os.path.join(dirs[0], METADATA_FILE), "w").write(stale)
    reloaded = LocalMetadataStore(dirs, LogDirFailureChannel())
    reloaded.load()
    assert set(reloaded.topics()) == {"old", "new"}
    open(os.path.join(dirs[1], METADATA_FILE), "w").write('{"version": 99, "topi')
    torn = LocalMetadataStore(dirs, LogDirFailureChannel())
    torn.load()
    assert set(torn.topics()) == {"old", "new"}  # the whole copy in the other dir


def test_a_failed_dir_is_reported_and_skipped(tmp_path):
    dirs = _dirs(tmp_path)
    channel = LogDirFailureChannel()
    store = LocalMetadataStore(dirs, channel)
    store.load()
    os.rename(dirs[1], dirs[1] + ".gone")
    open(dirs[1], "w").close()  # the dir is now a regular file
    store.put_topic(_topic("t"))
    assert channel.offline_dirs == {dirs[1]}
    assert json.loads(open(os.path.join(dirs[0], METADATA_FILE)).read())["topics"][0]["name"] == "t"


def test_topics_by_id_follow_puts_deletes_and_reloads(tmp_path):
    dirs = _dirs(tmp_path)
    store = LocalMetadataStore(dirs, LogDirFailureChannel())
    store.load()
    kept, dropped = _topic("kept"), _topic("dropped")
    store.put_topic(kept)
    store.put_topic(dropped)
    store.delete_topic("dropped")
    assert store.topic_by_id(kept.topic_id) == kept
    assert store.topic_by_id(dropped.topic_id) is None
    reloaded = LocalMetadataStore(dirs, LogDirFailureChannel())
    reloaded.load()
    assert reloaded.topic_by_id(kept.topic_id) == kept
    assert reloaded.topic_by_id(dropped.topic_id) is None
