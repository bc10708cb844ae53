"""The two pipelines of the workbench as one plotly picture, for the tour notebook.

Each stage is a box; arrows join consecutive stages.  The data (stage names, what each stage is,
where it lives in the code) is plain Python so the same table can be printed or linked.
"""

from __future__ import annotations

import plotly.graph_objects as go

# (stage, module that implements it, one-line explanation)
LMS_STAGES = [
    ("Keras model", "mlsys_datasets", "a real tf.keras model and a loss"),
    ("Training graph", "lmskit.capture", "one traced step: forward, backward, update ops"),
    ("Lifetimes", "lmskit.lifetimes", "when each tensor is made and last used; the memory peak"),
    ("Swap rewrite", "lmskit.swap", "swap-out to host, swap-in back, triggered by control edges"),
    ("Simulation", "lmskit.simulate", "device memory and copy streams on a P100/V100/H100 model"),
    ("Run in TF", "lmskit.tfrun", "the rewritten graph runs; loss and gradients are unchanged"),
]
COMPILER_STAGES = [
    ("ONNX model", "mlsys_datasets", "a protobuf file exported from Keras or built by hand"),
    ("ONNX IR", "compilerkit.frontend", "one op per ONNX operator, shapes inferred"),
    ("Kernel IR", "compilerkit.lowering", "explicit loops, tiles, loop order, loads and stores"),
    ("LLVM IR", "compilerkit.codegen", "one C-callable function; buffers planned in one arena"),
    ("Machine code", "compilerkit.backends", "x86-64 host, NVPTX GPU, emulated s390x / ppc64"),
]
PIPELINES = {"lmskit": LMS_STAGES, "compilerkit": COMPILER_STAGES}


def pipeline_figure(highlight: str | None = None) -> go.Figure:
    """Both pipelines as rows of boxes; the stage named ``highlight`` is drawn in orange."""
    fig = go.Figure()
    names = {stage for stages in PIPELINES.values() for stage, _, _ in stages}
    if highlight is not None and highlight not in names:
        raise ValueError(f"unknown stage {highlight!r}; stages are {sorted(names)}")
    for row, (kit, stages) in enumerate(PIPELINES.items()):
        y = -row
        xs = list(range(len(stages)))
        colours = ["#f28e2b" if stage == highlight else "#4e79a7" for stage, _, _ in stages]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=[y] * len(xs),
                mode="markers+text",
                marker=dict(symbol="square", size=46, color=colours),
                text=[stage.replace(" ", "<br>") for stage, _, _ in stages],
                textposition="bottom center",
                hovertext=[f"<b>{s}</b><br>{m}<br>{d}" for s, m, d in stages],
                hoverinfo="text",
                name=kit,
            )
        )
        for x in xs[:-1]:
            fig.add_annotation(
                x=x + 0.78, y=y, ax=x + 0.22, ay=y, xref="x", yref="y", axref="x", ayref="y",
                showarrow=True, arrowhead=3, arrowwidth=2, arrowcolor="#888",
            )
        fig.add_annotation(x=-0.6, y=y, text=f"<b>{kit}</b>", showarrow=False, xanchor="right")
    fig.update_layout(
        title="ML Systems Workbench: two pipelines",
        xaxis=dict(visible=False, range=[-2.2, 6]),
        yaxis=dict(visible=False, range=[-1.8, 0.6]),
        showlegend=False,
        height=320,
        margin=dict(l=20, r=20, t=50, b=20),
        plot_bgcolor="white",
    )
    return fig


def describe(stage: str) -> str:
    """One line saying what ``stage`` is and which module implements it."""
    for stages in PIPELINES.values():
        for name, module, text in stages:
            if name == stage:
                return f"{name}: {text} (code: {module})"
    raise ValueError(f"unknown stage {stage!r}")
