"""Apache Kafka's own jars, for tests that hold minikafka against the real thing.

    from tests.interop.kafka import kafka

    k = kafka("3.9")                      # or "4"; fetches the jars on first use
    k.version                             # "3.9.2"
    result = k.run("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", addr, "--list")
    result.stdout
    classes = k.compile([Path("Golden.java")])
    k.run("Golden", "in.json", extra_classpath=[classes])
    with k.start("kafka.Kafka", "server.properties", log=tmp_path / "kafka.log") as broker:
        ...                               # stopped (and killed if need be) on exit

The pinned versions are the profiles of tests/interop/pom.xml (`kafka-3.9`, `kafka-4`). Maven
fetches them into its local repository (~/.m2), outside the project; the resolved classpath of
each version is kept under ~/.cache/minikafka/kafka (MINIKAFKA_KAFKA_CACHE overrides), so later
runs start no Maven at all. `python -m tests.interop.kafka fetch` (make kafka-jars) fetches both.

A run that fails raises `KafkaToolError` naming the main class, its command line and its output.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType

POM = Path(__file__).with_name("pom.xml")
LINES = ("3.9", "4")
DEFAULT_HEAP = "256m"
DEFAULT_TIMEOUT = 120.0
# slf4j-simple logs at info by default; a tool's chatter at info would bury its own output.
DEFAULT_LOG_LEVEL = "warn"
_MAVEN_TIMEOUT = 1800.0
_POM_NS = {"m": "http://maven.apache.org/POM/4.0.0"}


class KafkaToolError(AssertionError):
    """A Kafka main class (or Maven, or javac) that failed, timed out or could not start."""


@dataclasses.dataclass(frozen=True)
class ToolResult:
    """What one `Kafka.run` gave: its command line, exit code and captured output."""

    command: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


def cache_root() -> Path:
    configured = os.environ.get("MINIKAFKA_KAFKA_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "minikafka" / "kafka"


def pinned_versions() -> dict[str, str]:
    """{line: version} from the pom's profiles, e.g. {"3.9": "3.9.2", "4": "4.3.1"}."""
    root = ElementTree.parse(POM).getroot()
    versions = {}
    for profile in root.iterfind("m:profiles/m:profile", _POM_NS):
        profile_id = profile.findtext("m:id", namespaces=_POM_NS) or ""
        version = profile.findtext("m:properties/m:kafka.version", namespaces=_POM_NS)
        if profile_id.startswith("kafka-") and version:
            versions[profile_id.removeprefix("kafka-")] = version
    return versions


def _failure(what: str, command: Sequence[str], returncode: int | None, stdout: str, stderr: str) -> str:
    status = "timed out" if returncode is None else f"exited with {returncode}"
    return (
        f"{what} {status}\n  command: {shlex.join(command)}\n"
        f"  stdout:\n{_indent(stdout)}\n  stderr:\n{_indent(stderr)}"
    )


def _indent(text: str, limit: int = 20_000) -> str:
    if len(text) > limit:
        text = "[... " + str(len(text) - limit) + " characters cut ...]\n" + text[-limit:]
    return "\n".join("    " + line for line in text.rstrip().splitlines()) or "    (nothing)"


