"""The broker's CPU per produced record (make bench runs it through bench/run.py).

One broker, one partition, confluent-kafka producing 1 KiB uncompressed records with acks=1:
the CPU time the broker process spent (user + system, every thread, from /proc/<pid>/stat)
while the producer ran, divided by the records. Three runs, each into a fresh topic; the
median is reported with every run. Starts its own broker on temporary dirs and free ports.

Usage: .venv/bin/python bench/bench_produce_cpu.py [--records N] [--repeat R] [--profile FILE]
  --profile: then one more run, of a broker started under py-spy, whose profile (speedscope
  format) goes to FILE; its CPU figure is not counted (the sampling costs the broker some).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.profiles import broker_pid, profile_next_start, stop_profiling, summary  # noqa: E402
from bench.run import produce, record_figure  # noqa: E402
from tests.integration.broker_process import BrokerProcess  # noqa: E402
from tests.integration.clients import create_topic  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> tuple[float, float]:
    """(user, system) CPU time of every thread of ``pid`` so far."""
    with open(f"/proc/{pid}/stat") as stat:
        # The command name, in parentheses, may hold spaces: fields are counted after it.
        fields = stat.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / TICKS, int(fields[12]) / TICKS


def machine_load() -> str:
    with open("/proc/loadavg") as loadavg:
        return " ".join(loadavg.read().split()[:3])


@dataclass(frozen=True)
class Run:
    user_us: float  # broker CPU per record, in user space
    system_us: float  # and in the kernel
    mib_per_s: float

    @property
    def us(self) -> float:
        return self.user_us + self.system_us

    def __str__(self) -> str:
        return f"{self.us:.2f} µs ({self.user_us:.2f} user + {self.system_us:.2f} system) at {self.mib_per_s:.0f} MiB/s"


def one_run(broker: BrokerProcess, topic: str, records: int) -> Run:
    pid = broker_pid(broker)
    create_topic(broker.bootstrap, topic, 1)
    user, system = cpu_seconds(pid)
    result = produce(broker.bootstrap, topic, 1, records, 1024, "1", 300)
    user_after, system_after = cpu_seconds(pid)
    return Run((user_after - user) / records * 1e6, (system_after - system) / records * 1e6, result.mib_per_s)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", type=Path, help="py-spy speedscope output of one more run")
    parser.add_argument("--figures", type=Path, help="add the headline figure to this file (bench/run.py's)")
    args = parser.parse_args()
    runs: list[Run] = []
    loads = [machine_load()]
    with tempfile.TemporaryDirectory(prefix="minikafka-bench-cpu-") as tmp:
        broker = BrokerProcess(Path(tmp), overrides={"auto.create.topics.enable": "false"})
        try:
            broker.start()
            for run in range(args.repeat):
                runs.append(one_run(broker, f"cpu-{run}", args.records))
                loads.append(machine_load())
                print(f"run {run}: {runs[-1]}", file=sys.stderr, flush=True)
        finally:
            broker.close()
        if args.profile is not None:
            profiled = BrokerProcess(Path(tmp) / "profiled", overrides={"auto.create.topics.enable": "false"})
            profile_next_start(profiled, args.profile.resolve(), idle=False)
            try:
                profiled.start()
                print(f"profiled run: {one_run(profiled, 'cpu-profiled', args.records)}", file=sys.stderr, flush=True)
            finally:
                stop_profiling(profiled)
    median = statistics.median(r.us for r in runs)
    record_figure(args.figures, "broker CPU µs per record (1 KiB, acks=1, one partition)", median, "at most 1.5",
                  median <= 1.5)
    print(f"### Broker CPU per produced record (1 KiB, acks=1, one partition, {args.records} records per run)\n")
    print(f"**{median:.2f} µs per record** (median of {len(runs)}; runs: "
          f"{'; '.join(map(str, runs))}; aim: at most 1.5); user + system time of the broker process from "
          f"/proc/<pid>/stat; load average before and after each run: "
          f"{' / '.join(loads)}\n")
    if args.profile is not None:
        print("\n".join(["Where the broker's CPU goes (a run under py-spy, not counted above):\n",
                         *summary(args.profile)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
