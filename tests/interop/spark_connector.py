"""Spark's own Kafka connector (spark-sql-kafka-0-10), for tests that hold minikafka against it.

    from tests.interop.spark_connector import spark_connector

    connector = spark_connector()         # fetches the jars on first use
    connector.coordinate                  # "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"
    SparkSession.builder.config("spark.jars", connector.spark_jars)

The connector's version is the installed pyspark's; when Maven Central serves no connector of
that version (a pyspark newer than the connector's release there), it is the pom's
`spark.fallback.version`, the newest one served. Maven fetches it (tests/interop/spark-connector/
pom.xml) into its local repository (~/.m2), outside the project; the resolved classpath is kept
under ~/.cache/minikafka/kafka/spark-connector (MINIKAFKA_KAFKA_CACHE overrides the root), so
later runs start no Maven at all. The jars pyspark already ships (Scala, Hadoop, lz4, snappy,
slf4j...) are left off, so Spark loads only its own copies. `python -m tests.interop.spark_connector
fetch` (make kafka-jars) fetches it.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import re
import shutil
import sys
import xml.etree.ElementTree as ElementTree
from collections.abc import Sequence
from pathlib import Path

import pyspark

from tests.interop.kafka import (
    _MAVEN_TIMEOUT,
    _POM_NS,
    KafkaToolError,
    _capture,
    _failure,
    _locked,
    cache_root,
)

POM = Path(__file__).parent / "spark-connector" / "pom.xml"
ARTIFACT = "spark-sql-kafka-0-10"
PYSPARK_JARS = Path(pyspark.__file__).parent / "jars"
# A jar's file name is its artifact, a dash and its version (which starts with a digit).
_JAR_NAME = re.compile(r"^(?P<artifact>.+?)-(?P<version>\d[^/]*)\.jar$")


@dataclasses.dataclass(frozen=True)
class SparkConnector:
    """The connector's jars for the installed pyspark, as `spark.jars` takes them."""

    scala_version: str
    version: str
    jars: tuple[Path, ...]

    @property
    def coordinate(self) -> str:
        return f"org.apache.spark:{ARTIFACT}_{self.scala_version}:{self.version}"

    @property
    def spark_jars(self) -> str:
        return ",".join(str(jar) for jar in self.jars)


def _artifact(jar_name: str) -> str | None:
    match = _JAR_NAME.match(jar_name)
    return match.group("artifact") if match else None


def pyspark_scala_version() -> str:
    """The Scala binary version pyspark was built with, from its scala-library jar: "2.13"."""
    for jar in PYSPARK_JARS.glob("scala-library-*.jar"):
        match = _JAR_NAME.match(jar.name)
        if match:
            return ".".join(match.group("version").split(".")[:2])
    raise KafkaToolError(f"no scala-library jar in {PYSPARK_JARS}: is pyspark installed whole?")


def fallback_version() -> str:
    root = ElementTree.parse(POM).getroot()
    version = root.findtext("m:properties/m:spark.fallback.version", namespaces=_POM_NS)
    if not version:
        raise KafkaToolError(f"{POM} names no spark.fallback.version")
    return version


@functools.cache
def spark_connector() -> SparkConnector:
    """The connector of the installed pyspark (or the pom's fallback), fetched on first use."""
    scala = pyspark_scala_version()
    shipped = {_artifact(jar.name) for jar in PYSPARK_JARS.glob("*.jar")}
    pom_digest = hashlib.sha256(POM.read_bytes()).hexdigest()[:16]
    directory = cache_root() / "spark-connector"
    # Keyed on the installed pyspark, whichever connector version served it: a later run asks
    # Maven nothing, not even again for a version Central does not serve.
    cached_file = directory / f"pyspark-{pyspark.__version__}-scala-{scala}-{pom_digest}.txt"
    with _locked(directory):
        cached = _read_cached(cached_file)
        if cached is None:
            _fetch_first_served(scala, cached_file)
            cached = _read_cached(cached_file)
            if cached is None:
                raise KafkaToolError(f"Maven resolved {ARTIFACT} but jars of {cached_file} are missing")
    version, jars = cached
    return SparkConnector(scala, version, tuple(jar for jar in jars if _artifact(jar.name) not in shipped))


def _read_cached(path: Path) -> tuple[str, tuple[Path, ...]] | None:
    """The cached version and classpath, or None when there is none or a jar of it has gone."""
    if not path.exists():
        return None
    version, _, classpath = path.read_text().strip().partition("\n")
    jars = tuple(Path(p) for p in classpath.split(os.pathsep) if p)
    if not version or not jars or not all(jar.exists() for jar in jars):
        return None
    return version, jars


def _fetch_first_served(scala: str, cached_file: Path) -> None:
    failures = []
    for version in dict.fromkeys([pyspark.__version__, fallback_version()]):
        partial = cached_file.with_suffix(".partial")
        failure = _fetch(scala, version, partial)
        if failure is None:
            cached_file.write_text(version + "\n" + partial.read_text().strip() + "\n")
            partial.unlink()
            return
        failures.append(failure)
    raise KafkaToolError("\n".join(failures))


def _fetch(scala: str, version: str, output: Path) -> str | None:
    """Asks Maven for the connector's classpath, written to `output`; returns why it could not."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaToolError(f"mvn is not installed: the Spark connector tests fetch {ARTIFACT} with Maven "
                             "(make system-deps)")
    output.unlink(missing_ok=True)
    command = [mvn, "-B", "-q", "-f", str(POM), "dependency:build-classpath", f"-Dspark.version={version}",
               f"-Dscala.binary.version={scala}", f"-Dmdep.outputFile={output}"]
    what = f"Maven fetching {ARTIFACT}_{scala} {version}"
    print(f"{what} (once; cached in ~/.m2)", file=sys.stderr)
    result = _capture(command, what, _MAVEN_TIMEOUT)
    if result.returncode != 0 or not output.exists():
        return _failure(what, command, result.returncode, result.stdout, result.stderr)
    return None


def main(argv: Sequence[str]) -> int:
    if list(argv) != ["fetch"]:
        print("usage: python -m tests.interop.spark_connector fetch", file=sys.stderr)
        return 2
    connector = spark_connector()
    print(f"Spark's Kafka connector {connector.coordinate} (pyspark {pyspark.__version__}): "
          f"{len(connector.jars)} jars")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