def _capture(command: Sequence[str], what: str, timeout: float, cwd: Path | None = None,
             env: dict[str, str] | None = None, input_text: str | None = None) -> ToolResult:
    try:
        completed = subprocess.run(
            list(command), capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env,
            input=input_text, stdin=None if input_text is not None else subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as timed_out:
        raise KafkaToolError(_failure(
            f"{what} (after {timeout:g}s)", command, None,
            _text(timed_out.stdout), _text(timed_out.stderr))) from None
    except OSError as error:
        raise KafkaToolError(f"{what} could not start: {error}\n  command: {shlex.join(command)}") from None
    return ToolResult(tuple(command), completed.returncode, completed.stdout, completed.stderr)


def _text(output: bytes | str | None) -> str:
    if output is None:
        return ""
    return output.decode(errors="replace") if isinstance(output, bytes) else output


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """One fetch or compile at a time per directory, across pytest-xdist workers."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


class JavaProcess:
    """A long-running Kafka main class (a broker, a Connect worker...), its output in `log`.

    Used as a context manager it is stopped on exit: SIGTERM, then SIGKILL after `stop_timeout`.
    """

    def __init__(self, command: Sequence[str], log: Path, env: dict[str, str] | None,
                 cwd: Path | None, stop_timeout: float) -> None:
        self.command = tuple(command)
        self.log = log
        self.stop_timeout = stop_timeout
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            self.process = subprocess.Popen(
                self.command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                env=env, cwd=cwd,
            )

    @property
    def pid(self) -> int:
        return self.process.pid

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> int:
        """Stops the process (if still running) and returns its exit code."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def failure(self, what: str) -> KafkaToolError:
        """An error naming this process, its command line and its output so far."""
        return KafkaToolError(_failure(what, self.command, self.process.poll(), self.output(), ""))

    def __enter__(self) -> JavaProcess:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()


@dataclasses.dataclass(frozen=True)
class Kafka:
    """One pinned Apache Kafka version: its classpath and ways to run its main classes."""

    line: str
    version: str
    classpath: tuple[Path, ...]

    def jar(self, artifact: str) -> Path:
        """The jar of one artifact on the classpath, e.g. jar("kafka-clients")."""
        name = f"{artifact}-{self.version}.jar"
        for path in self.classpath:
            if path.name == name:
                return path
        raise KeyError(f"{name} is not on Kafka {self.version}'s classpath")

    def java_command(self, main_class: str, *args: str, heap: str = DEFAULT_HEAP,
                     extra_classpath: Sequence[Path] = (), jvm_args: Sequence[str] = (),
                     log_level: str = DEFAULT_LOG_LEVEL) -> list[str]:
        classpath = os.pathsep.join(str(p) for p in (*extra_classpath, *self.classpath))
        return [
            _java("java"), f"-Xmx{heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true", f"-Dorg.slf4j.simpleLogger.defaultLogLevel={log_level}",
            *jvm_args, "-cp", classpath, main_class, *args,
        ]

    def run(self, main_class: str, *args: str, timeout: float = DEFAULT_TIMEOUT, check: bool = True,
            heap: str = DEFAULT_HEAP, extra_classpath: Sequence[Path] = (),
            jvm_args: Sequence[str] = (), log_level: str = DEFAULT_LOG_LEVEL,
            env: dict[str, str] | None = None, cwd: Path | None = None,
            input_text: str | None = None) -> ToolResult:
        """Runs a main class to its end; with `check`, a non-zero exit raises KafkaToolError."""
        command = self.java_command(main_class, *args, heap=heap, extra_classpath=extra_classpath,
                                    jvm_args=jvm_args, log_level=log_level)
        what = f"{main_class} (Kafka {self.version})"
        result = _capture(command, what, timeout, cwd=cwd, env=env, input_text=input_text)
        if check and result.returncode != 0:
            raise KafkaToolError(_failure(what, command, result.returncode, result.stdout, result.stderr))
        return result

    def start(self, main_class: str, *args: str, log: Path, heap: str = DEFAULT_HEAP,
              extra_classpath: Sequence[Path] = (), jvm_args: Sequence[str] = (),
              log_level: str = "info", env: dict[str, str] | None = None, cwd: Path | None = None,
              stop_timeout: float = 30.0) -> JavaProcess:
        """Starts a main class that keeps running; stdout and stderr go to `log`."""
        command = self.java_command(main_class, *args, heap=heap, extra_classpath=extra_classpath,
                                    jvm_args=jvm_args, log_level=log_level)
        return JavaProcess(command, log, env, cwd, stop_timeout)

    def compile(self, sources: Sequence[Path]) -> Path:
        """Compiles Java sources against this classpath; returns the classes directory.

        The output is cached by the sources' content and the Kafka version, so a test run
        compiles once and an edited source compiles anew.
        """
        digest = hashlib.sha256(self.version.encode())
        for source in sorted(sources):
            digest.update(source.name.encode() + b"\0" + source.read_bytes())
        root = cache_root() / self.version / "classes"
        target = root / digest.hexdigest()[:16]
        with _locked(root):
            if (target / ".done").exists():
                return target
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(parents=True)
            command = [
                _java("javac"), "-nowarn", "-encoding", "UTF-8", "-d", str(target),
                "-cp", os.pathsep.join(str(p) for p in self.classpath), *map(str, sources),
            ]
            result = _capture(command, f"javac (Kafka {self.version})", DEFAULT_TIMEOUT)
            if result.returncode != 0:
                raise KafkaToolError(_failure(f"javac (Kafka {self.version})", command,
                                              result.returncode, result.stdout, result.stderr))
            (target / ".done").touch()
        return target


def _java(tool: str) -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / tool).exists():
        return str(Path(java_home) / "bin" / tool)
    found = shutil.which(tool)
    if found is None:
        raise KafkaToolError(f"{tool} is not installed: the Kafka interop tests need a JDK (make system-deps)")
    return found


