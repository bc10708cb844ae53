"""TFLMS v1 and v2 rules on a hand-built chain whose answers are worked out by hand, the checker
on broken rewrites, and option validation."""

import pytest
from lmskit_graphs import build, interpret

import lmskit
from lmskit.rules import RewriteError, check, common, v1, v2

# Forward chain x -> f1 -> f2 -> f3 -> f4 -> loss, backward g4 .. g0 reading the activations.
# Levels: x 0, f1 1, f2 2, f3 3, f4 4, loss 5, g4 6, g3 7, g2 8, g1 9, g0 10.
B = "gradient_tape/"
CHAIN = [
    ("x", "Placeholder", [], "forward", ("B", 8)),
    ("f1", "Conv2D", ["x"], "forward", ("B", 8)),
    ("f2", "Relu", ["f1"], "forward", ("B", 8)),
    ("f3", "Conv2D", ["f2"], "forward", ("B", 8)),
    ("f4", "Relu", ["f3"], "forward", ("B", 8)),
    ("loss", "Sum", ["f4"], "forward", ()),
    (B + "g4", "ReluGrad", ["loss", "f4"], "backward", ("B", 8)),
    (B + "g3", "Conv2DBackpropInput", [B + "g4", "f3"], "backward", ("B", 8)),
    (B + "g2", "ReluGrad", [B + "g3", "f2"], "backward", ("B", 8)),
    (B + "g1", "Conv2DBackpropInput", [B + "g2", "f1"], "backward", ("B", 8)),
    (B + "g0", "Conv2DBackpropInput", [B + "g1", "x"], "backward", ("B", 8)),
]


def chain():
    return build(CHAIN, loss="loss:0")


def swaps(g):
    """{swapped tensor: [(consumers, trigger)]} read back from the rewritten graph."""
    out = {}
    for op in g.ops.values():
        if op.attrs.get("swap") == "in":
            cons = sorted(c.name for c in g.consumers(op.outputs[0]))
            out.setdefault(op.attrs["swap_of"], []).append((cons, op.control_inputs[0]))
    return out


def test_v1_defaults_chain_rule_takes_the_op_right_before_the_consumer():
    r = lmskit.swap(chain())
    assert swaps(r) == {"f1:0": [([B + "g1"], B + "g2")], "f2:0": [([B + "g2"], B + "g3")],
                        "f3:0": [([B + "g3"], B + "g4")]}
    # f4's backward consumer g4 has no backward op upstream of it: no trigger, not swapped.
    # x is a Placeholder, an atomic type.


def test_v1_chain_rule_lower_bound():
    # lb=2: two hops up from g1 is g3; from g2 is g4; g3's two-hop ancestors are all forward.
    r = lmskit.swap(chain(), lb=2)
    assert swaps(r) == {"f1:0": [([B + "g1"], B + "g3")], "f2:0": [([B + "g2"], B + "g4")]}


def test_v1_direct_order_scans_levels():
    r = lmskit.swap(chain(), ctrld_strategy="direct_order", lb=3)
    # consumer g1 at level 9: level 6 holds g4, an ancestor; g2 (level 8): level 5 is loss.
    got = swaps(r)
    assert got["f1:0"] == [([B + "g1"], B + "g4")]
    assert got["f2:0"] == [([B + "g2"], "loss")]
    # ub=2 with lb=3: the window is empty.
    assert swaps(lmskit.swap(chain(), ctrld_strategy="direct_order", lb=3, ub=2)) == {}


def test_v1_n_tensors_filters_and_starting_point():
    assert list(swaps(lmskit.swap(chain(), n_tensors=1))) == ["f1:0"]
    assert swaps(lmskit.swap(chain(), n_tensors=0)) == {}
    assert list(swaps(lmskit.swap(chain(), excl_types=["Relu"]))) == ["f1:0", "f3:0"]
    assert list(swaps(lmskit.swap(chain(), incl_types=["Relu"]))) == ["f2:0"]
    assert list(swaps(lmskit.swap(chain(), incl_types="Relu"))) == ["f2:0"]
    assert list(swaps(lmskit.swap(chain(), excl_scopes=["f1", "f3"]))) == ["f2:0"]
    assert list(swaps(lmskit.swap(chain(), starting_op_names=["f3"]))) == ["f3:0"]


def test_v1_fuse_swapins_shares_one_copy():
    rows = CHAIN + [(B + "extra", "Mul", [B + "g1", "f1"], "backward", ("B", 8))]
    g = build(rows, loss="loss:0")
    plain = swaps(lmskit.swap(g))["f1:0"]
    fused = swaps(lmskit.swap(g, fuse_swapins=True))["f1:0"]
    assert len(plain) == 2
    assert fused == [([B + "extra", B + "g1"], B + "g2")]


def test_v1_swap_branches_catches_skip_connections():
    rows = CHAIN[:5] + [("join", "AddV2", ["f4", "f1"], "forward", ("B", 8)),
                        ("loss", "Sum", ["join"], "forward", ())] + CHAIN[6:]
    g = build(rows, loss="loss:0")
    assert "f1:0" in swaps(lmskit.swap(g))
    far = swaps(lmskit.swap(g, swap_branches=True, branch_threshold=2))["f1:0"]
    assert (["join"], "f4") in far           # f4 is the op right before join
    near = swaps(lmskit.swap(g, swap_branches=True, branch_threshold=5))["f1:0"]
    assert all(c != ["join"] for c, _ in near)


