"""The README's recipes, run as written against a real broker (only the address changes): a
compacted topic that shows compaction within a minute, the transactional consume-transform-produce
loop, and a complete secured broker (TLS, SASL SCRAM and ACLs)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from kafka import KafkaAdminClient

from tests.integration.broker_process import REPO_ROOT, BrokerProcess, free_port
from tests.integration.clients import confluent_consume, confluent_produce, create_topic
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


def test_the_transactional_loop_copies_each_record_once(broker: BrokerProcess, tmp_path: Path) -> None:
    snippet = block_containing("python", "send_offsets_to_transaction(consumer.position")
    assert "127.0.0.1:9092" in snippet
    create_topic(broker.bootstrap, "words", 2)
    create_topic(broker.bootstrap, "words-upper", 1)
    words = [f"word{i}".encode() for i in range(30)]
    confluent_produce(broker.bootstrap, "words", [(w, w) for w in words])

    script = tmp_path / "uppercaser.py"
    script.write_text(snippet.replace("127.0.0.1:9092", broker.bootstrap))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr

    copied = confluent_consume(broker.bootstrap, "words-upper", [0], **{"isolation.level": "read_committed"})
    assert sorted(record.value for record in copied) == sorted(w.upper() for w in words)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        committed = admin.list_group_offsets("uppercaser")["uppercaser"]
    finally:
        admin.close()
    assert sum(meta.offset for meta in committed.values()) == len(words)


def test_the_secured_broker_recipe_runs_as_written(tmp_path: Path) -> None:
    """make-certs.sh, config/secure/server.properties and its two client files, the README's lines
    in order: a SCRAM user made by the administrator, an ACL, the user producing and consuming
    with kcat, and a client without security told what it lacks. Only the ports change."""
    block = block_containing("sh", "config/secure/server.properties > secure-broker.log")
    ports = {"9094": str(free_port()), "9407": str(free_port())}
    shutil.copytree(REPO_ROOT / "config" / "secure", tmp_path / "config" / "secure")
    server = tmp_path / "config" / "secure" / "server.properties"
    server.write_text(server.read_text().replace(":9094", f":{ports['9094']}").replace(
        "metrics.port=9407", f"metrics.port={ports['9407']}"))
    (tmp_path / ".venv").symlink_to(sys.prefix)
    script = "set -e -o pipefail\n" + block.replace("127.0.0.1:9094", f"127.0.0.1:{ports['9094']}")
    process = subprocess.Popen(["bash", "-c", script], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    try:
        out, err = process.communicate(timeout=180)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # the broker, if the script stopped before its kill
    assert process.returncode == 0, out + err
    assert "Completed updating config for user alice." in out and "Created topic orders." in out
    assert "hello\n" in out  # alice read what she wrote
    assert "Topic: orders\tTopicId: " in out
    assert "a TLS listener (SSL, SASL_SSL) needs security.protocol and ssl.truststore.location" in err
    assert "refused: no TLS or SASL settings" in out
    log = (tmp_path / "secure-broker.log").read_text()
    assert "not a TLS client" in log and "broker 1 stopped cleanly" in log, log[-3000:]
    assert " ERROR " not in log
