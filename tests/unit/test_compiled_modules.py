"""The modules setup.py compiles with mypyc: compiled where a C compiler is found, never older
than their source, and giving what their Python source gives on the same bytes (the source is
what runs where nothing was compiled, and what the other tests read when it is)."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
import random
import shutil
import sys
import sysconfig
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from protocol.record_codec import encode_record
from protocol.records import BatchHeader, CorruptRecordError

ROOT = Path(__file__).resolve().parents[2]
COMPILED = {"protocol.record_scan": "protocol/record_scan.py",
            "minikafka.storage.offset_map": "minikafka/storage/offset_map.py"}


def _installed(name: str) -> ModuleType:
    return importlib.import_module(name)


def _is_compiled(module: ModuleType) -> bool:
    return str(module.__file__).endswith(sysconfig.get_config_var("EXT_SUFFIX"))


def _from_source(name: str) -> ModuleType:
    """The module run from its .py file, whatever was compiled beside it."""
    package, _, leaf = name.rpartition(".")
    spec = importlib.util.spec_from_file_location(f"{package}._source_of_{leaf}", ROOT / COMPILED[name])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    module.__package__ = package
    sys.modules[spec.name] = module  # where dataclasses look up the module's names
    spec.loader.exec_module(module)
    return module


def _compiler() -> str | None:
    command = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(command)


@pytest.mark.parametrize("name", sorted(COMPILED))
def test_a_module_is_compiled_where_a_c_compiler_is_found(name: str) -> None:
    if _compiler() is None:
        pytest.skip("no C compiler here: the modules run as Python")
    assert _is_compiled(_installed(name)), (
        f"{name} runs as Python though a C compiler is here: the install did not compile it (make unit "
        "installs again; pip's output says why a build failed)")


@pytest.mark.parametrize("name", sorted(COMPILED))
def test_a_compiled_module_is_not_older_than_its_source(name: str) -> None:
    module = _installed(name)
    if not _is_compiled(module):
        pytest.skip(f"{name} runs from its source")
    assert os.path.getmtime(str(module.__file__)) >= os.path.getmtime(ROOT / COMPILED[name]), (
        f"{COMPILED[name]} changed after it was compiled: install again (make unit, or pip install -e .)")


def _header(section_records: int) -> BatchHeader:
    return BatchHeader(base_offset=1_000, batch_length=0, partition_leader_epoch=0, magic=2, crc=0, attributes=0,
                       last_offset_delta=section_records - 1, base_timestamp=0, max_timestamp=0, producer_id=-1,
                       producer_epoch=-1, base_sequence=-1, records_count=section_records)


def _random_section(rng: random.Random) -> tuple[bytes, int]:
    """Records with keys of every length class (none, short, a digest's, long), values or not,
    headers, and offset and timestamp deltas whose varints take one to five bytes."""
    count = rng.randint(1, 40)
    records = []
    for i in range(count):
        key_length = rng.choice([-1, 0, 1, 15, 16, 17, 70, 300])
        key = None if key_length < 0 else rng.randbytes(key_length)
        value = None if rng.random() < 0.2 else rng.randbytes(rng.choice([0, 5, 200]))
        headers = [("h", rng.randbytes(3))] if rng.random() < 0.2 else []
        offset_delta = i * rng.choice([1, 1, 70, 20_000, 1 << 24])
        records.append(encode_record(offset_delta, rng.choice([0, 5, -3, 1 << 20, 1 << 40]), key, value, headers))
    return b"".join(records), count


def _outcome(call: Any, *args: Any) -> Any:
    try:
        result = call(*args)
    except CorruptRecordError as exc:
        return ("raised", str(exc))
    if isinstance(result, list) and result and dataclasses.is_dataclass(result[0]):
        return [dataclasses.astuple(item) for item in result]
    return result


def test_record_scan_compiled_and_source_read_the_same_records_and_refuse_the_same_bytes() -> None:
    installed, source = _installed("protocol.record_scan"), _from_source("protocol.record_scan")
    rng = random.Random(34)
    for _ in range(300):
        section, count = _random_section(rng)
        damaged = [section, section[:-1], section + b"\x00", section[:rng.randrange(len(section))]]
        flipped = bytearray(section)
        flipped[rng.randrange(len(section))] ^= 1 << rng.randrange(8)
        damaged.append(bytes(flipped))
        for data in damaged:
            for records_count in (count, count + 1):
                header = _header(records_count)
                for function in ("record_keys", "record_spans"):
                    assert _outcome(getattr(installed, function), data, header) \
                        == _outcome(getattr(source, function), data, header), (function, data.hex())


def test_offset_map_compiled_and_source_map_the_same_offsets() -> None:
    installed, source = _installed("minikafka.storage.offset_map"), _from_source("minikafka.storage.offset_map")
    rng = random.Random(34)
    for _ in range(50):
        capacity = rng.choice([1, 5, 50])
        maps = [installed.OffsetMap(capacity), source.OffsetMap(capacity)]
        keys = [rng.randbytes(rng.choice([1, 15, 16, 40])) for _ in range(60)]
        base = 0
        for _ in range(10):
            batch = [(delta, rng.choice(keys) if rng.random() < 0.9 else None) for delta in range(rng.randint(1, 20))]
            start, end = rng.randint(0, 50), rng.randint(50, 250)
            assert maps[0].put_batch(base, batch, start, end) == maps[1].put_batch(base, batch, start, end)
            base += len(batch)
        for offset_map in maps:
            offset_map.mapped()
        assert maps[0].utilization == maps[1].utilization
        for key in keys:
            assert maps[0].get(maps[0].digest(key)) == maps[1].get(maps[1].digest(key))
        for first in range(0, base, 3):
            assert maps[0].holds_latest(first, first + 4) == maps[1].holds_latest(first, first + 4)
