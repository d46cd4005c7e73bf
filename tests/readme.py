"""README.md's fenced code blocks, for the tests that run its commands and snippets as written."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def code_blocks(language: str) -> list[str]:
    """The bodies of the README's ```language blocks, in order."""
    return re.findall(rf"^```{re.escape(language)}\n(.*?)^```$", README.read_text(), flags=re.S | re.M)


def block_containing(language: str, text: str) -> str:
    """The one ```language block that contains `text`."""
    found = [block for block in code_blocks(language) if text in block]
    assert len(found) == 1, f"README.md has {len(found)} {language} blocks containing {text!r}, expected one"
    return found[0]


def prose() -> str:
    """The README's text with runs of whitespace (line breaks included) as one space."""
    return " ".join(README.read_text().split())


def copy_checkout(tmp_path: Path) -> Path:
    """A copy of the checkout to run make in: Makefile, README, config/ and the sources, with a
    `.venv` that is the virtualenv running the tests (its install stamp is newer than the copied
    pyproject.toml, so make installs nothing). Skips when that virtualenv was not made by make."""
    copy = tmp_path / "checkout"
    copy.mkdir()
    for name in ("Makefile", "README.md"):
        shutil.copy2(ROOT / name, copy / name)
    for name in ("config", "minikafka", "protocol"):
        shutil.copytree(ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "setup.py"):  # what the install stamps depend on: older than them
        shutil.copyfile(ROOT / name, copy / name)
        os.utime(copy / name, (0, 0))
    venv = Path(sys.prefix)
    if not (venv / "bin" / ".installed").exists():
        pytest.skip(f"{venv} was not made by the Makefile (no bin/.installed)")
    (copy / ".venv").symlink_to(venv)
    return copy
