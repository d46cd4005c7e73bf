"""A ZooKeeper older than 3.6 (3.5, the last line without multiRead), run from its jars, for the
tests that hold minikafka against one: Kafka 3.9 still runs on such an ensemble.

    from tests.interop.old_zookeeper import OldZooKeeperProcess
    server = OldZooKeeperProcess(tmp_path / "zk").start()   # fetches the jars on first use

Maven fetches the server (tests/interop/zookeeper-3.5/pom.xml) into its local repository (~/.m2);
the resolved classpath is kept under ~/.cache/minikafka/kafka/ (MINIKAFKA_KAFKA_CACHE overrides
the root), so later runs start no Maven. `python -m tests.interop.old_zookeeper fetch` (make
kafka-jars) fetches it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
import xml.etree.ElementTree as ElementTree
from collections.abc import Sequence
from pathlib import Path

from tests.interop.kafka import (
    _POM_NS,
    KafkaToolError,
    _java,
    _locked,
    _read_classpath,
    cache_root,
    fetch_classpath,
)
from tests.system.zookeeper import ZooKeeperProcess

POM = Path(__file__).parent / "zookeeper-3.5" / "pom.xml"


def version() -> str:
    found = ElementTree.parse(POM).getroot().findtext("m:properties/m:zookeeper.version", namespaces=_POM_NS)
    if not found:
        raise KafkaToolError(f"{POM} names no zookeeper.version")
    return found


@functools.cache
def classpath() -> tuple[Path, ...]:
    """The server's jars, fetched on first use."""
    pinned = version()
    digest = hashlib.sha256(POM.read_bytes()).hexdigest()[:16]
    directory = cache_root() / f"zookeeper-{pinned}"
    classpath_file = directory / f"classpath-{digest}.txt"
    with _locked(directory):
        jars = _read_classpath(classpath_file)
        if jars is None:
            fetch_classpath(POM, f"ZooKeeper {pinned}", classpath_file)
            jars = _read_classpath(classpath_file)
            if jars is None:
                raise KafkaToolError(f"Maven resolved ZooKeeper {pinned} but jars of {classpath_file} are missing")
    return jars


class OldZooKeeperProcess(ZooKeeperProcess):
    """ZooKeeperProcess with the pinned old server in place of Debian's package."""

    def command(self) -> list[str]:
        return [_java("java"), "-Xmx128m", "-Dzookeeper.jmx.log4j.disable=true",
                "-cp", os.pathsep.join(str(jar) for jar in classpath()),
                "org.apache.zookeeper.server.ZooKeeperServerMain", str(self.config)]


def main(argv: Sequence[str]) -> int:
    if list(argv) != ["fetch"]:
        print("usage: python -m tests.interop.old_zookeeper fetch", file=sys.stderr)
        return 2
    print(f"ZooKeeper {version()}: {len(classpath())} jars")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
