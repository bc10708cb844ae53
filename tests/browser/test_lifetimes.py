"""Notebook 02 in JupyterLab: the step animation of a real (swapping) training step plays.

JupyterLab in Chromium runs 02_tensor_lifetimes at its smoke size (the lab server sets SMOKE=1,
which the notebook's parameters cell reads), then a person presses Play on the animation: the
playhead must move through the schedule, and the device and host memory drawn so far must
change (the figure's data in the plotly div, read through JS). Then the same for the ipywidgets
control under it (an ipywidgets Play jslinked to a slider, driving a plotly FigureWidget through
the kernel): the FigureWidget must render, and pressing its Play must move its playhead.
Screenshots go to tmp_path.
"""

import pytest

pytestmark = pytest.mark.browser

# The plotly div that carries animation frames, and its changing traces, found by name.
FIND = """() => {
  const plots = Array.from(document.querySelectorAll('.jp-OutputArea .js-plotly-plot'));
  const gd = plots.find(g => g._transitionData && g._transitionData._frames
                             && g._transitionData._frames.length > 0);
  if (!gd) return null;
  const trace = name => gd.data.find(t => t.name === name);
  const device = trace('device so far'), host = trace('host so far');
  return {plots: plots.length, index: plots.indexOf(gd),
          frames: gd._transitionData._frames.length,
          playhead: trace('now').x[0],
          device_points: device.x.length, device_last: device.y[device.y.length - 1],
          host_points: host.x.length, host_max: Math.max(...host.y),
          bars: gd.querySelectorAll('path.js-line').length};
}"""


# The FigureWidget of viz.animation_widget: a plotly div inside an ipywidgets box, no frames.
FIND_WIDGET = """() => {
  const plots = Array.from(document.querySelectorAll('.jp-OutputArea .js-plotly-plot'));
  const gd = plots.find(g => g.closest('.widget-vbox') && g.data
                             && g.data.some(t => t.name === 'now'));
  if (!gd) return null;
  const trace = name => gd.data.find(t => t.name === name);
  const slider = gd.closest('.widget-vbox').querySelector('.widget-slider .noUi-handle');
  return {index: plots.indexOf(gd), playhead: trace('now').x[0],
          device_points: trace('device so far').x.length,
          slider: slider ? Number(slider.getAttribute('aria-valuenow')) : null,
          bars: gd.querySelectorAll('path.js-line').length};
}"""


def test_02_animation_plays_in_jupyterlab(lab, page, tmp_path):
    lab.open("02_tensor_lifetimes.ipynb")
    play_and_check(lab, page, tmp_path)


def play_and_check(lab, page, tmp_path):
    lab.run_all(timeout_s=300)
    assert lab.ran_a_cell(), "run-all never ran a cell"
    assert lab.errors() == []
    page.screenshot(path=str(tmp_path / "02_after_run.png"))
    page.wait_for_function(f"() => ({FIND})() !== null", timeout=120_000)
    before = page.evaluate(FIND)
    assert before["frames"] >= 50, before
    assert before["playhead"] == 0 and before["device_points"] == 1, before
    plot = page.locator(".jp-OutputArea .js-plotly-plot").nth(before["index"])
    plot.scroll_into_view_if_needed()
    page.screenshot(path=str(tmp_path / "02_before_play.png"))
    plot.locator(".updatemenu-button", has_text="Play").click()
    page.wait_for_function(f"() => ({FIND})().playhead > 0", timeout=30_000)
    # Play on until the first swapped tensor's bytes are on the host (mid forward pass).
    page.wait_for_function(f"() => ({FIND})().host_max > 0", timeout=60_000)
    page.screenshot(path=str(tmp_path / "02_playing.png"))
    after = page.evaluate(FIND)
    assert after["playhead"] > before["playhead"]
    # The memory drawn so far grew with the playhead and its values changed.
    assert after["device_points"] > before["device_points"]
    assert after["device_last"] != before["device_last"]
    assert after["host_max"] > before["host_max"] == 0  # swapped bytes reached the host
    assert after["bars"] == before["bars"] > 0  # the lifetime bars survive the animation
    page.screenshot(path=str(tmp_path / "02_full_page.png"), full_page=True)
    play_widget_and_check(page, tmp_path)


def play_widget_and_check(page, tmp_path):
    """The ipywidgets Play + slider under the plotly animation drive its FigureWidget."""
    page.wait_for_function(f"() => ({FIND_WIDGET})() !== null", timeout=60_000)
    before = page.evaluate(FIND_WIDGET)
    assert before["playhead"] == 0 and before["device_points"] == 1, before
    plot = page.locator(".jp-OutputArea .js-plotly-plot").nth(before["index"])
    box = plot.locator("xpath=ancestor::div[contains(@class, 'widget-vbox')][1]")
    play = box.locator(".widget-play button").first
    play.scroll_into_view_if_needed()
    page.screenshot(path=str(tmp_path / "02_widget_before_play.png"))
    play.click()
    # The Play moves the slider in the browser; the kernel redraws the playhead from frame k.
    page.wait_for_function(f"() => ({FIND_WIDGET})().playhead > 0", timeout=60_000)
    page.wait_for_timeout(1500)
    page.screenshot(path=str(tmp_path / "02_widget_playing.png"))
    box.screenshot(path=str(tmp_path / "02_widget_box.png"))  # controls and FigureWidget
    after = page.evaluate(FIND_WIDGET)
    assert after["playhead"] > before["playhead"]
    assert after["device_points"] > before["device_points"]
    assert after["bars"] == before["bars"] > 0
