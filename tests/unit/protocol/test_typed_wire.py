"""The generated typed wire (protocol.typing_gen): committed output current, and mypy using it."""

from __future__ import annotations

import importlib
import textwrap
from pathlib import Path

import mypy.api
import pytest

from protocol import SUPPORTED_APIS, ApiKey
from protocol.typing_gen import PACKAGE_DIR, generate, stale_files

REPO_ROOT = PACKAGE_DIR.parent


def test_committed_files_are_what_the_generator_writes_now() -> None:
    stale = [str(path.relative_to(REPO_ROOT)) for path in stale_files(generate())]
    assert stale == [], f"run `python -m protocol.typing_gen` and commit: {stale}"


def test_api_key_names_every_supported_api_as_kafka_does() -> None:
    assert {int(key) for key in ApiKey} == set(SUPPORTED_APIS)
    assert ApiKey(18).name == "API_VERSIONS"
    assert ApiKey.OFFSET_FOR_LEADER_EPOCH == 23
    assert ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS == 50


def test_every_typed_module_imports_with_its_required_keys() -> None:
    for path in sorted((PACKAGE_DIR / "typed").glob("*.py")):
        importlib.import_module(f"protocol.typed.{path.stem}")
    produce = importlib.import_module("protocol.typed.produce")
    partition = produce.PartitionProduceResponse
    assert partition.__required_keys__ == {"index", "error_code", "base_offset"}
    assert "log_start_offset" in partition.__optional_keys__  # versions 5+, default -1


# Each case is a function body; `None` expects no error, a string a piece of mypy's message.
CASES: dict[str, tuple[str, str | None]] = {
    "well_typed": (
        """
        def handle(request: Request[HeartbeatRequestView]) -> HeartbeatResponse:
            return {"throttle_time_ms": 0, "error_code": len(request.body.member_id)}
        """,
        None,
    ),
    "misspelt_response_field": (
        """
        def handle(request: Request[HeartbeatRequestView]) -> HeartbeatResponse:
            return {"throttle_time_ms": 0, "error_code": 0, "eror_code": 0}
        """,
        '"eror_code"',
    ),
    "missing_required_field": (
        """
        def handle(request: Request[HeartbeatRequestView]) -> HeartbeatResponse:
            return {"throttle_time_ms": 0}
        """,
        '"error_code"',
    ),
    "wrong_type_in_nested_struct": (
        """
        def handle() -> ProduceResponse:
            return {"responses": [{"name": "t", "partition_responses": [
                {"index": 0, "error_code": 0, "base_offset": "zero"}]}]}
        """,
        '"base_offset"',
    ),
    "misspelt_request_attribute": (
        """
        def handle(request: Request[HeartbeatRequestView]) -> str:
            return request.body.memberid
        """,
        '"memberid"',
    ),
    "wrong_type_of_request_attribute": (
        """
        def handle(request: Request[ProduceRequestView]) -> str:
            return request.body.topic_data[0].partition_data[0].index
        """,
        'got "int", expected "str"',
    ),
}


def test_mypy_rejects_misspelt_and_mistyped_fields(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    header = textwrap.dedent(
        """
        from protocol import Request
        from protocol.typed.heartbeat import HeartbeatRequestView, HeartbeatResponse
        from protocol.typed.produce import ProduceRequestView, ProduceResponse
        """
    )
    source = [header]
    first_line: dict[str, int] = {}
    for name, (body, _) in CASES.items():
        first_line[name] = "".join(source).count("\n") + 1
        source.append(f"\n\n# {name}\n" + textwrap.dedent(body).replace("def handle", f"def {name}", 1))
    snippet = tmp_path / "snippet.py"
    snippet.write_text("".join(source))
    # From the repository root mypy finds `protocol` the way `make lint` does.
    monkeypatch.chdir(REPO_ROOT)
    stdout, stderr, _ = mypy.api.run([
        str(snippet), "--config-file", str(REPO_ROOT / "pyproject.toml"),
        "--cache-dir", str(tmp_path / "cache"), "--show-error-codes", "--no-error-summary",
    ])
    assert stderr == ""
    errors: dict[str, list[str]] = {name: [] for name in CASES}
    starts = sorted(first_line.items(), key=lambda item: item[1])
    for line in stdout.splitlines():
        path, lineno, message = line.split(":", 2)
        assert Path(path).name == "snippet.py", line
        case = [name for name, start in starts if start <= int(lineno)][-1]
        errors[case].append(message)
    for name, (_, expected) in CASES.items():
        if expected is None:
            assert errors[name] == [], f"{name}: {errors[name]}"
        else:
            assert any(expected in message for message in errors[name]), f"{name}: {errors[name]}"
