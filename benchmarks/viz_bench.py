"""How long the ResNet-50 training graph takes to draw: figure build in Python, first render in
headless Chromium, for the graph folded by name scope and for all ~9,000 ops.

    .venv/bin/python benchmarks/viz_bench.py [--model resnet50|small_resnet] [--repeat 3]

Build = graph_view / collapse / layered layout / plotly traces (best of --repeat). First render =
from navigation to the end of Plotly.newPlot for the figure saved as self-contained HTML (4 MB
of plotly.js parsed included), in Debian's Chromium with software WebGL (--disable-gpu), best of
--repeat fresh pages. Writes benchmarks/results/viz_bench.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
REPO = Path(__file__).resolve().parents[1]

from compilerkit.measure.timing import best_of  # noqa: E402
from mlsys_viz.export import CHROMIUM_ARGS, find_chromium  # noqa: E402 (after the env)

# Plotly.newPlot(...).then(post_script): the moment the figure is drawn.
MARK = "window.__drawn = performance.now();"


def capture(model_name: str):
    import keras
    import mlsys_datasets as zoo
    import tensorflow as tf

    import lmskit

    if model_name == "resnet50":
        model, shape = zoo.resnet50(), (224, 224, 3)
    else:
        model, shape = zoo.small_resnet(), (32, 32, 3)
    t0 = time.perf_counter()
    graph = lmskit.capture(model, keras.losses.SparseCategoricalCrossentropy(),
                           keras.optimizers.SGD(0.01, momentum=0.9),
                           (tf.TensorSpec((None, *shape)), tf.TensorSpec((None,), tf.int32)))
    return graph, time.perf_counter() - t0


def builds(graph):
    """name -> function building that figure from scratch (conversion included)."""
    import mlsys_viz as viz
    from lmskit import views

    def collapsed():
        nodes, edges = views.graph_view(graph, 32)
        return viz.ScopeExplorer(nodes, edges, depth=1, title="step").figure()

    def opened():  # the model's forward scope opened one level, as a user would first do
        nodes, edges = views.graph_view(graph, 32)
        explorer = viz.ScopeExplorer(nodes, edges, depth=1, title="step")
        folded, _ = explorer.view()
        model = max((n for n in folded if n.get("cluster") and not n.get("aside")
                     and n["id"] != "gradient_tape"), key=lambda n: n["size"])["id"]
        explorer.figure()
        return explorer.figure(expand=[model])

    def phase_layer():
        nodes, edges = views.collapsed_view(graph, depth=2, batch_size=32)
        return viz.graph_figure(nodes, edges)

    def full():
        nodes, edges = views.graph_view(graph, 32)
        return viz.graph_figure(nodes, edges)

    def full_inline():
        nodes, edges = views.graph_view(graph, 32)
        return viz.graph_figure(nodes, edges, aside="inline")

    return {"collapsed by scope": collapsed, "model scope opened": opened,
            "collapsed by (phase, layer)": phase_layer,
            "full, constants and reads aside": full, "full, everything layered": full_inline}


def time_build(fn, repeat):
    """(best wall seconds of `repeat` builds, no warm-up: the first build is a build too, the
    last figure built)."""
    figs = []
    best = best_of(lambda: figs.append(fn()), repeat, "wall", warmup=False)
    return best, figs[-1]


def time_render(browser, path: Path, repeat: int) -> float:
    """Best first render of `repeat` fresh pages, on the page's own clock (performance.now()
    from navigation to the end of Plotly.newPlot): the browser times it, not Python."""
    best = float("inf")
    for _ in range(repeat):
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(path.as_uri(), wait_until="commit")
        page.wait_for_function("() => window.__drawn !== undefined", timeout=180_000)
        best = min(best, page.evaluate("() => window.__drawn") / 1000)
        page.close()
    return best


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50", choices=["resnet50", "small_resnet"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=str(REPO / "benchmarks/results/viz_bench.json"))
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    graph, capture_s = capture(args.model)
    rows = []
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=find_chromium(), headless=True,
                                     args=CHROMIUM_ARGS)
        for name, fn in builds(graph).items():
            build_s, fig = time_build(fn, args.repeat)
            path = Path(tmp) / "fig.html"
            fig.write_html(path, include_plotlyjs=True, post_script=MARK)
            render_s = time_render(browser, path, args.repeat)
            points = sum(len(t.x or ()) for t in fig.data if "markers" in (t.mode or ""))
            rows.append({"figure": name, "nodes": fig.layout.meta["nodes"],
                         "edges": fig.layout.meta["edges"], "marker points": points,
                         "webgl": any(t.type == "scattergl" for t in fig.data),
                         "build_s": round(build_s, 3), "first_render_s": round(render_s, 3),
                         "html_MB": round(path.stat().st_size / 1e6, 2)})
            print(f"  {name}: build {build_s:.2f} s, render {render_s:.2f} s", flush=True)
        browser.close()
    result = {"model": args.model, "ops": len(graph.ops), "capture_s": round(capture_s, 2),
              "repeat": args.repeat, "chromium_flags": CHROMIUM_ARGS,
              "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
              "rows": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    head = ["figure", "nodes", "edges", "webgl", "build_s", "first_render_s", "html_MB"]
    widths = [max(len(h), *(len(str(r[h])) for r in rows)) for h in head]
    print(f"{args.model}: {len(graph.ops)} ops, captured in {capture_s:.1f} s")
    print("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)))
    for r in rows:
        print("  ".join(str(r[h]).ljust(w) for h, w in zip(head, widths, strict=True)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
