"""Pictures of 3D volumes and their segmentations: slices with labels overlaid, meshes, merge
trees and chunk rounds as animations, and a neuroglancer view.

Plain data in (numpy arrays of grey values and integer labels, lists of vertices and faces,
lists of frames); plotly figures out. Nothing here knows how a segmentation was made: the
segmentation kit prepares the frames (segkit.views), this module draws them.

* ``overlay(image2d, labels2d)`` -> RGB uint8: grey image, each label a fixed colour blended on top;
* ``slice_figure(image, labels)``: z slices with a plotly slider (works in exported HTML);
  ``slice_viewer(image, labels)``: the same as an ipywidgets slider around a FigureWidget;
* ``mesh_figure(meshes)``: ``Mesh3d`` per (name, vertices, faces);
* ``frames_figure(frames, ...)``: an animation (Play + slider) of labelled 2D frames, used for
  the merge tree threshold by threshold and for the chunk rounds;
* ``neuroglancer_state(...)`` / ``neuroglancer_viewer(...)``: image, affinity and segmentation
  layers for the field's own viewer, served on the loopback interface only.
"""

from __future__ import annotations

import numpy as np

GOLDEN = 0.6180339887498949


def label_colors(labels) -> np.ndarray:
    """A fixed RGB colour (uint8) per label id (0 -> black): same id, same colour, every run."""
    ids = np.asarray(labels, np.uint64)
    h = ((ids * np.uint64(2654435761)) % np.uint64(1 << 32)).astype(np.float64) / 2 ** 32
    h = (h + GOLDEN * (ids % np.uint64(97)).astype(np.float64)) % 1.0
    s, v = 0.65, 0.95
    i = np.floor(h * 6).astype(int) % 6
    f = h * 6 - np.floor(h * 6)
    p, q, t = v * (1 - s), v * (1 - f * s), v * (1 - (1 - f) * s)
    table = np.stack([np.choose(i, [v, q, p, p, t, v]), np.choose(i, [t, v, v, q, p, p]),
                      np.choose(i, [p, p, t, v, v, q])], axis=-1)
    rgb = (table * 255).astype(np.uint8)
    rgb[ids == 0] = 0
    return rgb


def overlay(image2d, labels2d=None, alpha: float = 0.45) -> np.ndarray:
    """RGB uint8 (H, W, 3): the grey image (scaled to its own range) with label colours."""
    img = np.asarray(image2d, np.float64)
    lo, hi = float(img.min()), float(img.max())
    grey = (img - lo) / (hi - lo) if hi > lo else np.zeros_like(img)
    rgb = np.repeat(grey[..., None] * 255, 3, axis=-1)
    if labels2d is not None:
        labels2d = np.asarray(labels2d)
        colors = label_colors(labels2d).astype(np.float64)
        mask = (labels2d != 0)[..., None]
        rgb = np.where(mask, (1 - alpha) * rgb + alpha * colors, rgb)
    return rgb.astype(np.uint8)


# Slices are drawn at least this tall on screen: a 64-voxel EM slice at one pixel per voxel
# is a stamp on a projector.
SLICE_PX = 520


def image_axes(fig, axis: int = 0, unit: str = "voxels", row=None, col=None):
    """Title the axes of an image of a slice along ``axis`` of a (z, y, x) volume: its rows are
    the first remaining axis, its columns the second ("y (voxels)", "x (voxels)" for a z
    slice); the y axis runs downwards and keeps the voxels square. ``row``/``col`` pick one
    subplot of a make_subplots figure."""
    if axis not in (0, 1, 2):
        raise ValueError(f"axis must be 0, 1 or 2 (z, y, x), got {axis!r}")
    rows_name, cols_name = [name for i, name in enumerate("zyx") if i != axis]
    fig.update_xaxes(title_text=f"{cols_name} ({unit})", showgrid=False, row=row, col=col)
    fig.update_yaxes(title_text=f"{rows_name} ({unit})", showgrid=False, autorange="reversed",
                     scaleanchor="x" if row is None else None, row=row, col=col)
    return fig


