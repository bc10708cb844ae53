"""The tour notebook's data: the pipelines as one plotly picture, and the curriculum map.

Each stage is a box; arrows join consecutive stages.  The data (stage names, what each stage is,
where it lives in the code) is plain Python so the same table can be printed or linked.
`CURRICULUM` lists every notebook with its track, what it teaches, what it assumes and how long
it runs (at full size and at `SMOKE=1`, on the machine `TIMED_ON` names); `tests/test_tour.py`
fails when a notebook in `notebooks/` is missing from it or has no times.
"""

from __future__ import annotations

from dataclasses import dataclass

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
SEG_STAGES = [
    ("EM volume", "mlsys_datasets", "a synthetic serial-section EM image with its true labels"),
    ("Boundary net", "segkit.boundary", "VD2D / VD2D3D / N4 predict affinities (trained by ZNN)"),
    ("Watershed", "segkit.basins", "steepest-ascent basins of the affinity graph"),
    ("Agglomeration", "segkit.linkage", "size-dependent single linkage; chunked on Dask"),
    ("Scores", "segkit.metrics", "adapted Rand F and variation of information"),
]
PIPELINES = {"lmskit": LMS_STAGES, "compilerkit": COMPILER_STAGES, "segkit": SEG_STAGES}


def pipeline_figure(highlight: str | None = None) -> go.Figure:
    """The pipelines as rows of boxes, one per kit; the stage ``highlight`` is drawn in orange."""
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
                text=[_label(stage) for stage, _, _ in stages],
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
        title="ML Systems Workbench: three pipelines",
        xaxis=dict(visible=False, range=[-2.2, 6]),
        yaxis=dict(visible=False, range=[-len(PIPELINES) + 0.2, 0.6]),
        showlegend=False,
        height=120 + 130 * len(PIPELINES),
        margin=dict(l=20, r=20, t=50, b=20),
        plot_bgcolor="white",
        font=dict(size=16),
        title_font=dict(size=22),
    )
    return fig


def _label(stage: str) -> str:
    """A stage's name under its box: long names on two lines, short ones on one."""
    if len(stage) <= 10 or " " not in stage:
        return stage
    head, tail = stage.split(" ", 1)
    return f"{head}<br>{tail}"


def describe(stage: str) -> str:
    """One line saying what ``stage`` is and which module implements it."""
    for stages in PIPELINES.values():
        for name, module, text in stages:
            if name == stage:
                return f"{name}: {text} (code: {module})"
    raise ValueError(f"unknown stage {stage!r}")


# -- the curriculum ----------------------------------------------------------------------------

TRACKS = {
    "memory": "Training what does not fit: TFLMS swapping (lmskit)",
    "compiling": "Compiling ONNX to native code (compilerkit)",
    "segmentation": "3D EM segmentation (segkit)",
}


# The machine the lessons' times are for: one run of the whole notebook, rounded.  The figure
# notebooks' full-size times are the wall clock of the make figures run that docs/REPORT.md
# comes from (04 and 05 ran beside a test-suite run, so theirs are long); the others are a Run
# All's CPU seconds on a busy machine of this kind (what a quiet one takes in wall clock).
# A busier or a faster machine scales them all.
TIMED_ON = "a quiet 2-core x86-64 machine (AMD EPYC, no GPU)"


@dataclass(frozen=True)
class Lesson:
    notebook: str          # file stem in notebooks/
    track: str             # a key of TRACKS
    teaches: str
    assumes: tuple[str, ...] = ()   # notebook stems to do first
    full_min: float | None = None   # minutes for the whole notebook at full size (SMOKE=0)
    smoke_min: float | None = None  # minutes at SMOKE=1 (the test suite's size)

    def time(self) -> str:
        """'16 min / 40 s': the full-size time, then the SMOKE=1 time ('?' where not timed)."""
        return f"{_minutes(self.full_min)} / {_minutes(self.smoke_min)}"


def _minutes(m: float | None) -> str:
    if m is None:
        return "?"
    if m < 2:
        return f"{max(5, 5 * round(m * 12)):.0f} s"   # to 5 s
    if m < 10:
        return f"{m:.1f}".removesuffix(".0") + " min"
    return f"{m:.0f} min"


