"""lmskit.views: plain-data views of graphs, lifetimes and studies, on graphs worked out by hand."""

from lmskit_graphs import CHAIN_WITH_UPDATE as CHAIN
from lmskit_graphs import build

import lmskit
from lmskit import views
from lmskit.rules import common


def test_graph_view_nodes_edges_and_groups():
    g = build(CHAIN)
    nodes, edges = views.graph_view(g, batch_size=2)
    groups = {n["id"]: n["group"] for n in nodes}
    assert groups == {"x": "input", "a": "forward", "b": "forward", "loss": "forward",
                      "gradient_tape/gb": "backward", "gradient_tape/ga": "backward",
                      "sgd/u": "update"}
    pairs = {(e["source"], e["target"]) for e in edges}
    assert ("a", "gradient_tape/ga") in pairs and len(edges) == 8
    hover = next(e["hover"] for e in edges if e["source"] == "b" and e["target"] == "loss")
    assert "[2, 8]" in hover and "64 B" in hover
    # Dropping a type drops its node and its edges; keep overrides.
    nodes, edges = views.graph_view(g, drop_types=("Placeholder",))
    assert "x" not in {n["id"] for n in nodes} and all(e["source"] != "x" for e in edges)
    nodes, _ = views.graph_view(g, drop_types=("Placeholder",), keep=("x",))
    assert "x" in {n["id"] for n in nodes}


def test_swaps_show_as_their_own_groups_with_trigger_edges_highlighted():
    g = build(CHAIN)
    r = g.copy()
    common.insert_swap(r, "a:0", ["gradient_tape/ga"], "gradient_tape/gb")
    nodes, edges = views.graph_view(r)
    groups = {n["id"]: n["group"] for n in nodes}
    assert groups["lms/swapout/a_0"] == "swap-out" and groups["lms/swapin/a_0/0"] == "swap-in"
    assert {"source": "gradient_tape/gb", "target": "lms/swapin/a_0/0", "kind": "control",
            "hover": "gradient_tape/gb runs before lms/swapin/a_0/0"} in edges
    assert set(views.rewrite_highlight(r)) == {"lms/swapout/a_0", "a", "lms/swapin/a_0/0",
                                               "gradient_tape/gb", "gradient_tape/ga"}
    (lead,) = views.swapin_leads(r)
    assert lead["trigger"] == "gradient_tape/gb" and lead["reader"] == "gradient_tape/ga"
    assert lead["lead"] == 1


def test_collapsed_view_pairs_forward_and_backward_halves_of_a_layer():
    rows = [("x", "Placeholder", [], "forward", ("B", 4)),
            ("m/l1/op1", "Relu", ["x"], "forward", ("B", 4)),
            ("m/l1/op2", "Relu", ["m/l1/op1"], "forward", ("B", 4)),
            ("gradient_tape/m/l1/g1", "Mul", ["m/l1/op2"], "backward", ("B", 4)),
            ("gradient_tape/m/l1/g2", "Mul", ["gradient_tape/m/l1/g1", "m/l1/op1"], "backward",
             ("B", 4))]
    g = build(rows)
    assert views.layer_of("gradient_tape/m/l1/g1") == views.layer_of("m/l1/op1") == "m/l1"
    nodes, edges = views.collapsed_view(g, depth=2)
    ids = {n["id"] for n in nodes}
    assert ids == {"input · (top level)", "forward · m.l1", "backward · m.l1"}
    assert {(e["source"], e["target"]) for e in edges} == {
        ("input · (top level)", "forward · m.l1"), ("forward · m.l1", "backward · m.l1")}


def test_tables_of_phases_tensors_and_bytes_by_batch():
    g = build(CHAIN)
    phases = {r["phase"]: r for r in views.phase_counts(g)}
    assert phases["forward"]["ops"] == 4 and phases["backward"]["under gradient_tape/"] == 2
    top = views.tensor_table(g, batch_size=3)[0]
    assert top["symbolic shape"] == "[b, 8]" and top["bytes"] == 3 * 8 * 4
    rows = views.bytes_by_batch(g, [1, 10])
    # activations a (4) and b (8) floats per sample; the update's output is batch independent.
    assert rows[0]["activation"] == 48 + 4 and rows[1]["activation"] == 480 + 4
    text = views.table(rows)
    assert "activation" in text.splitlines()[0] and "484 B" in text   # bytes shown human


def test_intervals_live_at_peak_and_peak_by_batch():
    g = build(CHAIN[:6])
    lt = lmskit.lifetimes(g, 2)
    spans = {i["name"]: (i["start"], i["end"], i["bytes"], i["kind"])
             for i in views.intervals(lt, g)}
    assert spans["a:0"] == (1, 5, 32, "activation") and spans["b:0"] == (2, 4, 64, "activation")
    rows = views.live_at_peak(lt, g)
    assert [r["name"] for r in rows[:2]] == ["b", "gradient_tape/gb"]
    assert sum(r["bytes"] for r in rows) == lt.peak == 164
    peaks = views.peak_by_batch(g, [2, 4])
    assert [p["peak"] for p in peaks] == [164, 2 * 164 - 4]


