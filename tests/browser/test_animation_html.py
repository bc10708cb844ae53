"""An exported step animation, opened from disk in Chromium, really plays: pressing Play moves
the playhead and the memory drawn so far grows."""

import pytest

from mlsys_viz import lifetime_animation

pytestmark = pytest.mark.browser

INTERVALS = [{"name": f"t{i}", "start": i, "end": i + 5, "bytes": 100 * (i + 1),
              "kind": "activation"} for i in range(40)]
DEVICE = [sum(t["bytes"] for t in INTERVALS if t["start"] <= p <= t["end"]) for p in range(46)]

STATE = """() => {
  const gd = document.querySelector('.js-plotly-plot');
  const n = gd.data.length;
  const lines = Array.from(document.querySelectorAll('path.js-line'))
    .filter(p => (p.getAttribute('d') || '').length > 0).length;
  return {playhead: gd.data[n - 3].x[0], drawn: gd.data[n - 1].x.length, lines: lines};
}"""


def test_exported_animation_plays(page, tmp_path):
    fig = lifetime_animation(INTERVALS, DEVICE, max_frames=46, frame_ms=30)
    path = tmp_path / "step.html"
    # auto_play=False as save_figure writes it: plotly's default starts the animation on
    # load, and on a busy machine it has moved on before the first look below.
    fig.write_html(path, include_plotlyjs=True, auto_play=False)
    page.goto(path.as_uri())
    page.wait_for_selector(".js-plotly-plot .main-svg")
    before = page.evaluate(STATE)
    assert (before["playhead"], before["drawn"]) == (0, 1)
    page.get_by_text("Play").click()
    page.wait_for_function(f"() => ({STATE})().playhead >= 30", timeout=20_000)
    after = page.evaluate(STATE)
    assert after["drawn"] == after["playhead"] + 1
    # Everything drawn before still is: the lifetime bars survive the animation.
    assert after["lines"] == before["lines"] >= 4
    page.screenshot(path=str(tmp_path / "animation.png"))
