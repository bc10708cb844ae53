"""One plotly template for every picture, readable on a projector.

plotly's default draws 12 px grey text on a grey grid: unreadable from the back of a lecture
hall. The "mlsys" template sets 16 px body text, larger titles (22 px) and axis titles (18 px),
white plots with light grid lines, and the Okabe-Ito palette (Okabe & Ito, "Color Universal
Design", 2008), whose eight colours stay distinct under the common colour-vision deficiencies.

Importing this module registers the template and makes it plotly's default (on top of
"plotly_white"), so the figures a notebook draws itself look like the library's once any drawing
function of mlsys_viz has been imported; every mlsys_viz figure also names it explicitly, so
changing the default later does not change ours. `import mlsys_viz.theme` at the top of a
notebook applies it before anything is drawn.
"""

from __future__ import annotations

import plotly.graph_objects as go
import plotly.io as pio

__all__ = ["OKABE_ITO", "TEMPLATE", "BODY_PX", "TITLE_PX", "AXIS_TITLE_PX", "template", "apply"]

TEMPLATE = "mlsys"
BODY_PX = 16
TITLE_PX = 22
AXIS_TITLE_PX = 18
TICK_PX = 15

# Okabe-Ito, the yellow moved last: on white it is the weakest of the eight.
OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000",
             "#F0E442")

_AXIS = {
    "title": {"font": {"size": AXIS_TITLE_PX}, "standoff": 8},
    "tickfont": {"size": TICK_PX},
    "gridcolor": "#e5e5e5", "linecolor": "#444444", "zerolinecolor": "#cccccc",
    "showline": True, "ticks": "outside", "automargin": True,
}


def template() -> go.layout.Template:
    """The template itself (a fresh copy), for figures that want it without the default."""
    return go.layout.Template(layout={
        "font": {"size": BODY_PX, "color": "#222222", "family": "Arial, Helvetica, sans-serif"},
        "title": {"font": {"size": TITLE_PX}, "x": 0.02, "xanchor": "left"},
        "colorway": list(OKABE_ITO),
        "plot_bgcolor": "white", "paper_bgcolor": "white",
        "xaxis": _AXIS, "yaxis": _AXIS,
        "legend": {"font": {"size": TICK_PX}},
        "hoverlabel": {"font": {"size": TICK_PX}},
        "annotationdefaults": {"font": {"size": TICK_PX}},
        "scene": {"xaxis": {"title": {"font": {"size": AXIS_TITLE_PX}}},
                  "yaxis": {"title": {"font": {"size": AXIS_TITLE_PX}}},
                  "zaxis": {"title": {"font": {"size": AXIS_TITLE_PX}}}},
        "coloraxis": {"colorbar": {"tickfont": {"size": TICK_PX}}},
    })


def apply(fig: go.Figure) -> go.Figure:
    """Give ``fig`` the template (layered on plotly_white), whatever plotly's default is."""
    fig.update_layout(template="plotly_white+" + TEMPLATE)
    return fig


pio.templates[TEMPLATE] = template()
pio.templates.default = "plotly_white+" + TEMPLATE
