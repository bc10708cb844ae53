"""Numbers as people read them, shared by the kits' plain-data views and the pictures.

Imports nothing, so a kit can use it at import time without pulling in a plotting library.
"""


def human_bytes(count: float) -> str:
    """Bytes as B / KiB / MiB / GiB / TiB, with one decimal above bytes."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(count) < 1024 or unit == "TiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")