def test_host_spans_of_swapped_tensors():
    g = build(CHAIN[:6])
    r = g.copy()
    common.insert_swap(r, "a:0", ["gradient_tape/ga"], "gradient_tape/gb")
    items = {i["name"]: i for i in views.intervals(lmskit.lifetimes(r, 2), r)}
    (span,) = items["a:0"]["host"]
    assert span[0] <= span[1]
    assert "lms/swapin/a_0/0:0" in items


def test_studies_return_one_row_per_simulation():
    g = build(CHAIN[:6], fetches=["gradient_tape/ga:0"])
    rows = views.max_batches(g, "p100-16gb", ["none"], budget=10_000)
    assert rows[0]["max batch"] == lmskit.max_batch_size(g, "p100-16gb", "none", budget=10_000)
    assert rows[0]["ratio"] == 1.0
    grid = views.sweep_v2(g, "p100-16gb", 2, [0, 1], [1], [0, 1])
    assert len(grid) == 4 and all("comm_s" in r for r in grid)
    gain = views.tuning_gain(grid, grid[0])
    assert gain["best"]["fits"] and gain["comm_cut"] <= 1
    sides = views.largest_side(lambda s: g, [1, 2], "p100-16gb", ["none"])
    assert [r["side"] for r in sides] == [1, 2] and sides[0]["none"] is True


def test_a_real_lifetimes_figure_saves_as_html_and_png(tmp_path):
    from mlsys_viz import lifetimes_and_memory
    from mlsys_workbench.figures import save_figure

    g = build([("x", "Placeholder", [], "forward", ("B", 64)),
               ("a", "Relu", ["x"], "forward", ("B", 64)),
               ("b", "Tanh", ["a"], "forward", ("B", 64)),
               ("gradient_tape/gb", "Mul", ["b", "b"], "backward", ("B", 64)),
               ("gradient_tape/ga", "Mul", ["gradient_tape/gb", "a"], "backward", ("B", 64))])
    common.insert_swap(g, "a:0", ["gradient_tape/ga"], "gradient_tape/gb")
    lt = lmskit.lifetimes(g, 8)
    fig = lifetimes_and_memory(views.intervals(lt, g), lt.device_bytes.tolist(),
                               lt.host_bytes.tolist(), live_at_peak=views.live_at_peak(lt, g))
    entry = save_figure(fig, "lifetimes", out_dir=tmp_path)
    assert entry["files"] == ["lifetimes.html", "lifetimes.png"]
    html = (tmp_path / "lifetimes.html").read_text()
    assert "<script src=\"http" not in html and "on host" in html
    png = (tmp_path / "lifetimes.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_rewrite_views_and_step_series():
    g = build(CHAIN[:6], fetches=["gradient_tape/ga:0"])
    r = g.copy()
    common.insert_swap(r, "a:0", ["gradient_tape/ga"], "gradient_tape/gb")
    (bn, be), (an, ae), lit = views.rewrite_views(g, r, 2, drop_types=("Placeholder",))
    assert {n["id"] for n in an} - {n["id"] for n in bn} == {"lms/swapout/a_0",
                                                             "lms/swapin/a_0/0"}
    assert {"source": "gradient_tape/gb", "target": "lms/swapin/a_0/0", "kind": "control",
            "hover": "gradient_tape/gb runs before lms/swapin/a_0/0"} in ae
    assert "x" not in {n["id"] for n in bn} and set(lit) >= {"a", "gradient_tape/gb"}
    lt = lmskit.lifetimes(r, 2)
    sim = lmskit.simulate(r, "p100-16gb", 2, timeline=True)
    run = views.step_series(lt, sim, r)
    assert run["x"] == sorted(run["x"]) and run["x"][-1] <= sim.step_time
    assert run["device"] == lt.device_bytes.tolist() and max(run["host"]) > 0
    assert sum(t["bytes"] for t in run["peak_tensors"]) == lt.peak
    assert views.step_series(lt)["x"] == list(range(len(lt.order)))
    from lmskit import figures

    fig = figures.with_and_without(g, r, "p100-16gb", 2)
    assert len([t for t in fig.data if t.name == "device bytes"]) == 2
    fig = figures.swap_rewrite(g, r, 2)
    assert fig.layout.meta["inserted"] == 2


def test_constants_and_variable_reads_are_marked_aside():
    g = build([("c", "Const", [], "forward", (4,)),
               ("x", "Placeholder", [], "forward", ("B", 4)),
               ("a", "Mul", ["x", "c"], "forward", ("B", 4))])
    nodes, _ = views.graph_view(g)
    assert {n["id"]: n["aside"] for n in nodes} == {"c": True, "x": False, "a": False}
