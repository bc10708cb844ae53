"""Paper figures: save them from notebooks, and rerun the figure notebooks (``make figures``).

A figure notebook carries ``{"mlsys": {"figures": true}}`` in its notebook metadata and calls
``save_figure`` for each figure it wants in the report.  ``make figures`` runs every such notebook
at full size (``SMOKE=0``) with ``MLSYS_FIGURES_DIR`` pointing at the output folder; each call
writes ``NAME.html`` (self-contained, plotly.js inlined: it opens offline) and ``NAME.png``
(kaleido driving the system Chromium: nothing is downloaded) and records the figure in
``manifest.json``: the paper's claim, our value, the parameters and seed, library versions and
the machine, so two runs can be compared; ``REPORT.md`` puts the claims and ours side by side;
``executed/NAME.ipynb`` keeps each notebook as it ran, outputs included.

Determinism.  Two runs with the same parameters and seed must give the same manifest except for
wall-clock times.  The convention that makes this checkable: ``value`` (and ``summary``) hold
only deterministic results (counts, simulated times, sizes, agreement flags, errors against a
reference), and every wall-clock measurement (compile seconds, latencies, their ratios, search
times) goes into ``timings``.  ``compare_manifests(a, b)`` lists the differences between two
manifests outside ``timings`` (and outside the versions and the machine, which describe the run
rather than its results); an empty list means the runs agree.  ``make figures ONLY=12,14``
(``--only``) reruns some notebooks and keeps the others' figures; ``COMPARE=old/manifest.json``
(``--compare``) then lists the values that differ from an earlier run and fails if any does.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import platform
import sys
import time
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

import nbformat

from .notebooks import NotebookError, run_notebook

FIGURES_ENV = "MLSYS_FIGURES_DIR"
MANIFEST = "manifest.json"
# Each figure notebook as it ran (outputs included) goes to <out>/executed/<name>: a reader can
# open the run behind a figure, and the test suite checks those runs instead of running the
# notebooks a second time.
EXECUTED = "executed"
EXECUTED_MARK = "executed_by_make_figures"
VERSIONED = ["tensorflow", "keras", "onnx", "onnxruntime", "xdsl", "llvmlite", "unicorn",
             "numpy", "plotly", "mlsys-workbench"]
REPO = Path(__file__).resolve().parents[1]


def library_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in VERSIONED:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def machine() -> dict[str, object]:
    return {"platform": platform.platform(), "processor": platform.machine(),
            "cpus": os.cpu_count()}


def figures_dir(out_dir: str | os.PathLike | None = None) -> Path:
    path = Path(out_dir or os.environ.get(FIGURES_ENV) or "figures")
    path.mkdir(parents=True, exist_ok=True)
    return path


def read_manifest(out_dir: Path) -> dict:
    path = out_dir / MANIFEST
    if path.exists():
        return json.loads(path.read_text())
    return {"versions": library_versions(), "machine": machine(), "figures": {}}


class _QuietBrowserGoodbye(logging.Filter):
    """Drop choreographer's logged traceback for the "{bye}" it writes into its own pipe when
    the browser closes.  When that goodbye lands in the same read as the browser's last reply,
    choreographer cannot decode it, logs "JSONError decoding message. Ignoring" with a full
    traceback on stderr, and goes on: the image is already written.  Any other undecodable
    message is still logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        cause = getattr(error, "__cause__", None)
        return not str(getattr(cause, "doc", "")).startswith("{bye}")


def _quiet_browser_goodbye() -> None:
    # Import the module first: it registers its logger class (with ``debug2``) for that name;
    # a plain ``logging.getLogger`` before the import would leave it a Logger without one.
    from choreographer.channels import pipe

    logger = logging.getLogger(pipe.__name__)
    if not any(isinstance(f, _QuietBrowserGoodbye) for f in logger.filters):
        logger.addFilter(_QuietBrowserGoodbye())


_NO_CHROME_SAID = False


def _write_png(fig, path: Path) -> bool:
    """Write the PNG through Kaleido (which drives Chromium); without a Chromium, keep the HTML
    only and say once per process how to get PNGs. A figure must never fail the cell that
    shows it."""
    global _NO_CHROME_SAID
    _quiet_browser_goodbye()
    try:
        # The figure's own size where it sets one (a long table of bars), else 1100 x 650.
        fig.write_image(path, width=fig.layout.width or 1100, height=fig.layout.height or 650)
    except RuntimeError as error:
        if "requires Google Chrome" not in str(error):
            raise
        if not _NO_CHROME_SAID:
            print("save_figure: no Chromium found, so figures are kept as HTML only; for PNGs "
                  "install it (Debian: sudo apt-get install chromium).")
            _NO_CHROME_SAID = True
        return False
    return True


