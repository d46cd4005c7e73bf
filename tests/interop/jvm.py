"""The scenario programs of tests/interop/java run with Apache Kafka's clients, and their output read.

Each program (Produce, Consume, GroupScenario, Transactions, AdminCalls, WordCount) does one
scenario and prints JSON lines; `Scenario` compiles them all once per Kafka version (the
harness caches the classes), and `Scenario.run` runs one and returns its lines. A failure (a
non-zero exit, or a check of the test on the lines) names the program, its command line and its
output.

The runs of one Scenario share one JVM (tools.ToolShell, started at the first run, ended by
`close`): a JVM's start and the loading of Kafka's client classes cost a second or two of CPU
each on this machine, and a module runs dozens of programs. The programs end with Kafka's
Exit.exit rather than System.exit for this: the shell turns it into the run's exit code.
EventLogMember is the exception: one group member in a JVM of its own, for tests that kill it
(tests/system/test_consumer_protocol.py starts it with `kafka("4").java_command`).
"""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tests.interop.kafka import Kafka, KafkaToolError, ToolResult, kafka
from tests.interop.tools import ToolShell

JAVA_DIR = Path(__file__).with_name("java")


# What Kafka 3.9's client runs: the others use 4.x's API (Streams' WordCount, the AdminClient's groupState).
LINE_3_9 = ("Args.java", "Json.java", "Produce.java", "Consume.java")


def sources(line: str) -> list[Path]:
    """The programs that compile against one Kafka line."""
    found = sorted(JAVA_DIR.glob("*.java"))
    return found if line == "4" else [p for p in found if p.name in LINE_3_9]


@dataclasses.dataclass(frozen=True)
class Output:
    """The JSON lines of one run, and what to say when a check on them fails."""

    result: ToolResult
    lines: tuple[dict[str, Any], ...]

    def where(self) -> str:
        return (f"\n  command: {shown(self.result.command)}\n  stdout:\n{self.result.stdout[-20_000:]}"
                f"\n  stderr:\n{self.result.stderr[-20_000:]}")

    def having(self, key: str) -> list[dict[str, Any]]:
        return [line for line in self.lines if key in line]


class Scenario:
    """One Kafka line's compiled scenario programs; `run` needs a `work_dir` (for the log of the
    JVM that runs them), and `close` ends that JVM."""

    def __init__(self, line: str, work_dir: Path | None = None) -> None:
        self.kafka: Kafka = kafka(line)
        self.classes = self.kafka.compile(sources(line))
        self.work_dir = work_dir
        self._shell: ToolShell | None = None

    def _running_shell(self) -> ToolShell:
        if self.work_dir is None:
            raise ValueError("Scenario.run needs a work_dir for the log of its JVM")
        if self._shell is None or self._shell.process.poll() is not None:
            self._shell = ToolShell(self.kafka.line, self.work_dir / f"scenarios-{self.kafka.line}.stderr",
                                    extra_classpath=[self.classes])
        return self._shell

    def close(self) -> None:
        if self._shell is not None:
            self._shell.close()
            self._shell = None

    def tool(self, main_class: str, *args: str, timeout: float = 120.0) -> ToolResult:
        """One of Kafka's own main classes (a tool), in the same JVM; a non-zero exit raises."""
        result = self._running_shell().run(main_class, args, timeout)
        if result.returncode != 0:
            raise KafkaToolError(f"{main_class} (Kafka {self.kafka.version}) exited with {result.returncode}"
                                 + Output(result, ()).where())
        return result

    def run(self, program: str, *args: str, timeout: float = 180.0, check: bool = True) -> Output:
        result = self._running_shell().run(program, args, timeout)
        lines = []
        for text in result.stdout.splitlines():
            if text.startswith("{"):
                try:
                    lines.append(json.loads(text))
                except json.JSONDecodeError as error:
                    raise KafkaToolError(f"{program} printed a line that is not JSON ({error}): {text}") from None
        output = Output(result, tuple(lines))
        if check and result.returncode != 0:
            raise KafkaToolError(f"{program} (Kafka {self.kafka.version}) exited with {result.returncode}"
                                 + output.where())
        return output


def shown(command: Iterable[str]) -> str:
    """A java command line with its classpath cut to its first entry (the scenario classes) and a count."""
    parts = list(command)
    if "-cp" in parts:
        at = parts.index("-cp") + 1
        entries = parts[at].split(":")
        parts[at] = f"{entries[0]}:[{len(entries) - 1} jars of Kafka]"
    return " ".join(parts)


def properties_file(path: Path, settings: dict[str, str]) -> str:
    """Writes Java client properties (one key=value a line, '\\' and newlines escaped as Java reads them)."""
    lines = [f"{key}={value.replace(chr(92), chr(92) * 2)}" for key, value in settings.items()]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def check_exact(acked: Iterable[dict[str, Any]], read: Iterable[dict[str, Any]], where: str) -> None:
    """Every acknowledged record read back exactly once, at its acknowledged partition and offset,
    each partition in offset order; nothing read that was not acknowledged."""
    acked_at = {(a["partition"], a["offset"]): a["key"] for a in acked}
    read_list = [(r["partition"], r["offset"], r["key"]) for r in read]
    seen: dict[tuple[int, int], str] = {}
    duplicates = []
    for partition, offset, key in read_list:
        if (partition, offset) in seen:
            duplicates.append((partition, offset, key))
        seen[(partition, offset)] = key
    assert not duplicates, f"records read twice: {duplicates[:10]}{where}"
    missing = sorted(set(acked_at) - set(seen))
    assert not missing, f"{len(missing)} acknowledged records not read, e.g. {missing[:10]}{where}"
    extra = sorted(set(seen) - set(acked_at))
    assert not extra, f"{len(extra)} records read that were not acknowledged, e.g. {extra[:10]}{where}"
    wrong = [(at, key, acked_at[at]) for at, key in seen.items() if acked_at[at] != key]
    assert not wrong, f"records read with another key than acknowledged: {wrong[:10]}{where}"
    by_partition: dict[int, list[int]] = defaultdict(list)
    for partition, offset, _ in read_list:
        by_partition[partition].append(offset)
    for partition, offsets in by_partition.items():
        assert offsets == sorted(offsets), f"partition {partition} read out of order: {offsets[:50]}{where}"
