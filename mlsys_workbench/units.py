"""Numbers as people read them, shared by the kits' plain-data views and the pictures.

Kept apart from `viz` so that importing it pulls in no plotting library.
"""


def human_bytes(count: float) -> str:
    """Bytes as B / KiB / MiB / GiB / TiB, with one decimal above bytes."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(count) < 1024 or unit == "TiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")