def save_figure(fig, name: str, *, claim: str | None = None, value=None,
                summary: str | None = None, timings: dict | None = None,
                params: dict | None = None, seed: int | None = None,
                out_dir: str | os.PathLike | None = None, png: bool = True) -> dict:
    """Write ``fig`` as NAME.html and NAME.png (1100 x 650 pixels unless the figure's layout
    sets its width or height) and record it in the manifest; return the entry.

    ``claim`` is what the paper reports (quoted, never invented); ``value`` what we found (a
    number, string or small dict) and ``summary`` a one-line headline of it for REPORT.md: both
    must be the same on every run with the same ``params`` and ``seed``.  Wall-clock
    measurements go into ``timings`` (a small dict), which ``compare_manifests`` ignores.
    """
    if not name or not all(c.isalnum() or c in "-_" for c in name):
        raise ValueError(f"figure name {name!r}: use letters, digits, '-' and '_' only")
    if timings is not None and not isinstance(timings, dict):
        raise TypeError("timings: a dict of wall-clock measurements, e.g. {'compile_s': 0.6}")
    out = figures_dir(out_dir)
    files = [f"{name}.html"]
    # An animation waits for its Play button (plotly's default plays it on opening the page).
    fig.write_html(out / files[0], include_plotlyjs=True, full_html=True, auto_play=False)
    if png and _write_png(fig, out / f"{name}.png"):
        files.append(f"{name}.png")
    entry = {"claim": claim, "value": value, "summary": summary, "timings": timings or {},
             "params": params or {}, "seed": seed, "files": files,
             "notebook": os.environ.get("MLSYS_NOTEBOOK"),
             "versions": library_versions(), "machine": machine()}
    manifest = read_manifest(out)
    manifest["figures"][name] = entry
    _write_manifest(out, manifest)
    return entry


def _write_manifest(out: Path, manifest: dict) -> None:
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True, default=str))


REPORT_MARK = "Generated by `make figures`"  # the third line of every REPORT.md we write


def _is_figures_manifest(data) -> bool:
    """A manifest this module wrote: its figures, versions and machine."""
    return isinstance(data, dict) and isinstance(data.get("figures"), dict) and \
        {"versions", "machine"} <= set(data)


def check_out_folder(out_dir: str | os.PathLike) -> None:
    """ValueError unless ``out_dir`` is a folder (or can be one) whose manifest.json and
    REPORT.md, where present, were written by ``make figures``: a run replaces those and
    never deletes or overwrites a file it did not write. Checked before any notebook runs."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {str(out)!r} is a file, not a folder")
    manifest, report = out / MANIFEST, out / "REPORT.md"
    if manifest.exists():
        try:
            data = json.loads(manifest.read_text())
        except (ValueError, UnicodeDecodeError):
            data = None
        if not _is_figures_manifest(data):
            raise ValueError(f"--out {str(out)!r} holds a {MANIFEST} that make figures did not "
                             "write; it is left alone: choose another folder")
    if report.exists() and REPORT_MARK not in report.read_text(errors="replace")[:400]:
        raise ValueError(f"--out {str(out)!r} holds a REPORT.md that make figures did not "
                         "write; it is left alone: choose another folder")
    executed = out / EXECUTED
    if executed.exists() and not executed.is_dir():
        raise ValueError(f"--out {str(out)!r}: {EXECUTED!r} is a file, not the folder make "
                         "figures writes executed notebooks into; choose another folder")
    for path in sorted(executed.glob("*.ipynb")) if executed.is_dir() else []:
        if not _is_executed_copy(path):
            raise ValueError(f"--out {str(out)!r} holds {path.relative_to(out)}, a notebook make "
                             "figures did not write; it is left alone: choose another folder")


def _is_executed_copy(path: Path) -> bool:
    try:
        return bool(nbformat.read(path, as_version=4).metadata.get("mlsys", {}).get(EXECUTED_MARK))
    except Exception:  # not a notebook at all: certainly not ours
        return False


def _save_executed(nb, out: Path, name: str) -> None:
    nb.metadata.setdefault("mlsys", {})[EXECUTED_MARK] = True
    (out / EXECUTED).mkdir(exist_ok=True)
    nbformat.write(nb, out / EXECUTED / name)


def read_compare(path: str | os.PathLike) -> dict:
    """The manifest given to ``--compare``, read and checked before any notebook runs."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ValueError(f"--compare {str(path)!r}: no such file") from None
    except (OSError, ValueError, UnicodeDecodeError) as error:
        raise ValueError(f"--compare {str(path)!r}: not a readable JSON manifest "
                         f"({error})") from None
    if not _is_figures_manifest(data):
        raise ValueError(f"--compare {str(path)!r}: not a make figures manifest.json (it needs "
                         "'figures', 'versions' and 'machine')")
    return data


