"""The tour notebook, run by a person in JupyterLab: a plotly figure and a widget appear."""

import pytest

pytestmark = pytest.mark.browser


def test_tour_renders_plotly_and_widget(lab, page, tmp_path):
    lab.open("00_tour.ipynb")
    lab.run_all()
    page.screenshot(path=str(tmp_path / "00_tour.png"), full_page=True)
    assert lab.errors() == []
    # Plotly draws into an SVG inside .js-plotly-plot once the figure really rendered.
    # "attached", not "visible": JupyterLab hides cells scrolled out of view.
    page.wait_for_selector(".jp-OutputArea .js-plotly-plot .main-svg", state="attached",
                           timeout=30_000)
    plots = page.locator(".jp-OutputArea .js-plotly-plot")
    assert plots.count() >= 2  # the pipeline figure and the one inside the widget's Output
    # The ipywidget front end replaced the widget's text repr with real controls.
    dropdown = page.locator(".jp-OutputArea .widget-dropdown select")
    dropdown.wait_for(state="attached", timeout=30_000)
    dropdown.scroll_into_view_if_needed()
    assert dropdown.input_value() == "Kernel IR"
    # Using the widget reaches the kernel and back: the caption follows the selection.
    dropdown.select_option("Swap rewrite")
    page.wait_for_function(
        "() => Array.from(document.querySelectorAll('.widget-html-content'))"
        ".some(n => n.textContent.includes('swap-out to host'))",
        timeout=30_000,
    )
    # ... and so does the figure: the selected stage's box turns orange in the redrawn plot.
    page.wait_for_function(
        """() => Array.from(document.querySelectorAll('.js-plotly-plot'))
             .some(gd => (gd.data || []).some(t =>
                 t && t.marker && Array.isArray(t.marker.color)
                 && t.marker.color[3] === '#f28e2b'))""",
        timeout=30_000,
    )
    page.screenshot(path=str(tmp_path / "00_tour_after_select.png"), full_page=True)
