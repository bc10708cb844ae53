"""The IR side-by-side data and HTML, and the loop-nest picture, built from plain data."""

import json
import re

import pytest

from mlsys_viz import ir_panes, ir_side_by_side, loopnest_figure

STAGES = {"onnx-ir": "module\n  %a = A\n  %b = B\nend",
          "asm": "\n".join(["a:"] + ["  x"] * 3 + ["b:"] + ["  y"] * 2 + ["data:"]
                           + [".long 0"] * 1000)}
RANGES = {"a": {"onnx-ir": [(2, 2)], "asm": [(1, 4)]},
          "b": {"onnx-ir": [(3, 3)], "asm": [(5, 7)]}}
NODES = [{"name": "a", "op": "Conv"}, {"name": "b", "op": "Relu"}]


def test_panes_fold_long_unclaimed_runs_and_renumber():
    d = ir_panes(STAGES, RANGES, NODES, fold_over=50)
    assert d["stages"] == ["onnx-ir", "asm"] and d["titles"]["asm"] == "Assembly"
    asm = d["panes"]["asm"]
    # 7 claimed lines, then 1,001 unclaimed ones folded to 8 + marker + 8.
    assert len(asm["lines"]) == 7 + 8 + 1 + 8
    assert asm["numbers"][15] is None and "985 lines" in asm["lines"][15]
    assert asm["numbers"][-1] == 1008
    assert d["ranges"]["b"]["asm"] == [(5, 7)]
    assert d["nodes"][0]["label"] == "a  (Conv)"
    # Runs up to fold_over lines are kept.
    assert len(ir_panes(STAGES, RANGES, NODES, fold_over=2000)["panes"]["asm"]["lines"]) == 1008


def test_folding_renumbers_ranges_after_a_fold():
    text = "\n".join(["pad"] * 100 + ["mine"])
    d = ir_panes({"asm": text}, {"n": {"asm": [(101, 101)]}}, fold_over=20)
    row = d["ranges"]["n"]["asm"][0][0]
    assert d["panes"]["asm"]["lines"][row - 1] == "mine" and row == 18


def test_long_lines_are_cut():
    d = ir_panes({"llvm-ir": "x" * 1000}, {"n": {"llvm-ir": [(1, 1)]}}, max_chars=50)
    assert d["panes"]["llvm-ir"]["lines"][0].endswith("(950 more characters)")


def test_bad_ranges_are_refused():
    with pytest.raises(ValueError, match="outside"):
        ir_panes({"asm": "a\nb"}, {"n": {"asm": [(2, 3)]}})
    with pytest.raises(ValueError, match="without ranges"):
        ir_panes({"asm": "a"}, {}, [{"name": "ghost"}])


def test_html_holds_every_line_escaped_and_the_ranges():
    view = ir_side_by_side(STAGES | {"onnx-ir": "<tag> & %a\nA\nB"}, RANGES, NODES,
                           selected="b")
    html = view.html
    assert html.count('class="ck-pane"') == 2
    assert "&lt;tag&gt; &amp; %a" in html and "<tag>" not in html
    assert html.count('<option value="') == 3  # the prompt and two ops
    blob = re.search(r'<script type="application/json" class="ck-data">(.*?)</script>', html,
                     re.S).group(1)
    data = json.loads(blob)
    assert data["nodes"] == ["a", "b"] and data["selected"] == 1
    assert data["ranges"]["a"]["asm"] == [[1, 4]]
    assert view._repr_html_() == html
    with pytest.raises(ValueError, match="no node"):
        ir_side_by_side(STAGES, RANGES, NODES, selected="zzz")


def test_save_writes_a_standalone_page(tmp_path):
    path = ir_side_by_side(STAGES, RANGES, NODES).save(tmp_path / "ir.html")
    text = path.read_text()
    assert text.startswith("<!DOCTYPE html>") and "http" not in text


PLAIN = [{"name": "i", "lo": 0, "hi": 6, "step": 1, "tile_of": None, "kind": "full",
          "order": 0},
         {"name": "j", "lo": 0, "hi": 784, "step": 1, "tile_of": None, "kind": "full",
          "order": 1},
         {"name": "k", "lo": 0, "hi": 25, "step": 1, "tile_of": None, "kind": "full",
          "order": 2}]
HAND = [{"name": "j_o", "lo": 0, "hi": 784, "step": 64, "tile_of": "j", "kind": "outer",
         "order": 0},
        {"name": "i", "lo": 0, "hi": 6, "step": 1, "tile_of": None, "kind": "full", "order": 1},
        {"name": "k", "lo": 0, "hi": 25, "step": 1, "tile_of": None, "kind": "full",
         "order": 2, "unroll": True},
        {"name": "j_i", "lo": 0, "hi": 64, "step": 1, "tile_of": "j", "kind": "inner",
         "order": 3}]


def test_loopnest_boxes_nest_in_order():
    fig = loopnest_figure(PLAIN, body="krnl.matmul")
    boxes = [s for s in fig.layout.shapes]
    assert [b.name for b in boxes] == ["i", "j", "k", "body"]
    for outer, inner in zip(boxes, boxes[1:], strict=False):  # each box inside the one before
        assert outer.x0 < inner.x0 < inner.x1 < outer.x1
        assert outer.y0 < inner.y0 < inner.y1 < outer.y1
    texts = [a.text for a in fig.layout.annotations]
    assert texts[0] == "<b>for i in 0 .. 6</b>" and texts[-1] == "krnl.matmul"
    assert len(fig.data) == 1 and "784 iterations" in fig.data[0].hovertext[1]


def test_schedule_changes_the_picture():
    before, after = loopnest_figure(PLAIN), loopnest_figure(list(reversed(HAND)))
    assert before.layout.meta["order"] == ["i", "j", "k"]
    assert after.layout.meta["order"] == ["j_o", "i", "k", "j_i"]  # sorted by "order"
    shapes = {s.name: s for s in after.layout.shapes}
    texts = [a.text for a in after.layout.annotations]
    assert "step 64" in texts[0] and "tiles of j" in texts[0]
    assert "j_i in j_o .. min(j_o + 64" in texts[3]
    # A tile's two loops share a hue (outer dark, inner light), other loops differ.
    assert shapes["j_o"].line.color == "#4e79a7" and shapes["j_i"].line.color == "#a0cbe8"
    assert shapes["i"].line.color not in ("#4e79a7", "#a0cbe8")
    assert shapes["k"].line.dash == "dash" and shapes["i"].line.dash == "solid"
    assert "[unrolled]" in texts[2]
    assert "64 iterations" in after.data[0].hovertext[3]
    assert "13 iterations" in after.data[0].hovertext[0]  # ceil(784 / 64)