CURRICULUM = (
    Lesson("01_training_graphs", "memory",
           "a Keras training step as a graph: forward, backward and update ops, sizes by batch",
           full_min=0.8, smoke_min=0.45),
    Lesson("02_tensor_lifetimes", "memory",
           "when each tensor lives, the memory peak and what it is made of, an animated step",
           ("01_training_graphs",),
           full_min=1.5, smoke_min=0.45),
    Lesson("03_swap_rewrite", "memory",
           "the TFLMS swap rules one at a time, the safety checker, the bit-identical real run",
           ("02_tensor_lifetimes",),
           full_min=0.4, smoke_min=0.3),
    Lesson("04_tflms_batch_size", "memory",
           "ResNet-50: the largest batch per swap policy against the paper's 4.7x",
           ("03_swap_rewrite",),
           full_min=32, smoke_min=0.8),
    Lesson("05_3dunet_swapping", "memory",
           "a 3D U-Net at 192³: swap against recompute, the swap parameters' cost",
           ("04_tflms_batch_size",),
           full_min=2.8, smoke_min=1.6),
    Lesson("06_patches_vs_full_volume", "memory",
           "training on patches against full volumes: Dice and memory", ("05_3dunet_swapping",),
           full_min=5.6, smoke_min=1.2),
    Lesson("07_lms_data_parallel", "memory",
           "swapping on N GPUs with a ring allreduce of the gradients", ("04_tflms_batch_size",),
           full_min=3, smoke_min=0.4),
    Lesson("10_onnx_to_native", "compiling",
           "a small CNN through ONNX IR, Kernel IR, LLVM IR and assembly, linked side by side",
           full_min=0.35, smoke_min=0.3),
    Lesson("11_kernel_ir_schedules", "compiling",
           "loop order and tiling by hand, measured; whole models against onnxruntime",
           ("10_onnx_to_native",),
           full_min=0.8, smoke_min=0.35),
    Lesson("12_endianness", "compiling",
           "byte order, a cross-compiling bug and its fix, an emulated s390x run",
           ("10_onnx_to_native",),
           full_min=0.6, smoke_min=0.3),
    Lesson("13_gpu_backend", "compiling",
           "Kernel IR to PTX: threads, tiles in shared memory; runs on a GPU where one exists",
           ("10_onnx_to_native",),
           full_min=0.3, smoke_min=0.2),
    Lesson("14_onnx_conformance", "compiling",
           "ONNX's backend tests and whole models: which ops pass, which are refused",
           ("10_onnx_to_native",),
           full_min=8.8, smoke_min=0.6),
    Lesson("15_looptune", "compiling",
           "LoopTune: a learned loop tuner over Kernel IR against searches and numpy",
           ("11_kernel_ir_schedules", "16_loopnest_codegen"),
           full_min=5.7, smoke_min=0.3),
    Lesson("16_loopnest_codegen", "compiling",
           "LoopNest: Kernel IR straight to AVX2 machine code, compile time against LLVM",
           ("11_kernel_ir_schedules",),
           full_min=0.6, smoke_min=0.35),
    Lesson("17_fast_convolutions", "compiling",
           "Winograd, FFT, L3 fusion and a hierarchical roofline that picks the algorithm",
           ("11_kernel_ir_schedules",),
           full_min=1.9, smoke_min=0.4),
    Lesson("18_3d_inference", "compiling",
           "ZNNi's sliding-window inference and planner, PZnet's blocked 3-D Conv",
           ("17_fast_convolutions",),
           full_min=7.3, smoke_min=0.85),
    Lesson("19_transformer_step_by_step", "compiling",
           "a Keras GPT-style decoder step by step: attention and LayerNorm in both IRs, "
           "what fuses, time per op type against onnxruntime",
           ("10_onnx_to_native",), full_min=1.1, smoke_min=1.1),
    Lesson("20_train_swap_compile", "compiling",
           "train with swapping, export to ONNX, compile for host, s390x and GPU",
           ("03_swap_rewrite", "12_endianness"),
           full_min=0.6, smoke_min=0.3),
    Lesson("30_watershed_single_linkage", "segmentation",
           "watershed on an affinity graph and size-dependent single linkage against waterz",
           full_min=4.9, smoke_min=0.35),
    Lesson("31_chunked_agglomeration", "segmentation",
           "chunked agglomeration on Dask, equal to the whole volume; one worker against two",
           ("30_watershed_single_linkage",),
           full_min=1.5, smoke_min=0.65),
    Lesson("32_recursive_boundary_detection", "segmentation",
           "VD2D, recursive VD2D3D and N4 boundary nets trained on synthetic EM",
           ("30_watershed_single_linkage",),
           full_min=13, smoke_min=1.3),
    Lesson("33_znn_task_parallel", "segmentation",
           "ZNN: a 3D ConvNet's training step as a task graph on every core",
           ("32_recursive_boundary_detection",),
           full_min=1.35, smoke_min=0.7),
    Lesson("34_em_pipeline", "segmentation",
           "image to scored segmentation: trained nets compiled by compilerkit, then agglomerated",
           ("32_recursive_boundary_detection", "31_chunked_agglomeration", "10_onnx_to_native"),
           full_min=2.3, smoke_min=0.7),
)


def curriculum_markdown() -> str:
    """The curriculum as one Markdown table per track (for the tour notebook and the docs)."""
    parts = [f"Times: the whole notebook at full size / at `SMOKE=1`, wall clock on {TIMED_ON}."]
    for track, title in TRACKS.items():
        parts.append(f"**{title}**\n\n| notebook | what it teaches | do first | time |"
                     "\n|---|---|---|---|")
        for lesson in CURRICULUM:
            if lesson.track == track:
                first = ", ".join(f"`{a[:2]}`" for a in lesson.assumes) or "-"
                parts[-1] += (f"\n| `{lesson.notebook}` | {lesson.teaches} | {first} | "
                              f"{lesson.time()} |")
    return "\n\n".join(parts)
