"""A loop nest as nested boxes: the outermost loop is the outer box, each loop it runs holds the
next, the body sits innermost. Each box is labelled with its loop (`for j_o in 0..784 step 64`);
the two loops of one tile (`block`: j_o / j_i) share a colour, outer darker, so blocking and
reordering (`permute`) show as a change in the boxes' order and colours.

Plain data in: `loops`, outermost first, dicts with "name", "lo", "hi", "step" and optionally
"tile_of" (the original loop a tile loop splits), "kind" ("full" / "outer" / "inner"),
"order" (depth; sorted on when given), "unroll" (bool, drawn dashed); `body` a one-line text.
compilerkit.views.loop_nest makes it from a krnl.iterate. Returns a plotly figure.
"""

from __future__ import annotations

import plotly.graph_objects as go

from .theme import apply

# Per original loop: (outer / full colour, inner tile colour).
HUES = [("#4e79a7", "#a0cbe8"), ("#f28e2b", "#ffbe7d"), ("#59a14f", "#8cd17d"),
        ("#b07aa1", "#d4a6c8"), ("#e15759", "#ff9d9a"), ("#76b7b2", "#b5dcd8"),
        ("#9c755f", "#d7b5a6")]
BODY = "#f4f4f4"
ROW = 1.0      # height of a box's label strip
INSET = 0.35   # horizontal inset per depth
WIDTH = 12.0


def loop_label(loop: dict) -> str:
    if loop.get("kind") == "inner":
        outer = f"{loop['tile_of']}_o"
        text = (f"for {loop['name']} in {outer} .. min({outer} + {loop['hi']}, "
                f"{loop['tile_of']} end)")
    else:
        step = f" step {loop['step']}" if loop.get("step", 1) != 1 else ""
        text = f"for {loop['name']} in {loop['lo']} .. {loop['hi']}{step}"
    if loop.get("kind") == "outer":
        text += f"   (tiles of {loop['tile_of']})"
    if loop.get("unroll"):
        text += "   [unrolled]"
    return text


def _colour(loop, hue_of):
    base = loop.get("tile_of") or loop["name"]
    outer, inner = HUES[hue_of.setdefault(base, len(hue_of)) % len(HUES)]
    return inner if loop.get("kind") == "inner" else outer


def _tint(colour: str, keep: float = 0.25) -> str:
    # Opaque light fills: translucent ones would mix where boxes stack and change the hue.
    rgb = [int(colour[k:k + 2], 16) for k in (1, 3, 5)]
    return "#" + "".join(f"{round(255 - (255 - c) * keep):02x}" for c in rgb)


def _trips(loop) -> int:
    step = loop.get("step", 1) or 1
    return max(0, -(-(loop["hi"] - loop["lo"]) // step))


def loopnest_figure(loops, body: str = "body", title: str = "Loop nest") -> go.Figure:
    """Nested boxes, outermost loop outside; hover a box's label for its trip count."""
    loops = list(loops)
    if any("order" in loop for loop in loops):
        loops.sort(key=lambda loop: loop["order"])
    n = len(loops)
    height = (n + 1) * ROW + n * 0.25 + 0.4
    hue_of: dict[str, int] = {}
    shapes, annotations, xs, ys, hovers = [], [], [], [], []
    for depth, loop in enumerate(loops):
        x0, x1 = depth * INSET, WIDTH - depth * INSET
        top, bottom = height - depth * ROW, depth * 0.25
        colour = _colour(loop, hue_of)
        shapes.append({"type": "rect", "x0": x0, "x1": x1, "y0": bottom, "y1": top,
                       "line": {"color": colour, "width": 2.5,
                                "dash": "dash" if loop.get("unroll") else "solid"},
                       "fillcolor": _tint(colour), "layer": "below",
                       "name": loop["name"]})
        annotations.append({"x": x0 + 0.12, "y": top - ROW / 2, "xanchor": "left",
                            "text": f"<b>{loop_label(loop)}</b>", "showarrow": False,
                            "font": {"family": "monospace", "size": 16}})
        xs.append(x0 + 0.12)
        ys.append(top - ROW / 2)
        hovers.append(f"{loop['name']}: {_trips(loop)} iterations"
                      + (f", tile loop of {loop['tile_of']}" if loop.get("tile_of") else "")
                      + f", depth {depth}")
    x0, x1 = n * INSET, WIDTH - n * INSET
    shapes.append({"type": "rect", "x0": x0, "x1": x1, "y0": n * 0.25,
                   "y1": height - n * ROW, "line": {"color": "#888", "width": 1},
                   "fillcolor": BODY, "layer": "below", "name": "body"})
    annotations.append({"x": x0 + 0.12, "y": height - n * ROW - ROW / 2, "xanchor": "left",
                        "text": body, "showarrow": False,
                        "font": {"family": "monospace", "size": 15, "color": "#444"}})
    fig = go.Figure(go.Scatter(x=xs, y=ys, mode="markers", marker={"size": 1, "opacity": 0},
                               hovertext=hovers, hoverinfo="text", name="loops",
                               showlegend=False))
    apply(fig)
    # No quantity on either axis: the boxes are the picture.
    fig.update_layout(title=title, shapes=shapes, annotations=annotations,
                      height=int(100 + 52 * height), margin={"l": 10, "r": 10, "t": 60, "b": 10},
                      xaxis={"visible": False, "range": [-0.1, WIDTH + 0.1]},
                      yaxis={"visible": False, "range": [-0.1, height + 0.1]})
    fig.layout.meta = {"order": [loop["name"] for loop in loops]}
    return fig

