"""Quantities as an operator reads them (logs, tools)."""

from __future__ import annotations


def format_bytes(n: float) -> str:
    """``512 B``, ``1.5 KiB``, ``20.0 MiB``, ... (binary units, one decimal)."""
    if abs(n) < 1024:
        return f"{n:.0f} B"
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024
        if abs(n) < 1024:
            return f"{n:.1f} {unit}"
    return f"{n / 1024:.1f} TiB"
