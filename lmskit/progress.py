"""Progress bars for long work (batch searches, autotune, sweeps, calibration): tqdm.auto.

Quiet when LMSKIT_PROGRESS=0, under pytest (PYTEST_CURRENT_TEST is set, and notebook kernels the
suite starts inherit it), or with tqdm's own TQDM_DISABLE=1.
"""

from __future__ import annotations

import os


def enabled() -> bool:
    # TQDM_DISABLE is checked here because tqdm.auto's notebook bar (what a kernel gets) does not
    # read it, unlike the terminal one: a headless run would store a frozen "0%" bar per loop.
    return (os.environ.get("LMSKIT_PROGRESS", "1") != "0"
            and "PYTEST_CURRENT_TEST" not in os.environ
            and os.environ.get("TQDM_DISABLE", "").lower() not in ("1", "true", "yes"))


def bar(iterable=None, total=None, desc: str = "", leave: bool = False, show: bool = True):
    """A tqdm.auto bar (disabled when progress is off or show is False); use as an iterable or
    call .update()."""
    from tqdm.auto import tqdm

    return tqdm(iterable, total=total, desc=desc, leave=leave, disable=not (show and enabled()))
