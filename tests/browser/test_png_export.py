"""PNG export of the HTML views (the IR side by side) through headless Chromium."""

import asyncio
import struct
from concurrent.futures import ThreadPoolExecutor

import pytest

from mlsys_viz import ir_side_by_side

pytestmark = pytest.mark.browser

STAGES = {"onnx-ir": "module\n  %a = A\n  %b = B\nend", "asm": "a:\n  x\n  x\nb:\n  y"}
RANGES = {"a": {"onnx-ir": [(2, 2)], "asm": [(1, 3)]}, "b": {"onnx-ir": [(3, 3)], "asm": [(4, 5)]}}
NODES = [{"name": "a", "op": "Conv"}, {"name": "b", "op": "Relu"}]


def png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])  # IHDR: width, height


def test_ir_view_saves_as_png_even_inside_a_running_event_loop(chromium, tmp_path):
    plain = ir_side_by_side(STAGES, RANGES, NODES).save_png(tmp_path / "plain.png", width=900)
    assert png_size(plain)[0] == 900 and png_size(plain)[1] >= 300

    # A Jupyter kernel runs an asyncio loop in its main thread, where Playwright's sync API
    # refuses to start: export must still work there.
    async def in_a_kernel():
        view = ir_side_by_side(STAGES, RANGES, NODES, selected="b")
        return view.save_png(tmp_path / "selected.png", width=900)

    # In a thread of its own: where the suite's Playwright session already runs a loop in this
    # thread, asyncio.run would refuse to start a second one.
    with ThreadPoolExecutor(max_workers=1) as pool:
        selected = pool.submit(asyncio.run, in_a_kernel()).result()
    assert png_size(selected)[0] == 900
    # The selected op's lines are highlighted, so the pictures differ.
    assert selected.read_bytes() != plain.read_bytes()
