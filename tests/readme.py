"""README.md's fenced code blocks, for the tests that run its commands and snippets as written."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


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
