"""The IR side-by-side view in a real browser: in JupyterLab, running notebook 10 and choosing an
ONNX op highlights the lines it produced in the Kernel IR, LLVM IR and assembly panes; the same
view saved as HTML works on its own from a file:// URL."""

import re

import numpy as np
import pytest
from onnx import helper, numpy_helper

import compilerkit as ck
from compilerkit.views import ir_view_data
from mlsys_viz import ir_side_by_side

pytestmark = pytest.mark.browser

# Per pane of the first view on the page: the stage, how many lines are highlighted, whether the
# first highlighted line is scrolled into the pane's view, and the count shown in its title.
PANES = """() => {
  const root = document.querySelector('.ck-ir-view');
  return Array.from(root.querySelectorAll('.ck-pane')).map(p => {
    const code = p.querySelector('.ck-code');
    const hl = p.querySelectorAll('.ck-line.ck-hl');
    let visible = false;
    if (hl.length) {
      const a = hl[0].getBoundingClientRect(), b = code.getBoundingClientRect();
      visible = a.top >= b.top - 1 && a.top < b.bottom;
    }
    return {stage: p.dataset.stage, lit: hl.length, visible: visible,
            count: p.querySelector('.ck-count').textContent,
            text: Array.from(hl).map(l => l.textContent).join('\\n')};
  });
}"""


def panes(page):
    return {p["stage"]: p for p in page.evaluate(PANES)}


def test_choosing_an_op_highlights_its_lines_in_every_pane(lab, page, tmp_path):
    lab.open("10_onnx_to_native.ipynb")
    lab.run_all(timeout_s=300)
    assert lab.errors() == []
    view = page.locator(".jp-OutputArea .ck-ir-view")
    view.wait_for(timeout=30_000)
    view.scroll_into_view_if_needed()
    # The notebook preselects the first MaxPool: the script ran and lit all four panes.
    page.wait_for_function("() => document.querySelectorAll('.ck-ir-view .ck-hl').length > 0",
                           timeout=30_000)
    first = panes(page)
    assert list(first) == ["onnx-ir", "kernel-ir", "llvm-ir", "asm"]
    assert "onnx.MaxPool" in first["onnx-ir"]["text"]
    view.screenshot(path=str(tmp_path / "ir_view_maxpool.png"))

    # Now the person picks the second convolution in the select.
    select = view.locator("select")
    select.select_option(label="lenet_1/conv2_1/BiasAdd  (Conv)")
    page.wait_for_function(
        "() => document.querySelector('.ck-ir-view').dataset.selected"
        " === 'lenet_1/conv2_1/BiasAdd'", timeout=10_000)
    after = panes(page)
    assert after["onnx-ir"]["lit"] == 1 and "onnx.Conv" in after["onnx-ir"]["text"]
    assert after["kernel-ir"]["lit"] > 20
    assert 'onnx_node = "lenet_1/conv2_1/BiasAdd"' in after["kernel-ir"]["text"]
    assert '"krnl.matmul"' in after["kernel-ir"]["text"]
    assert "define internal" in after["llvm-ir"]["text"]
    # Node functions are numbered in graph order after the ONNX passes (fuse-conv folds the
    # activations into the convolutions), so only the name's tail is fixed.
    assert re.search(r"@main_graph_\d+_lenet_1_conv2_1_BiasAdd\(", after["llvm-ir"]["text"])
    assert re.search(r"main_graph_\d+_lenet_1_conv2_1_BiasAdd:", after["asm"]["text"])
    assert "onnx.MaxPool" not in after["onnx-ir"]["text"]  # the old selection went away
    for stage, pane in after.items():
        assert pane["visible"], f"{stage}: the highlighted lines were not scrolled into view"
        assert pane["count"] == (f"{pane['lit']} lines" if pane["lit"] > 1 else "1 line")
    view.screenshot(path=str(tmp_path / "ir_view_conv2.png"))

    # Clicking a line of another op in the ONNX IR pane selects that op.
    view.locator(".ck-pane[data-stage='onnx-ir'] .ck-line", has_text="onnx.Softmax").click()
    page.wait_for_function(
        "() => document.querySelector('.ck-ir-view').dataset.selected"
        " === 'lenet_1/logits_1/Softmax'", timeout=10_000)
    chosen = select.evaluate("s => s.options[s.selectedIndex].textContent")
    assert chosen == "lenet_1/logits_1/Softmax  (Softmax)"  # the select follows the click
    soft = panes(page)
    assert re.search(r"main_graph_\d+_lenet_1_logits_1_Softmax", soft["asm"]["text"])

    # The graphs (the ONNX model, the ONNX IR before and after the passes, node counts in the
    # titles) and the loop-nest pictures of the hand schedule rendered too (boxes are layout
    # shapes).
    # Only the notebook on screen: notebooks of earlier tests may be restored in hidden tabs.
    plots = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea .js-plotly-plot")
    assert plots.count() == 5
    hand = plots.nth(4)
    assert "j_o" in hand.inner_text() and "tiles of j" in hand.inner_text()
    hand.screenshot(path=str(tmp_path / "loopnest_hand.png"))
    titles = [plots.nth(k).locator(".gtitle").text_content() for k in range(3)]
    assert "24 ONNX nodes" in titles[0]
    # Folded: the six ops of the shape subgraph, the two Relus fuse-conv moves into the Convs
    # and the two fuse-elementwise moves into the dense layers' bias Adds.
    assert "10 highlighted fold away" in titles[1] and "26 ops" in titles[2]
    plots.nth(1).scroll_into_view_if_needed()
    plots.nth(1).screenshot(path=str(tmp_path / "onnx_ir_folding.png"))


def small_model():
    # Relu before the Conv: after it, fuse-conv would fold it into the convolution.
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Conv", ["r", "w"], ["y"], name="conv")]
    w = numpy_helper.from_array(np.ones((2, 1, 3, 3), np.float32), "w")
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", 1, [1, 1, 6, 6])],
        [helper.make_empty_tensor_value_info("y")], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_exported_view_works_from_a_file(page, tmp_path):
    cm = ck.compile(small_model(), opt_level=3)
    path = ir_side_by_side(**ir_view_data(cm)).save(tmp_path / "ir.html")
    page.goto(path.as_uri())
    page.wait_for_selector(".ck-ir-view select")
    assert page.locator(".ck-hl").count() == 0  # nothing chosen yet
    page.locator("select").select_option(label="relu  (Relu)")
    page.wait_for_function("() => document.querySelectorAll('.ck-hl').length > 0")
    lit = panes(page)
    assert [p["lit"] > 0 for p in lit.values()] == [True] * 4
    assert "arith.maximumf" in lit["kernel-ir"]["text"]
    assert re.search(r"main_graph_\d+_relu", lit["llvm-ir"]["text"])
    assert "conv" not in lit["onnx-ir"]["text"].replace("relu", "")
    page.screenshot(path=str(tmp_path / "ir_view_file.png"))