@functools.cache
def kafka(line: str) -> Kafka:
    """The pinned Kafka of one release line ("3.9" or "4"), fetched on first use."""
    versions = pinned_versions()
    if line not in versions:
        raise ValueError(f"no pinned Kafka for line {line!r}; {POM} pins {sorted(versions)}")
    version = versions[line]
    pom_digest = hashlib.sha256(POM.read_bytes()).hexdigest()[:16]
    directory = cache_root() / version
    classpath_file = directory / f"classpath-{pom_digest}.txt"
    with _locked(directory):
        classpath = _read_classpath(classpath_file)
        if classpath is None:
            fetch_classpath(POM, f"Apache Kafka {version}", classpath_file, "-P", f"kafka-{line}")
            classpath = _read_classpath(classpath_file)
            if classpath is None:
                raise KafkaToolError(f"Maven resolved Kafka {version} but some jars of {classpath_file} are missing")
    return Kafka(line, version, classpath)


def _read_classpath(path: Path) -> tuple[Path, ...] | None:
    """The cached classpath, or None when there is none or a jar of it has gone."""
    if not path.exists():
        return None
    jars = tuple(Path(p) for p in path.read_text().strip().split(os.pathsep) if p)
    if not jars or not all(jar.exists() for jar in jars):
        return None
    return jars


def fetch_classpath(pom: Path, what: str, classpath_file: Path, *maven_args: str) -> None:
    """Have Maven fetch the jars ``pom`` names and write their classpath to ``classpath_file``."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaToolError(f"mvn is not installed: the interop tests fetch {what} with Maven (make system-deps)")
    partial = classpath_file.with_suffix(".partial")
    command = [mvn, "-B", "-q", "-f", str(pom), *maven_args, "dependency:build-classpath",
               f"-Dmdep.outputFile={partial}"]
    print(f"fetching {what} with Maven (once; cached in ~/.m2)", file=sys.stderr)
    result = _capture(command, f"Maven fetching {what}", _MAVEN_TIMEOUT)
    if result.returncode != 0 or not partial.exists():
        raise KafkaToolError(_failure(f"Maven fetching {what}", command, result.returncode,
                                      result.stdout, result.stderr))
    partial.replace(classpath_file)


def main(argv: Sequence[str]) -> int:
    if list(argv) != ["fetch"]:
        print("usage: python -m tests.interop.kafka fetch", file=sys.stderr)
        return 2
    for line in LINES:
        print(f"Apache Kafka {kafka(line).version}: {len(kafka(line).classpath)} jars")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