def _apply(fig):
    from .theme import apply  # plotly loads on first drawing, not on import

    return apply(fig)


def _image_trace(rgb):
    import plotly.graph_objects as go

    return go.Image(z=rgb, hoverinfo="x+y")


def slice_figure(image, labels=None, axis: int = 0, step: int = 1, alpha: float = 0.45,
                 title: str = "slices"):
    """Slices along ``axis`` (every ``step``-th) with a plotly slider; labels overlaid."""
    import plotly.graph_objects as go

    image = np.asarray(image)
    n = image.shape[axis]
    index = list(range(0, n, max(1, int(step))))
    take = lambda a, i: np.take(a, i, axis=axis)  # noqa: E731
    rgbs = [overlay(take(image, i), None if labels is None else take(labels, i), alpha)
            for i in index]
    fig = go.Figure(data=[_image_trace(rgbs[0])],
                    frames=[go.Frame(data=[_image_trace(r)], name=str(i))
                            for i, r in zip(index, rgbs, strict=True)])
    _apply(fig)
    image_axes(fig, axis)
    fig.update_layout(
        title=title, height=SLICE_PX + 200,
        sliders=[{"active": 0, "currentvalue": {"prefix": f"{'zyx'[axis]} = "},
                  "steps": [{"label": str(i), "method": "animate",
                             "args": [[str(i)], {"mode": "immediate",
                                                 "frame": {"duration": 0, "redraw": True}}]}
                            for i in index]}])
    return fig


def slice_viewer(image, labels=None, axis: int = 0, alpha: float = 0.45, title: str = "slices"):
    """An ipywidgets slider (and opacity slider) around a plotly FigureWidget; returns the
    VBox. Without a front end it is inert but its figure still updates (``.children[1]``)."""
    import ipywidgets as widgets
    import plotly.graph_objects as go

    image = np.asarray(image)
    n = image.shape[axis]
    take = lambda a, i: np.take(a, i, axis=axis)  # noqa: E731
    fig = go.FigureWidget(data=[_image_trace(overlay(take(image, 0), None if labels is None
                                                     else take(labels, 0), alpha))])
    _apply(fig)
    image_axes(fig, axis)
    fig.update_layout(title=title, height=SLICE_PX + 100, margin={"t": 60, "b": 10})
    pos = widgets.IntSlider(value=0, min=0, max=n - 1, description=f"{'zyx'[axis]}")
    opacity = widgets.FloatSlider(value=alpha, min=0, max=1, step=0.05, description="labels")

    def redraw(_=None):
        lab = None if labels is None else take(labels, pos.value)
        fig.data[0].z = overlay(take(image, pos.value), lab, opacity.value)

    pos.observe(redraw, names="value")
    opacity.observe(redraw, names="value")
    return widgets.VBox([widgets.HBox([pos, opacity]), fig])


