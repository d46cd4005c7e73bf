"""Apache Kafka's command-line tools by the names users type (kafka-topics, kafka-configs...).

    tools = KafkaTools("127.0.0.1:9092")          # close() when done
    out = tools.admin("kafka-topics", "--describe", "--topic", "t")          # Kafka 4.x
    out = tools.admin("kafka-topics", "--list", line="3.9")                  # Kafka 3.9
    out = tools.run("kafka-producer-perf-test", "--topic", "t", ...)         # no --bootstrap-server added

`admin` puts `--bootstrap-server <bootstrap>` first, as every admin tool takes it. A tool that
exits non-zero raises KafkaToolError naming the tool, its main class, its command line and its
output; `expect_failure=True` returns the failed run instead, for checks of refusals.

The commands of one KafkaTools run in one JVM per Kafka line (ToolShell.java): each is the
tool's own main class with its arguments, its output and exit code captured, but the JVM starts
once. A JVM start costs a few seconds of CPU on this machine, and a module runs dozens of tools.
Long-running tools (`start`) get a JVM of their own.
"""

from __future__ import annotations

import dataclasses
import json
import re
import select
import shlex
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from tests.interop.kafka import JavaProcess, KafkaToolError, ToolResult, kafka

SHELL_SOURCE = Path(__file__).with_name("ToolShell.java")
RESULT_MARK = b"@@TOOL-RESULT@@ "