# Fields of a manifest entry that describe the run, not its results: never compared.
NOT_COMPARED = ("timings", "versions", "machine")


def _differences(a, b, where: str, rel_tol: float, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            if key not in a or key not in b:
                side = "first" if key in a else "second"
                out.append(f"{where}.{key}: only in the {side} manifest")
            else:
                _differences(a[key], b[key], f"{where}.{key}", rel_tol, out)
    elif isinstance(a, list | tuple) and isinstance(b, list | tuple):
        if len(a) != len(b):
            out.append(f"{where}: {len(a)} items != {len(b)} items")
        else:
            for i, (x, y) in enumerate(zip(a, b, strict=True)):
                _differences(x, y, f"{where}[{i}]", rel_tol, out)
    elif (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)):
        return
    elif (isinstance(a, int | float) and isinstance(b, int | float)
          and not isinstance(a, bool) and not isinstance(b, bool)):
        if a != b and not math.isclose(a, b, rel_tol=rel_tol, abs_tol=0.0):
            out.append(f"{where}: {a!r} != {b!r}")
    elif a != b or type(a) is not type(b):
        out.append(f"{where}: {a!r} != {b!r}")


def compare_manifests(a: dict, b: dict, figures: Iterable[str] | None = None,
                      rel_tol: float = 0.0) -> list[str]:
    """Differences between two manifests (dicts as in manifest.json), one line each, outside
    the wall-clock ``timings`` and the versions and machine; [] when they agree.

    ``figures`` limits the comparison to those figure names (a figure missing from either side
    is a difference); by default every figure of either manifest is compared.  Numbers must be
    equal unless ``rel_tol`` > 0 (two runs of a deterministic notebook give equal numbers, so
    the default is exact).
    """
    fa, fb = a.get("figures", {}), b.get("figures", {})
    names = sorted(set(fa) | set(fb)) if figures is None else sorted(set(figures))
    out: list[str] = []
    for name in names:
        if name not in fa or name not in fb:
            side = "second" if name not in fb else "first"
            out.append(f"{name}: missing from the {side} manifest")
            continue
        ea = {k: v for k, v in fa[name].items() if k not in NOT_COMPARED}
        eb = {k: v for k, v in fb[name].items() if k not in NOT_COMPARED}
        _differences(ea, eb, name, rel_tol, out)
    return out


def figure_notebooks(folder: Path = REPO / "notebooks") -> list[Path]:
    """Notebooks whose metadata marks them as producing paper figures."""
    return [
        path for path in sorted(folder.glob("*.ipynb"))
        if nbformat.read(path, as_version=4).metadata.get("mlsys", {}).get("figures")
    ]


def _cell(value) -> str:
    if isinstance(value, bool) or value is None:
        return "" if value is None else str(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return ", ".join(f"{k}=" + (f"({_cell(v)})" if isinstance(v, dict) else _cell(v))
                         for k, v in value.items())
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_cell(v) for v in value) + "]"
    return str(value).replace("|", "\\|").replace("\n", " ")


