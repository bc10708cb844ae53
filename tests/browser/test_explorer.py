"""Notebook 01 in JupyterLab: the name-scope explorer opens a cluster that is clicked.

JupyterLab in Chromium runs 01_training_graphs at its smoke size; the explorer's FigureWidget
(plotly inside an ipywidgets box) must render, and a real mouse click on a cluster square must
reach the kernel's click handler, which redraws the figure with that scope opened: the clicked
cluster is gone, its members are drawn, and the scope list above the figure shows it opened.
Screenshots go to tmp_path.
"""

import pytest

pytestmark = pytest.mark.browser

# The explorer's FigureWidget (its title says "by name scope") and the node ids it draws.
FIND = """() => {
  const plots = Array.from(document.querySelectorAll('.jp-OutputArea .js-plotly-plot'));
  const gd = plots.find(g => g.closest('.widget-vbox') && g.layout && g.layout.title
                             && String(g.layout.title.text || '').includes('by name scope'));
  if (!gd) return null;
  const ids = gd.data.filter(t => t.customdata).flatMap(t => Array.from(t.customdata));
  return {index: plots.indexOf(gd), ids: ids, title: gd.layout.title.text};
}"""

# Scroll the marker of the largest forward-pass cluster (a square, not a reads cluster; its
# size is in its hover text) into view and return its id and its centre on screen, for a real
# mouse click.
TARGET = """(index) => {
  const gd = document.querySelectorAll('.jp-OutputArea .js-plotly-plot')[index];
  let best = null;
  for (const g of gd.querySelectorAll('.scatterlayer .trace')) {
    const trace = g.__data__ && g.__data__[0] && g.__data__[0].trace;
    if (!trace || trace.name !== 'forward' || !trace.customdata) continue;
    for (const point of g.querySelectorAll('path.point')) {
      const i = point.__data__.i, id = trace.customdata[i];
      const symbol = Array.isArray(trace.marker.symbol) ? trace.marker.symbol[i] : '';
      if (symbol !== 'square' || id.endsWith(' (reads)')) continue;
      const size = Number((String(trace.hovertext[i]).match(/(\\d+) ops/) || [0, 0])[1]);
      if (!best || size > best.size) best = {point: point, id: id, size: size};
    }
  }
  if (!best) return null;
  best.point.scrollIntoView({block: 'center'});
  const r = best.point.getBoundingClientRect();
  return {id: best.id, size: best.size, x: r.left + r.width / 2, y: r.top + r.height / 2};
}"""


def test_01_click_opens_a_scope(lab, page, tmp_path):
    lab.open("01_training_graphs.ipynb")
    click_and_check(lab, page, tmp_path)


def click_and_check(lab, page, tmp_path):
    lab.run_all(timeout_s=300)
    assert lab.ran_a_cell(), "run-all never ran a cell"
    assert lab.errors() == []
    page.wait_for_function(f"() => ({FIND})() !== null", timeout=60_000)
    before = page.evaluate(FIND)
    target = page.evaluate(TARGET, before["index"])
    assert target is not None, before["ids"]
    page.wait_for_timeout(500)  # let the scroll settle
    target = page.evaluate(TARGET, before["index"])
    page.screenshot(path=str(tmp_path / "01_explorer_before_click.png"))
    page.mouse.move(target["x"], target["y"])
    page.wait_for_timeout(300)  # plotly picks the point under the mouse on hover
    page.mouse.click(target["x"], target["y"])
    opened = target["id"]
    page.wait_for_timeout(2000)
    page.screenshot(path=str(tmp_path / "01_explorer_just_clicked.png"))
    page.wait_for_function(
        f"() => {{ const f = ({FIND})(); return f && !f.ids.includes({opened!r}); }}",
        timeout=60_000)
    after = page.evaluate(FIND)
    members = [i for i in after["ids"] if i.startswith(opened + "/")]
    assert members, (opened, after["ids"])
    assert len(after["ids"]) >= len(before["ids"])  # (more, unless it held one sub-scope)
    # The scope list above the figure follows the click.
    selected = page.evaluate(
        """(index) => {
          const gd = document.querySelectorAll('.jp-OutputArea .js-plotly-plot')[index];
          const select = gd.closest('.widget-vbox').querySelector('.widget-select-multiple select');
          return Array.from(select.selectedOptions).map(o => o.value);
        }""", after["index"])
    assert opened in selected, selected
    target = page.evaluate(TARGET, after["index"])  # scrolls the redrawn figure into view
    page.wait_for_timeout(500)
    page.screenshot(path=str(tmp_path / "01_explorer_after_click.png"))