# The script of Kafka's bin/ and the main class it runs, per release line where they differ.
MAIN_CLASSES: dict[str, dict[str, str]] = {
    "kafka-topics": {"*": "org.apache.kafka.tools.TopicCommand"},
    "kafka-configs": {"*": "kafka.admin.ConfigCommand"},
    "kafka-log-dirs": {"*": "org.apache.kafka.tools.LogDirsCommand"},
    "kafka-reassign-partitions": {"*": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"},
    "kafka-leader-election": {"*": "org.apache.kafka.tools.LeaderElectionCommand"},
    "kafka-delete-records": {"*": "org.apache.kafka.tools.DeleteRecordsCommand"},
    "kafka-consumer-groups": {"*": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"},
    "kafka-acls": {"3.9": "kafka.admin.AclCommand", "4": "org.apache.kafka.tools.AclCommand"},
    "kafka-transactions": {"*": "org.apache.kafka.tools.TransactionsCommand"},
    "kafka-get-offsets": {"*": "org.apache.kafka.tools.GetOffsetShell"},
    "kafka-producer-perf-test": {"*": "org.apache.kafka.tools.ProducerPerformance"},
    "kafka-consumer-perf-test": {"*": "org.apache.kafka.tools.ConsumerPerformance"},
    "kafka-verifiable-producer": {"*": "org.apache.kafka.tools.VerifiableProducer"},
    "kafka-verifiable-consumer": {"*": "org.apache.kafka.tools.VerifiableConsumer"},
}


def main_class(tool: str, line: str) -> str:
    classes = MAIN_CLASSES[tool]
    return classes.get(line) or classes["*"]


class ToolShell:
    """One JVM running Kafka main classes on request (ToolShell.java); not thread-safe."""

    def __init__(self, line: str, log: Path, extra_classpath: Sequence[Path] = ()) -> None:
        k = kafka(line)
        self.version = k.version
        self.log = log
        classes = k.compile([SHELL_SOURCE])
        self.command = k.java_command("ToolShell", extra_classpath=[classes, *extra_classpath], heap="512m")
        with open(log, "ab") as stderr:
            self.process = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=stderr)

    def run(self, main: str, args: Sequence[str], timeout: float) -> ToolResult:
        if any("\t" in a or "\n" in a for a in (main, *args)):
            raise ValueError(f"a tab or newline in a tool argument: {args}")
        command = ("java", "-cp", f"<Kafka {self.version}>", main, *args)
        assert self.process.stdin is not None and self.process.stdout is not None
        try:
            self.process.stdin.write(("\t".join((main, *args)) + "\n").encode())
            self.process.stdin.flush()
            deadline = time.monotonic() + timeout
            header = _read_line(self.process.stdout, deadline)
            if not header.startswith(RESULT_MARK):
                raise KafkaToolError(f"the tool shell answered {header[:200]!r}")
            code, out_size, err_size = (int(n) for n in header[len(RESULT_MARK):].split())
            stdout = _read_exactly(self.process.stdout, out_size, deadline)
            stderr = _read_exactly(self.process.stdout, err_size, deadline)
        except (OSError, TimeoutError, KafkaToolError) as error:
            self.close()
            shell_log = self.log.read_text(errors="replace")[-5000:] if self.log.exists() else ""
            raise KafkaToolError(f"{main} (Kafka {self.version}) did not finish: {error!r}\n"
                                 f"  command: {shlex.join(command)}\n  JVM stderr:\n{shell_log}") from None
        return ToolResult(command, code, stdout.decode(errors="replace"), stderr.decode(errors="replace"))

    def close(self) -> None:
        if self.process.poll() is None:
            if self.process.stdin is not None:
                self.process.stdin.close()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _read_line(stream: IO[bytes], deadline: float) -> bytes:
    line = b""
    while not line.endswith(b"\n"):
        line += _read_exactly(stream, 1, deadline)
    return line


def _read_exactly(stream: IO[bytes], count: int, deadline: float) -> bytes:
    data = b""
    while len(data) < count:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([stream], [], [], remaining)[0]:
            raise TimeoutError("no answer in time")
        chunk = stream.read1(count - len(data))  # type: ignore[attr-defined]
        if not chunk:
            raise OSError("the tool shell exited")
        data += chunk
    return data


class KafkaTools:
    """Kafka's tools pointed at one cluster (or broker), given by its bootstrap servers. Its
    tool shells write their JVM's own stderr under `work_dir`."""

    def __init__(self, bootstrap: str, work_dir: Path) -> None:
        self.bootstrap = bootstrap
        self.work_dir = work_dir
        self.shells: dict[str, ToolShell] = {}

    def close(self) -> None:
        for shell in self.shells.values():
            shell.close()
        self.shells.clear()

    def run(self, tool: str, *args: str, line: str = "4", expect_failure: bool = False,
            timeout: float = 120.0) -> ToolResult:
        """Runs the tool to its end; a failure (or, with expect_failure, a success) raises."""
        shell = self.shells.get(line)
        if shell is None or shell.process.poll() is not None:
            shell = self.shells[line] = ToolShell(line, self.work_dir / f"tool-shell-{line}.stderr")
        main = main_class(tool, line)
        result = dataclasses.replace(shell.run(main, args, timeout), command=(tool, *args))
        failed = result.returncode != 0
        if failed != expect_failure:
            what = f"exited with {result.returncode}" if failed else "succeeded where it should have failed"
            raise fail_with(f"{tool} ({main}, Kafka {shell.version})", result, what)
        return result

    def admin(self, tool: str, *args: str, line: str = "4", expect_failure: bool = False,
              timeout: float = 120.0) -> str:
        """Runs an admin tool with --bootstrap-server; its stdout (or, failed, stdout and stderr)."""
        result = self.run(tool, "--bootstrap-server", self.bootstrap, *args, line=line,
                          expect_failure=expect_failure, timeout=timeout)
        return result.stdout + result.stderr if expect_failure else result.stdout

    def start(self, tool: str, *args: str, log: Path, line: str = "4") -> JavaProcess:
        """Starts a long-running tool (a verifiable producer or consumer); output to `log`."""
        return kafka(line).start(main_class(tool, line), *args, log=log, log_level="warn")


def fail_with(tool: str, result: ToolResult | str, what: str) -> KafkaToolError:
    """An error naming a tool whose output was not what the test expected."""
    if isinstance(result, ToolResult):
        output = (f"  command: {shlex.join(result.command)}\n  exit code: {result.returncode}\n"
                  f"  stdout:\n{result.stdout}\n  stderr:\n{result.stderr}")
    else:
        output = f"  output:\n{result}"
    return KafkaToolError(f"{tool}: {what}\n{output}")


def json_line(output: str) -> Any:
    """The first line of a tool's output that is a JSON object (kafka-log-dirs, --generate...)."""
    for line in output.splitlines():
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError(f"no JSON object in:\n{output}")


def describe_partitions(output: str) -> dict[tuple[str, int], dict[str, str]]:
    """kafka-topics --describe: {(topic, partition): {"Leader": "1", "Replicas": "1,2", "Isr": ...}}."""
    found: dict[tuple[str, int], dict[str, str]] = {}
    for line in output.splitlines():
        fields = dict(re.findall(r"(\w+): ?(\S*)", line.strip()))
        if "Partition" in fields and "Leader" in fields:
            found[(fields["Topic"], int(fields["Partition"]))] = fields
    return found


def event_lines(text: str) -> list[dict[str, Any]]:
    """The JSON events a verifiable producer or consumer printed, one per line."""
    events = []
    for line in text.splitlines():
        if line.startswith("{") and line.endswith("}"):
            events.append(json.loads(line))
    return events


def log_dirs_of(output: str) -> dict[tuple[int, str], list[tuple[str, bool]]]:
    """kafka-log-dirs --describe: {(broker, "topic-partition"): [(log dir, is future)]}; a log dir
    with an error is listed under partition "" with its error as the dir."""
    found: dict[tuple[int, str], list[tuple[str, bool]]] = {}
    for broker in json_line(output)["brokers"]:
        for log_dir in broker["logDirs"]:
            if log_dir["error"] is not None:
                found.setdefault((broker["broker"], ""), []).append((log_dir["error"], False))
            for partition in log_dir["partitions"]:
                found.setdefault((broker["broker"], partition["partition"]), []).append(
                    (log_dir["logDir"], partition["isFuture"]))
    return found


def lines_with(output: str, *words: str) -> list[str]:
    return [line for line in output.splitlines() if all(w in line for w in words)]


def reassignment_json(partitions: Sequence[tuple[str, int, Sequence[int], Sequence[str]]]) -> str:
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r), "log_dirs": list(d)} for t, p, r, d in partitions]})
