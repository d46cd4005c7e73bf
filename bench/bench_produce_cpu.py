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
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.profiles import broker_pid, profile_next_start, stop_profiling, summary  # noqa: E402
from bench.run import produce  # noqa: E402
from tests.integration.broker_process import BrokerProcess  # noqa: E402
from tests.integration.clients import create_topic  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of every thread of ``pid`` so far."""
    with open(f"/proc/{pid}/stat") as stat:
        # The command name, in parentheses, may hold spaces: fields are counted after it.
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def machine_load() -> str:
    with open("/proc/loadavg") as loadavg:
        return " ".join(loadavg.read().split()[:3])


def one_run(broker: BrokerProcess, topic: str, records: int) -> tuple[float, float]:
    """(broker CPU µs per record, MiB/s) of one produce run."""
    pid = broker_pid(broker)
    create_topic(broker.bootstrap, topic, 1)
    before = cpu_seconds(pid)
    result = produce(broker.bootstrap, topic, 1, records, 1024, "1", 300)
    used = cpu_seconds(pid) - before
    return used / records * 1e6, result.mib_per_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", type=Path, help="py-spy speedscope output of the last run")
    args = parser.parse_args()
    runs: list[tuple[float, float]] = []
    loads = [machine_load()]
    with tempfile.TemporaryDirectory(prefix="minikafka-bench-cpu-") as tmp:
        broker = BrokerProcess(Path(tmp), overrides={"auto.create.topics.enable": "false"})
        try:
            broker.start()
            for run in range(args.repeat):
                runs.append(one_run(broker, f"cpu-{run}", args.records))
                loads.append(machine_load())
                print(f"run {run}: {runs[-1][0]:.2f} µs/record, {runs[-1][1]:.0f} MiB/s", file=sys.stderr, flush=True)
        finally:
            broker.close()
        if args.profile is not None:
            profiled = BrokerProcess(Path(tmp) / "profiled", overrides={"auto.create.topics.enable": "false"})
            profile_next_start(profiled, args.profile.resolve())
            try:
                profiled.start()
                us, mib = one_run(profiled, "cpu-profiled", args.records)
                print(f"profiled run: {us:.2f} µs/record, {mib:.0f} MiB/s", file=sys.stderr, flush=True)
            finally:
                stop_profiling(profiled)
    median = statistics.median(us for us, _ in runs)
    print(f"### Broker CPU per produced record (1 KiB, acks=1, one partition, {args.records} records per run)\n")
    print(f"**{median:.2f} µs per record** (median of {len(runs)}; runs: "
          f"{', '.join(f'{us:.2f} µs at {mib:.0f} MiB/s' for us, mib in runs)}; aim: at most 1.5); user + system "
          f"time of the broker process from /proc/<pid>/stat; load average before and after each run: "
          f"{' / '.join(loads)}\n")
    if args.profile is not None:
        print("\n".join(["Where the broker's CPU goes (a run under py-spy, not counted above):\n",
                         *summary(args.profile)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