# The papers' headline results REPORT.md puts side by side: (topic, notebook, figure name
# without the smoke suffix, or None for every figure of that notebook).
TOPICS = [
    ("ResNet-50 largest batch with swapping", "04_tflms_batch_size.ipynb",
     "tflms_resnet50_batch_ratio"),
    ("3D U-Net at 192^3", "05_3dunet_swapping.ipynb", "unet3d_192_fits"),
    ("Overhead of each swap policy", "04_tflms_batch_size.ipynb",
     "tflms_resnet50_policies_at_2x"),
    ("Tuning cut of the communication overhead", "05_3dunet_swapping.ipynb",
     "unet3d_swap_tuning"),
    ("ResNet-50 images per second within 30% overhead", "04_tflms_batch_size.ipynb",
     "tflms_resnet50_throughput"),
    ("Swap vs recompute on the 3D U-Net at 192^3", "05_3dunet_swapping.ipynb",
     "unet3d_recompute_vs_swap"),
    ("Swapping with data-parallel training", "07_lms_data_parallel.ipynb",
     "lms_data_parallel_scaling"),
    ("Patches vs full-volume Dice", "06_patches_vs_full_volume.ipynb", None),
    ("Compile time and latency vs onnxruntime", "11_kernel_ir_schedules.ipynb",
     "compile_vs_onnxruntime"),
    ("Real-weight models vs onnxruntime at 1 and 2 threads", "11_kernel_ir_schedules.ipynb",
     "real_weight_vs_onnxruntime"),
    ("ONNX conformance counts", "14_onnx_conformance.ipynb", "onnx_conformance"),
    ("Transformer decoder vs onnxruntime at 1 thread (goal >= 1.0x)",
     "19_transformer_step_by_step.ipynb", "transformer_vs_onnxruntime"),
    ("LoopNest codegen vs LLVM: compile time per nest and model", "16_loopnest_codegen.ipynb",
     "loopnest_codegen"),
    ("LoopTune policy vs searches on held-out matmuls", "15_looptune.ipynb",
     "looptune_agents"),
    ("Emulated big-endian agreement", "12_endianness.ipynb", "emulated_big_endian"),
    ("Size-dependent single linkage vs watershed and waterz", "30_watershed_single_linkage.ipynb",
     "sdsl_vs_watershed"),
    ("Chunked agglomeration equals the whole volume", "31_chunked_agglomeration.ipynb",
     "chunked_rounds"),
    ("ZNN task-parallel speed-up vs Brent's bound", "33_znn_task_parallel.ipynb", "znn_brent"),
    ("ZNN on small steps: a task per edge or per node, 2 threads over 1",
     "33_znn_task_parallel.ipynb", "znn_small_steps"),
    ("Recursive VD2D3D vs VD2D and N4: adapted Rand F on held-out volumes",
     "32_recursive_boundary_detection.ipynb", "recursive_boundary_f"),
    ("EM pipeline: compiled boundary nets equal TensorFlow; voxels/s", "34_em_pipeline.ipynb",
     "em_pipeline"),
    ("Hierarchical roofline: predicted vs measured Conv times", "17_fast_convolutions.ipynb",
     "fastconv_roofline"),
    ("Roofline's pick of the Conv algorithm vs the fastest", "17_fast_convolutions.ipynb",
     "fastconv_picks"),
    ("L3-fused vs three-stage Winograd", "17_fast_convolutions.ipynb", "fastconv_fused"),
    ("FFT convolution on 5^3 / 7^3 kernels (ZNN, ZNNi)", "17_fast_convolutions.ipynb",
     "fastconv_fft"),
    ("ZNNi sliding window: stitched equals the whole volume", "18_3d_inference.ipynb",
     "znni_stitched"),
    ("ZNNi throughput against patch size per algorithm", "18_3d_inference.ipynb", "znni_curve"),
    ("ZNNi planner's patch and algorithm under RAM caps vs best measured",
     "18_3d_inference.ipynb", "znni_planner"),
    ("PZnet blocked layout: NCDHW8c transforms only at chain edges", "18_3d_inference.ipynb",
     "pznet_layout"),
    ("PZnet per-layer Conv3D throughput vs onnxruntime and TensorFlow",
     "18_3d_inference.ipynb", "pznet_layers"),
    ("PZnet 3-D U-Net vs onnxruntime and TensorFlow (>3.5x claim)", "18_3d_inference.ipynb",
     "pznet_unet"),
]
SMOKE_SUFFIX = "_smoke"
VALUE_CHARS = 600  # longer values are cut in REPORT.md's table of every figure


def topic_figures(manifest: dict, notebook: str, figure: str | None) -> list[str]:
    """Names of the manifest's figures that answer one of ``TOPICS``."""
    out = []
    for name, entry in sorted(manifest.get("figures", {}).items()):
        if figure is not None:
            if name.removesuffix(SMOKE_SUFFIX) == figure:
                out.append(name)
        elif entry.get("notebook") == notebook:
            out.append(name)
    return out