def mesh_figure(meshes, title: str = "segments"):
    """``meshes``: list of (name, label id, vertices (n, 3) in (x, y, z), faces (m, 3))."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for name, label, v, f in meshes:
        r, g, b = label_colors(np.array([label]))[0]
        fig.add_trace(go.Mesh3d(x=v[:, 0], y=v[:, 1], z=v[:, 2], i=f[:, 0], j=f[:, 1],
                                k=f[:, 2], color=f"rgb({r},{g},{b})", opacity=1.0, name=name,
                                showlegend=True, flatshading=True))
    _apply(fig)
    fig.update_layout(title=title, height=SLICE_PX + 100,
                      scene={"aspectmode": "data", "xaxis_title": "x (voxels)",
                             "yaxis_title": "y (voxels)", "zaxis_title": "z (voxels)"})
    return fig


def frames_figure(frames, names, image2d=None, title: str = "", alpha: float = 0.6,
                  captions=None, boxes=None):
    """Animate labelled 2D frames (Play button and slider): ``frames`` a list of 2D label
    arrays, ``names`` one label per frame, ``image2d`` an optional grey background,
    ``captions`` a line of text per frame, ``boxes`` per frame a list of (y0, x0, y1, x1)
    rectangles (chunk outlines)."""
    import plotly.graph_objects as go

    bg = np.zeros(np.shape(frames[0])) if image2d is None else image2d

    def data(k):
        return [_image_trace(overlay(bg, frames[k], alpha if image2d is not None else 1.0))]

    def shapes(k):
        if boxes is None:
            return []
        return [{"type": "rect", "x0": x0 - 0.5, "x1": x1 - 0.5, "y0": y0 - 0.5, "y1": y1 - 0.5,
                 "line": {"color": "white", "width": 1.5}} for y0, x0, y1, x1 in boxes[k]]

    def caption(k):
        return f"{title}<br><sup>{captions[k]}</sup>" if captions else title

    fig = go.Figure(data=data(0), frames=[
        go.Frame(data=data(k), name=str(names[k]),
                 layout={"shapes": shapes(k), "title": {"text": caption(k)}})
        for k in range(len(frames))])
    _apply(fig)
    image_axes(fig, 0)
    fig.update_layout(
        title=caption(0), shapes=shapes(0), height=SLICE_PX + 200, margin={"b": 120},
        updatemenus=[{"type": "buttons", "showactive": False, "x": 0, "y": -0.14,
                      "buttons": [{"label": "Play", "method": "animate",
                                   "args": [None, {"frame": {"duration": 700, "redraw": True},
                                                   "fromcurrent": True}]}]}],
        sliders=[{"active": 0, "x": 0.1, "len": 0.9, "y": -0.12,
                  "steps": [{"label": str(n), "method": "animate",
                             "args": [[str(n)], {"mode": "immediate",
                                                 "frame": {"duration": 0, "redraw": True}}]}
                            for n in names]}])
    return fig


def neuroglancer_state(image, labels=None, affinities=None, voxel_size=(40, 4, 4)):
    """A ``neuroglancer.ViewerState`` with image, affinity and segmentation layers held in
    memory (``LocalVolume``); no server is started. ``voxel_size`` in nm, (z, y, x)."""
    import neuroglancer

    dims = neuroglancer.CoordinateSpace(names=["z", "y", "x"], units="nm",
                                        scales=list(voxel_size))
    state = neuroglancer.ViewerState()
    state.dimensions = dims
    state.layers["image"] = neuroglancer.ImageLayer(
        source=neuroglancer.LocalVolume(np.asarray(image, np.float32), dimensions=dims))
    if affinities is not None:
        cdims = neuroglancer.CoordinateSpace(names=["c^", "z", "y", "x"],
                                             units=["", "nm", "nm", "nm"],
                                             scales=[1, *voxel_size])
        state.layers["affinities"] = neuroglancer.ImageLayer(
            source=neuroglancer.LocalVolume(np.asarray(affinities, np.float32),
                                            dimensions=cdims))
    if labels is not None:
        state.layers["segmentation"] = neuroglancer.SegmentationLayer(
            source=neuroglancer.LocalVolume(np.asarray(labels, np.uint64), dimensions=dims))
    return state


def neuroglancer_viewer(image, labels=None, affinities=None, voxel_size=(40, 4, 4)):
    """Serve the layers of ``neuroglancer_state`` from this process on 127.0.0.1 (a free
    port) and return the ``neuroglancer.Viewer``; ``str(viewer)`` is the URL to open."""
    import neuroglancer

    neuroglancer.set_server_bind_address("127.0.0.1")
    viewer = neuroglancer.Viewer()
    state = neuroglancer_state(image, labels, affinities, voxel_size)
    with viewer.txn() as s:
        s.dimensions = state.dimensions
        for layer in state.layers:
            s.layers[layer.name] = layer.layer
    return viewer