def test_v2_threshold_ahead_groupby():
    r = lmskit.swap(chain(), swapout_threshold=3, swapin_ahead=2, swapin_groupby=0)
    # distances: x->g0 10, f1->g1 8, f2->g2 6, f3->g3 4, f4->g4 2 (kept); forward reads 1.
    # trigger two levels before the consumer: g0@10->g2, g1@9->g3, g2@8->g4, g3@7->loss.
    assert swaps(r) == {"x:0": [([B + "g0"], B + "g2")], "f1:0": [([B + "g1"], B + "g3")],
                        "f2:0": [([B + "g2"], B + "g4")], "f3:0": [([B + "g3"], "loss")]}
    # swapin_ahead larger than the distance: never above the producer's level + 1.
    r = lmskit.swap(chain(), swapout_threshold=3, swapin_ahead=50, swapin_groupby=0)
    assert swaps(r)["f3:0"] == [([B + "g3"], "f4")]


def test_v2_groupby_merges_near_consumers():
    rows = CHAIN + [(B + "extra", "Mul", [B + "g0", "f1"], "backward", ("B", 8))]
    g = build(rows, loss="loss:0")
    split = swaps(lmskit.swap(g, swapout_threshold=3, swapin_ahead=1, swapin_groupby=0))
    merged = swaps(lmskit.swap(g, swapout_threshold=3, swapin_ahead=1, swapin_groupby=2))
    assert len(split["f1:0"]) == 2 and len(merged["f1:0"]) == 1
    assert merged["f1:0"][0][0] == [B + "extra", B + "g1"]


def test_v2_sync_mode_and_serialization_add_only_safe_edges():
    g = chain()
    r = lmskit.swap(g, swapout_threshold=3, swapin_ahead=2, swapin_groupby=0, sync_mode=3)
    so = "lms/swapout/f1_0"
    assert so in r.ops["f2"].control_inputs          # f2 waits for f1's copy out
    si = next(n for n, op in r.ops.items()
              if op.attrs.get("swap") == "in" and op.attrs["swap_of"] == "f1:0")
    trig = r.ops[si].control_inputs[0]               # g3; its reader g2 waits for the copy in
    assert si in r.ops[B + "g2"].control_inputs and trig == B + "g3"
    par = build([("s", "Placeholder", [], "forward", ("B", 2)),
                 ("p", "Neg", ["s"], "forward", ("B", 2)),
                 ("q", "Neg", ["s"], "forward", ("B", 2))])
    r = lmskit.swap(par, swapout_threshold=1, swapin_ahead=1, swapin_groupby=0,
                    serialization=[1])
    assert r.ops["q"].control_inputs == ["p"]


def test_rewrites_keep_values(tmp_path):
    g = chain()
    for opts in [{}, dict(fuse_swapins=True), dict(ctrld_strategy="direct_order"),
                 dict(swapout_threshold=1, swapin_ahead=1, swapin_groupby=1, sync_mode=3)]:
        r = lmskit.swap(g, **opts)
        before, after = interpret(g), interpret(r)
        assert all(before[t] == after[t] for t in before)


def test_rules_can_be_applied_one_at_a_time():
    g = chain()
    walked = v1.forward_walk(g)
    cands = v1.swap_candidates(g, walked)
    assert cands == ["f1:0", "f2:0", "f3:0", "f4:0"]
    assert v1.backward_consumers(g, "f2:0") == [B + "g2"]
    assert v1.chain_rule_trigger(g, "f2", B + "g2", 1, 10000) == B + "g3"
    r = g.copy()
    common.insert_swap(r, "f2:0", [B + "g2"], B + "g3")
    assert check(g, r)
    assert v2.far_consumers(g, "f2:0", 3) == [B + "g2"]


def test_checker_rejects_broken_rewrites():
    g = chain()
    lost = g.copy()
    del lost.ops["f4"]
    with pytest.raises(RewriteError, match="lost"):
        check(g, lost)
    rewired = g.copy()
    rewired.ops[B + "g2"].inputs = [B + "g3:0", "f1:0"]
    with pytest.raises(RewriteError, match="not a copy"):
        check(g, rewired)
    cyclic = g.copy()
    common.insert_swap(cyclic, "f2:0", [B + "g2"], B + "g1")   # g1 comes after g2
    with pytest.raises(RewriteError, match="cycle"):
        check(g, cyclic)
    misplaced = g.copy()
    common.insert_swap(misplaced, "f2:0", [B + "g2"], B + "g3")
    misplaced.ops["lms/swapout/f2_0"].device = "device"
    with pytest.raises(RewriteError, match="placed"):
        check(g, misplaced)
    stray = g.copy()
    stray.ops["f3"].inputs = ["x:0"]
    with pytest.raises(RewriteError):
        check(g, stray)


def test_unknown_and_mixed_options_are_clear_errors():
    with pytest.raises(TypeError, match="unknown swap option 'n_tensor'.*did you mean 'n_tensors'"):
        lmskit.swap(chain(), n_tensor=3)
    with pytest.raises(TypeError, match="v1 and .* v2"):
        lmskit.swap(chain(), lb=2, swapout_threshold=3)
    with pytest.raises(ValueError, match="ctrld_strategy"):
        lmskit.swap(chain(), ctrld_strategy="greedy")
    with pytest.raises(TypeError, match="auto"):
        lmskit.swap(chain(), swapout_threshold=-1)


def test_input_graph_is_not_modified():
    g = chain()
    before = {n: (list(op.inputs), list(op.control_inputs)) for n, op in g.ops.items()}
    lmskit.swap(g, sync_mode=3, swapout_threshold=1, swapin_ahead=1, swapin_groupby=0)
    assert before == {n: (list(op.inputs), list(op.control_inputs)) for n, op in g.ops.items()}
