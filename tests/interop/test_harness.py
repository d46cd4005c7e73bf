"""The harness itself: both pinned Kafka versions run their tools, and a failing run says what failed."""

from __future__ import annotations

import pytest

from tests.interop.kafka import LINES, KafkaToolError, kafka, pinned_versions


@pytest.mark.parametrize("line", LINES)
def test_a_kafka_tool_runs_from_the_fetched_jars(line: str) -> None:
    k = kafka(line)
    assert k.version == pinned_versions()[line] and k.version.startswith(line + ".")
    assert k.jar("kafka-clients").exists()
    result = k.run("org.apache.kafka.tools.TopicCommand", "--version", timeout=60)
    assert result.stdout.strip().splitlines()[-1] == k.version


def test_a_failing_tool_is_named_with_its_command_line_and_output() -> None:
    k = kafka("4")
    with pytest.raises(KafkaToolError) as failed:
        k.run("org.apache.kafka.tools.TopicCommand", "--no-such-option", timeout=60)
    message = str(failed.value)
    assert "org.apache.kafka.tools.TopicCommand (Kafka " + k.version + ") exited with 1" in message
    assert "--no-such-option" in message.split("command:")[1].splitlines()[0]
    assert "no-such-option" in message.split("stderr:")[1] + message.split("stdout:")[1]
