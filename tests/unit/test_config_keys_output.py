"""What an operator reads about configuration: `minikafka config-keys` and the log line of a
dynamic change say "unlimited" for a no-limit value, never Long.MAX_VALUE or Double.MAX_VALUE,
and each description says "changeable at run time" once."""

from __future__ import annotations

import logging
import re

import pytest

from minikafka.cli import main, parse_log_levels
from minikafka.config.broker import DEFINITIONS, BrokerConfig, shown_value


def test_config_keys_prints_unlimited_and_run_time_once(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config-keys"]) == 0
    listing = capsys.readouterr().out
    assert "9223372036854775807" not in listing and "e+308" not in listing and "2147483647" not in listing
    for key in ("log.cleaner.io.max.bytes.per.second", "replica.alter.log.dirs.io.max.bytes.per.second",
                "leader.replication.throttled.rate", "log.cleaner.max.compaction.lag.ms", "group.max.size"):
        assert f"\n{key}=unlimited\n" in listing
    descriptions = re.findall(r"^    (.*)$", listing, flags=re.M)
    assert len(descriptions) == len(DEFINITIONS)
    assert all(line.count("changeable at run time") <= 1 for line in descriptions)
    assert sum("changeable at run time" in line for line in descriptions) == sum(
        d.dynamic for d in DEFINITIONS.values())


def test_shown_value_keeps_ordinary_values() -> None:
    assert shown_value(2**63 - 1) == "unlimited" and shown_value(1.7976931348623157e308) == "unlimited"
    assert shown_value(1048576) == "1048576" and shown_value(True) == "true" and shown_value(None) == "(none)"
    assert shown_value(["a", "b"]) == "a,b"


def test_a_throttle_change_is_logged_in_words(caplog: pytest.LogCaptureFixture) -> None:
    config = BrokerConfig.load(None, [])
    with caplog.at_level(logging.INFO, logger="minikafka.config.broker"):
        config.apply_dynamic({"leader.replication.throttled.rate": "1000"}, {})
        config.apply_dynamic({}, {})
    changes = [r.getMessage() for r in caplog.records if "dynamic config" in r.getMessage()]
    assert changes == ["dynamic config leader.replication.throttled.rate changed from unlimited to 1000",
                       "dynamic config leader.replication.throttled.rate changed from 1000 to unlimited"]


def test_log_levels_name_a_level_per_logger() -> None:
    assert parse_log_levels("info") == ("INFO", {})
    assert parse_log_levels("WARNING, minikafka.group=debug,minikafka.txn=ERROR") == (
        "WARNING", {"minikafka.group": "DEBUG", "minikafka.txn": "ERROR"})
    for bad, says in (("LOUD", "'LOUD' (the first item) is not a level"),
                      ("INFO,minikafka.group", "'minikafka.group' is not LOGGER=LEVEL"),
                      ("INFO,minikafka.group=chatty", "'chatty' for minikafka.group is not a level")):
        with pytest.raises(ValueError, match=re.escape(says)):
            parse_log_levels(bad)


def test_a_bad_log_level_is_refused_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["ping", "--log-level", "INFO,minikafka.group=chatty"])
    assert exited.value.code == 2
    assert "--log-level: 'chatty' for minikafka.group is not a level" in capsys.readouterr().err
