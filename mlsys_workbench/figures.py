"""Paper figures: save them from notebooks, and rerun the figure notebooks (``make figures``).

A figure notebook carries ``{"mlsys": {"figures": true}}`` in its notebook metadata and calls
``save_figure`` for each figure it wants in the report.  ``make figures`` runs every such notebook
at full size (``SMOKE=0``) with ``MLSYS_FIGURES_DIR`` pointing at the output folder; each call
writes ``NAME.html`` (self-contained, plotly.js inlined: it opens offline) and ``NAME.png``
(kaleido driving the system Chromium: nothing is downloaded) and records the figure in
``manifest.json``: the paper's claim, our value, the parameters and seed, library versions and
the machine, so two runs can be compared.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from importlib import metadata
from pathlib import Path

import nbformat

from .notebooks import run_notebook

FIGURES_ENV = "MLSYS_FIGURES_DIR"
MANIFEST = "manifest.json"
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


def save_figure(fig, name: str, *, claim: str | None = None, value=None,
                params: dict | None = None, seed: int | None = None,
                out_dir: str | os.PathLike | None = None, png: bool = True) -> dict:
    """Write ``fig`` as NAME.html and NAME.png and record it in the manifest; return the entry.

    ``claim`` is what the paper reports, ``value`` what we measured (a number, string or a small
    dict), ``params`` the settings that produced it.
    """
    if not name or not all(c.isalnum() or c in "-_" for c in name):
        raise ValueError(f"figure name {name!r}: use letters, digits, '-' and '_' only")
    out = figures_dir(out_dir)
    files = [f"{name}.html"]
    fig.write_html(out / files[0], include_plotlyjs=True, full_html=True)
    if png:
        fig.write_image(out / f"{name}.png", width=1100, height=650)
        files.append(f"{name}.png")
    entry = {"claim": claim, "value": value, "params": params or {}, "seed": seed,
             "files": files, "notebook": os.environ.get("MLSYS_NOTEBOOK")}
    manifest = read_manifest(out)
    manifest["figures"][name] = entry
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True, default=str))
    return entry


def figure_notebooks(folder: Path = REPO / "notebooks") -> list[Path]:
    """Notebooks whose metadata marks them as producing paper figures."""
    return [
        path for path in sorted(folder.glob("*.ipynb"))
        if nbformat.read(path, as_version=4).metadata.get("mlsys", {}).get("figures")
    ]


def make_figures(out_dir: str | os.PathLike, smoke: bool = False,
                 notebooks: list[Path] | None = None) -> dict:
    """Run every figure notebook into ``out_dir``; return the manifest."""
    out = figures_dir(out_dir).resolve()
    (out / MANIFEST).unlink(missing_ok=True)
    notebooks = figure_notebooks() if notebooks is None else notebooks
    for path in notebooks:
        print(f"running {path.name} (SMOKE={int(smoke)})", flush=True)
        run_notebook(path, parameters={"SMOKE": int(smoke)}, timeout=3600,
                     env={FIGURES_ENV: str(out), "MLSYS_NOTEBOOK": path.name})
    manifest = read_manifest(out)
    manifest["notebooks"] = [path.name for path in notebooks]
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True, default=str))
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mlsys_workbench.figures",
                                     description="Rerun the paper-figure notebooks.")
    parser.add_argument("--out", default="figures", help="output folder (default: figures)")
    parser.add_argument("--smoke", action="store_true", help="small sizes, for tests")
    args = parser.parse_args(argv)
    manifest = make_figures(args.out, smoke=args.smoke)
    count = len(manifest["figures"])
    print(f"{count} figures from {len(manifest['notebooks'])} notebooks in {args.out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
