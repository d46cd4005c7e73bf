"""The README's recipes, run as written against a real broker (only the address changes): a
compacted topic that shows compaction within a minute."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.broker_process import REPO_ROOT, BrokerProcess
from tests.readme import block_containing

pytestmark = pytest.mark.integration


def run_block(block: str, broker: BrokerProcess, cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """A README sh block under bash -e in ``cwd`` (whose .venv is the test's virtualenv)."""
    if not (cwd / ".venv").exists():
        (cwd / ".venv").symlink_to(sys.prefix)
    script = "set -e -o pipefail\n" + block.replace("127.0.0.1:9092", broker.bootstrap)
    return subprocess.run(["bash", "-c", script], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})


def test_the_compaction_recipe_shows_compaction_within_a_minute(broker: BrokerProcess, tmp_path: Path) -> None:
    block = block_containing("sh", "--topic prices")
    run = run_block(block, broker, tmp_path, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines()[-3:] == ["pear:2 at offset 3", "apple:3 at offset 4", "plum:1 at offset 5"], \
        run.stdout
    cleaned = [line for line in broker.stderr_text().splitlines() if "cleaned prices-0" in line]
    assert cleaned and "rewrote " in cleaned[0] and "(5 records) into " in cleaned[0], cleaned
    assert "(2 records: " in cleaned[0] and "% of the bytes kept)" in cleaned[0] and "0.0 MiB" not in cleaned[0]