def _links(entry: dict, link) -> str:
    targets = ((f.rsplit(".", 1)[1], link(f)) for f in entry.get("files", []))
    return " ".join(f"[{kind}]({target})" for kind, target in targets if target)


def report_markdown(manifest: dict, link=lambda file: file) -> str:
    """The text of REPORT.md: the papers' numbers beside ours, per topic and per figure, and
    each notebook's run time. ``link(file)`` gives the link target of a figure's file (None:
    no link); by default the file name, as beside the manifest."""
    versions = manifest.get("versions", {})
    figures = manifest.get("figures", {})
    size = {True: "smoke (`SMOKE=1`: small sizes, not the papers' settings)",
            False: "full (`SMOKE=0`)"}.get(manifest.get("smoke"), "unknown")
    lines = [
        "# Papers' claims and our measurements",
        "",
        "Generated by `make figures` (`python -m mlsys_workbench.figures`); do not edit.",
        f"Size: {size}.",
        f"Machine: {_cell(manifest.get('machine'))}. Versions: {_cell(versions)}."
        + (f" Finished: {manifest['finished']}." if manifest.get("finished") else ""),
        "",
        "*Ours* is deterministic: a second run gives the same values. *Wall-clock* columns are "
        "times measured on this machine and vary from run to run.",
        "",
        "## Side by side",
        "",
        "| topic | paper | ours | wall-clock | figure |",
        "|---|---|---|---|---|",
    ]
    for topic, notebook, figure in TOPICS:
        names = topic_figures(manifest, notebook, figure)
        if not names:
            why = "failed in this run" if notebook in manifest.get("failed", {}) else \
                "not in this run"
            lines.append(f"| {topic} | | {why} (`{notebook}`) | | |")
        for name in names:
            e = figures[name]
            ours = e.get("summary") or e.get("value")
            lines.append(f"| {topic} | {_cell(e.get('claim'))} | {_cell(ours)} | "
                         f"{_cell(e.get('timings'))} | {name} {_links(e, link)} |")
    if manifest.get("failed"):
        lines += ["", "## Notebooks that failed", ""]
        for notebook, error in sorted(manifest["failed"].items()):
            head = " ".join(error.split())[:300]
            lines.append(f"- `{notebook}`: {head.replace('|', '/')}")
    lines += [
        "",
        "## Every figure",
        "",
        "| figure | notebook | paper | ours | wall-clock | parameters | seed |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, entry in sorted(figures.items()):
        value = _cell(entry.get("value"))
        if len(value) > VALUE_CHARS:  # a per-op table: the whole of it is in manifest.json
            value = value[:VALUE_CHARS].rsplit(", ", 1)[0] + ", ... (all in manifest.json)"
        lines.append(f"| {name} {_links(entry, link)} | {_cell(entry.get('notebook'))} | "
                     f"{_cell(entry.get('claim'))} | {value} | "
                     f"{_cell(entry.get('timings'))} | "
                     f"{_cell(entry.get('params'))} | {_cell(entry.get('seed'))} |")
    seconds = manifest.get("notebook_seconds", {})
    if seconds:
        lines += ["", "## Notebook run times", "",
                  "Wall clock of each figure notebook in this run, kernel start included.", "",
                  "| notebook | minutes |", "|---|---|"]
        lines += [f"| `{name}` | {s / 60:.1f} |" for name, s in sorted(seconds.items())]
        lines.append(f"| all | {sum(seconds.values()) / 60:.0f} |")
    return "\n".join(lines) + "\n"


def write_report(manifest: dict, out_dir: Path) -> Path:
    """``out_dir``/REPORT.md from ``report_markdown``, its links to the files beside it."""
    path = out_dir / "REPORT.md"
    path.write_text(report_markdown(manifest))
    return path


class FiguresError(RuntimeError):
    """Figure notebooks failed; the others ran and their figures and the report were written."""


def _selected(notebook: str | None, wanted: Iterable[str]) -> bool:
    """Whether ``notebook`` (a file name) is one of ``wanted`` (names or number prefixes)."""
    return notebook is not None and any(
        notebook == w or notebook.startswith(f"{w}_") for w in wanted)


def make_figures(out_dir: str | os.PathLike, smoke: bool = False,
                 notebooks: list[Path] | None = None, only: Iterable[str] | None = None) -> dict:
    """Run every figure notebook into ``out_dir``; return the manifest.

    ``only`` (notebook file names or their number prefixes, e.g. ``["12", "14"]``) reruns just
    those figure notebooks: their old entries are replaced, the other notebooks' kept.  Without
    it the manifest starts afresh.  ``manifest["notebook_seconds"]`` is each notebook's
    wall-clock run time.
    """
    check_out_folder(out_dir)
    notebooks = figure_notebooks() if notebooks is None else list(notebooks)
    if only is not None:
        wanted = [str(w) for w in only]
        unknown = [w for w in wanted if not any(_selected(p.name, [w]) for p in notebooks)]
        if unknown:  # before the output folder is made or touched
            raise ValueError(f"--only: not figure notebooks: {unknown}; figure notebooks are "
                             f"{[p.name for p in notebooks]}")
    out = figures_dir(out_dir).resolve()
    if only is not None:
        chosen = [p for p in notebooks if _selected(p.name, wanted)]
        manifest = read_manifest(out)
        manifest["figures"] = {n: e for n, e in manifest["figures"].items()
                               if e.get("notebook") not in {p.name for p in chosen}}
        if manifest.get("smoke", smoke) != smoke:
            raise ValueError("the manifest in the output folder is from a run of another size")
        _write_manifest(out, manifest)
        notebooks = chosen
    else:
        (out / MANIFEST).unlink(missing_ok=True)
        for stale in (out / EXECUTED).glob("*.ipynb"):  # all ours: check_out_folder saw to it
            stale.unlink()
    # A failing notebook does not stop the others (a full run takes long): its error is
    # recorded, the report written, and FiguresError raised at the end.
    seconds, failed = {}, {}
    for path in notebooks:
        print(f"running {path.name} (SMOKE={int(smoke)})", flush=True)
        start = time.perf_counter()
        try:
            nb = run_notebook(path, parameters={"SMOKE": int(smoke)}, timeout=3600,
                              env={FIGURES_ENV: str(out), "MLSYS_NOTEBOOK": path.name})
        except NotebookError as error:
            failed[path.name] = str(error)
            print(f"  {path.name} FAILED:\n{error}", flush=True)
            continue
        seconds[path.name] = round(time.perf_counter() - start, 1)
        _save_executed(nb, out, path.name)
        print(f"  {path.name}: {seconds[path.name]} s", flush=True)
    ran = {path.name for path in notebooks}
    manifest = read_manifest(out)
    manifest["notebooks"] = sorted((set(manifest.get("notebooks", [])) - ran) | set(seconds))
    manifest["notebook_seconds"] = manifest.get("notebook_seconds", {}) | seconds
    manifest["failed"] = {n: e for n, e in manifest.get("failed", {}).items()
                          if n not in ran} | failed
    manifest["smoke"] = smoke
    manifest["versions"], manifest["machine"] = library_versions(), machine()
    manifest["finished"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    _write_manifest(out, manifest)
    write_report(manifest, out)
    if failed:
        raise FiguresError(f"{len(failed)} figure notebook(s) failed: {', '.join(failed)}; "
                           f"the other figures are in {out}")
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mlsys_workbench.figures",
                                     description="Rerun the paper-figure notebooks.")
    parser.add_argument("--out", default="figures", help="output folder (default: figures)")
    parser.add_argument("--smoke", action="store_true", help="small sizes, for tests")
    parser.add_argument("--only", default="",
                        help="comma-separated figure notebooks to rerun (names or number "
                             "prefixes, e.g. 12,14); the others' entries are kept")
    parser.add_argument("--compare", metavar="MANIFEST",
                        help="after the run, list the non-timing differences from this "
                             "manifest.json (exit status 1 if any)")
    args = parser.parse_args(argv)
    only = [w.strip() for w in args.only.split(",") if w.strip()] or None
    try:
        # Read before any notebook runs (make_figures checks --out and --only first, too).
        other = read_compare(args.compare) if args.compare else None
        manifest = make_figures(args.out, smoke=args.smoke, only=only)
    except (FiguresError, ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    count = len(manifest["figures"])
    print(f"{count} figures from {len(manifest['notebooks'])} notebooks in {args.out}/")
    if other is not None:
        names = None
        if only is not None:  # only the figures of the notebooks just run
            names = [n for n, e in manifest["figures"].items()
                     if _selected(e.get("notebook"), only)]
        diffs = compare_manifests(other, manifest, figures=names)
        print("\n".join(diffs) if diffs else f"same values as {args.compare} "
              "(wall-clock timings aside)")
        return 1 if diffs else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
