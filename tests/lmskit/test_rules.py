"""TFLMS v1 and v2 rules on a hand-built chain whose answers are worked out by hand, the checker
on broken rewrites, and option validation."""

import pytest
from lmskit_graphs import build, interpret

import lmskit
from lmskit.rules import RewriteError, check, common, topos, v1, v2

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
    """{swapped tensor: [(consumers, trigger or None)]} read back from the rewritten graph."""
    out = {}
    for op in g.ops.values():
        if op.attrs.get("swap") == "in":
            cons = sorted(c.name for c in g.consumers(op.outputs[0]))
            trig = op.control_inputs[0] if op.control_inputs else None
            out.setdefault(op.attrs["swap_of"], []).append((cons, trig))
    return out


# TFLMS v1 orders of CHAIN (topos.py): seed x (it reaches every op that a backward op reads);
# x 0, f1 1, f2 2, f3 3, f4 4, loss 5, g4 6, g3 7, g2 8, g1 9, g0 10; backward starts at 6.
# No backward op shares a level with a forward op, so nothing is cleaned.


def test_v1_topos_orders_of_the_chain():
    topo = topos.for_graph(chain())
    assert topos.seed_ops(chain()) == ["x"]
    assert [topo.get(n) for n in ["x", "f1", "f4", "loss", B + "g4", B + "g0"]] == [0, 1, 4, 5,
                                                                                     6, 10]
    assert topo.bw_start == 6


def test_v1_defaults_chain_rule_takes_the_gradient_one_hop_ahead():
    r = lmskit.swap(chain())
    # f1 -> g1 (order 9): walk f1 -> f2 (hop 1 = lb); f2's backward reader g2 (order 8) lies
    # strictly between 1 and 9. Likewise f2 -> g3, f3 -> g4.
    # f4 -> g4 (order 6): 6 - lb = 5 is before the backward phase (6), so direct_order decides:
    # orders 6-1-1 = 4 down to max(6-10000, 4)+1 = 5: empty. Published v1 still inserts the
    # swap-in, with no control edge. x is a Placeholder (atomic), loss a scalar.
    assert swaps(r) == {"f1:0": [([B + "g1"], B + "g2")], "f2:0": [([B + "g2"], B + "g3")],
                        "f3:0": [([B + "g3"], B + "g4")], "f4:0": [([B + "g4"], None)]}


def test_v1_chain_rule_lower_bound():
    # lb=2: from f1 the walk reaches f3 at hop 2; f3's backward reader g3 (7) is in (1, 9).
    # f2: hop 2 is f4, reader g4 (6) in (2, 8).
    # f3 -> g3 (7): 7-2 = 5 < 6, so direct_order with lb=2: orders 7-2-1 = 4 down to 3+1 = 4,
    # i.e. level 4 = {f4}, which reaches g3 (f4 -> loss -> g4 -> g3): a forward trigger.
    # f4 -> g4 (6): 6-2 <= 4 so lb falls back to 1; as in the defaults, no trigger.
    r = lmskit.swap(chain(), lb=2)
    assert swaps(r) == {"f1:0": [([B + "g1"], B + "g3")], "f2:0": [([B + "g2"], B + "g4")],
                        "f3:0": [([B + "g3"], "f4")], "f4:0": [([B + "g4"], None)]}


def test_v1_direct_order_scans_levels():
    r = lmskit.swap(chain(), ctrld_strategy="direct_order", lb=3)
    got = swaps(r)
    # f1 -> g1 (9): orders 9-3-1 = 5 down to 2: loss (5) reaches g1.
    # f2 -> g2 (8): orders 4 down to 3: f4 (4). f3 -> g3 (7): orders 3 down to 4: empty.
    assert got["f1:0"] == [([B + "g1"], "loss")]
    assert got["f2:0"] == [([B + "g2"], "f4")]
    assert got["f3:0"] == [([B + "g3"], None)]
    # ub=2 with lb=3 is refused: lb must not exceed ub.
    with pytest.raises(ValueError, match=r"lb \(3\) must not exceed ub \(2\)"):
        lmskit.swap(chain(), ctrld_strategy="direct_order", lb=3, ub=2)
    # ub=4: f1 -> g1: orders 5 down to max(9-4, 1)+1 = 6: empty.
    assert swaps(lmskit.swap(chain(), ctrld_strategy="direct_order", lb=3, ub=4))["f1:0"] == [
        ([B + "g1"], None)]


# A backward op that reads only a forward tensor ("s1", like the shape arithmetic of a conv
# gradient) sits at plain level 2 beside f2, so v1 cleans it (order -1). g1 reads it.
# Orders: x 0, f1 1, f2 2, f3 3, f4 4, loss 5, g4 6, g3 7, g2 8, g1 9, g0 10; s1 -1.
SHAPE = CHAIN[:9] + [(B + "s1", "RealDiv", ["f1"], "backward", ("B", 8)),
                     (B + "g1", "Conv2DBackpropInput", [B + "s1", B + "g2", "f1"], "backward",
                      ("B", 8)),
                     CHAIN[10]]


def test_v1_cleaned_backward_ops_are_never_triggers():
    g = build(SHAPE, loss="loss:0")
    topo = topos.for_graph(g)
    assert topo.get(B + "s1") == -1 and topo.get(B + "g1") == 9
    got = swaps(lmskit.swap(g))
    # f1's backward readers: s1 (order -1) and g1 (9). For g1 the walk from f1 reaches f2 at
    # hop 1; f2's readers f3 (forward) and g2 (8, in (1, 9)): trigger g2. s1 is read by g1
    # already at hop 0 (f1's own reader) but hop 0 < lb, and its order -1 is not after f1's.
    assert got["f1:0"] == [([B + "g1"], B + "g2")]
    # The old rule (any backward op one hop up from the reader, ordered after the producer in
    # the schedule) picked s1, which runs during the forward pass: the copy came back at once.
    # s1 is a reader with order -1: v1 swaps, instead, the output of the op downstream of it
    # whose reader is ordered in the backward phase, i.e. s1 itself (read by g1, 9 > 6). s1 is
    # backward, so direct_order: orders 9-1-1 = 7 (the published range excludes 9 - lb) down
    # to max(9-10000, -1)+1 = 0; order 7 = g3 reaches g1.
    assert got[B + "s1:0"] == [([B + "g1"], B + "g3")]


def test_v1_n_tensors_filters_and_starting_point():
    assert list(swaps(lmskit.swap(chain(), n_tensors=1))) == ["f1:0"]
    assert swaps(lmskit.swap(chain(), n_tensors=0)) == {}
    assert list(swaps(lmskit.swap(chain(), excl_types=["Relu"]))) == ["f1:0", "f3:0"]
    assert list(swaps(lmskit.swap(chain(), incl_types=["Relu"]))) == ["f2:0", "f4:0"]
    assert list(swaps(lmskit.swap(chain(), incl_types="Relu"))) == ["f2:0", "f4:0"]
    assert list(swaps(lmskit.swap(chain(), excl_scopes=["f1", "f3", "f4"]))) == ["f2:0"]
    # Starting at f3, orders restart there: f3 0, f4 1, loss 2, g4 3 ... and f3 -> g3 (order
    # 4) takes g4 (3) from hop 1 (f4's reader).
    assert swaps(lmskit.swap(chain(), starting_op_names=["f3"]))["f3:0"] == [([B + "g3"],
                                                                             B + "g4")]


def test_v1_fuse_swapins_shares_one_copy():
    rows = CHAIN + [(B + "extra", "Mul", [B + "g1", "f1"], "backward", ("B", 8)),
                    (B + "use", "Neg", [B + "extra"], "backward", ("B", 8))]
    g = build(rows, loss="loss:0")
    plain = swaps(lmskit.swap(g))["f1:0"]
    fused = swaps(lmskit.swap(g, fuse_swapins=True))["f1:0"]
    assert len(plain) == 2
    # extra (order 10) and g1 (9) share one swap-in, triggered for the earliest, g1: g2.
    assert fused == [([B + "extra", B + "g1"], B + "g2")]


def test_v1_swap_branches_measures_from_the_nearest_forward_reader():
    # f1 is read by f2 (order 2) and by join (order 5: f2 2, f3 3, f4 4, join 5, loss 6).
    rows = CHAIN[:5] + [("join", "AddV2", ["f4", "f1"], "forward", ("B", 8)),
                        ("loss", "Sum", ["join"], "forward", ())] + CHAIN[6:]
    g = build(rows, loss="loss:0")
    assert all(c != ["join"] for c, _ in swaps(lmskit.swap(g))["f1:0"])
    # branch_threshold=2: join (5) > min(2, 5) + 2 = 4: swapped. Its trigger (a forward reader:
    # 5 - 1 is before the backward phase) comes from direct_order: orders 5-1-1 = 3 down to
    # max(5-10000, 1)+1 = 2: f3 (3) reaches join.
    far = swaps(lmskit.swap(g, swap_branches=True, branch_threshold=2))["f1:0"]
    assert (["join"], "f3") in far
    # branch_threshold=3: join (5) is not > 2 + 3. Measured from the producer (f1, order 1) it
    # would have been 4 > 3 and swapped.
    near = swaps(lmskit.swap(g, swap_branches=True, branch_threshold=3))["f1:0"]
    assert all(c != ["join"] for c, _ in near)
    assert v1.branch_consumers(g, "f1:0", 3) == [] and v1.branch_consumers(g, "f1:0", 2) == [
        "join"]


def test_v2_threshold_ahead_groupby():
    r = lmskit.swap(chain(), swapout_threshold=3, swapin_ahead=2, swapin_groupby=0)
    # distances: x->g0 10, f1->g1 8, f2->g2 6, f3->g3 4, f4->g4 2 (kept); forward reads 1.
    # _search_by_level: levels from (reader level - 2 - 1) down, first ancestor of the reader:
    # g0@10 -> level 7 g3, g1@9 -> 6 g4, g2@8 -> 5 loss, g3@7 -> 4 f4.
    assert swaps(r) == {"x:0": [([B + "g0"], B + "g3")], "f1:0": [([B + "g1"], B + "g4")],
                        "f2:0": [([B + "g2"], "loss")], "f3:0": [([B + "g3"], "f4")]}
    # swapin_ahead larger than the distance: the window (7-51, down to f3's level + 1) is
    # empty. The swap stays, synchronised: the swap-in waits for its reader's other input, g4.
    r = lmskit.swap(chain(), swapout_threshold=3, swapin_ahead=50, swapin_groupby=0)
    assert swaps(r)["f3:0"] == [([B + "g3"], B + "g4")]


def test_v2_trigger_must_reach_the_reader():
    # m reads f3 and nobody reads m: level 4, beside f4, and after it in the schedule.
    rows = CHAIN[:5] + [("m", "Neg", ["f3"], "forward", ("B", 8))] + CHAIN[5:]
    g = build(rows, loss="loss:0")
    # f3 -> g3 (level 7), swapin_ahead=2: level 7-2-1 = 4 holds f4 and m; only f4 reaches g3.
    assert v2.level_trigger(g, "f3", B + "g3", 2) == "f4"
    assert swaps(lmskit.swap(g, swapout_threshold=3, swapin_ahead=2, swapin_groupby=0))[
        "f3:0"] == [([B + "g3"], "f4")]


def test_v2_looks_back_at_most_ten_levels():
    # a (1) is read by r (15); w1 (2) and w2 (3) are ordinary ops, then twelve ops in a while
    # loop's scope (levels 4..13) that can never be triggers, loss at 14.
    rows = [("x", "Placeholder", [], "forward", ("B", 8)),
            ("a", "Relu", ["x"], "forward", ("B", 8)),
            ("w1", "Neg", ["a"], "forward", ("B", 8)),
            ("w2", "Neg", ["w1"], "forward", ("B", 8))]
    prev = "w2"
    for i in range(3, 13):
        rows.append((f"while/w{i}", "Neg", [prev], "forward", ("B", 8)))
        prev = f"while/w{i}"
    rows += [("loss", "Sum", [prev], "forward", ()),
             (B + "r", "Mul", ["loss", "a"], "backward", ("B", 8))]
    g = build(rows, loss="loss:0")
    assert lmskit.schedule(g).level[B + "r"] == 15
    # swapin_ahead=1: levels 13 down to max(13-9, 1+1) = 4, all in the loop: no trigger, though
    # w2 (level 3) would reach r. Unbounded, the search would have found w2.
    assert v2.level_trigger(g, "a", B + "r", 1) is None
    v2.LOOK_BACK, saved = 11, v2.LOOK_BACK
    try:
        assert v2.level_trigger(g, "a", B + "r", 1) == "w2"
    finally:
        v2.LOOK_BACK = saved
    # The swap is kept and synchronised: the swap-in waits for r's other input, loss.
    got = swaps(lmskit.swap(g, swapout_threshold=3, swapin_ahead=1, swapin_groupby=0))
    assert got["a:0"] == [([B + "r"], "loss")]


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
    # sync_mode 2/3 never search a trigger: the swap-in waits for its reader g1's other
    # input, g2, so the copy back starts just in time.
    assert r.ops[si].control_inputs == [B + "g2"]
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


@pytest.mark.parametrize("options, culprit", [
    (dict(lb=5, ub=2), "lb"), (dict(lb=-1), "lb"), (dict(n_tensors=2.5), "n_tensors"),
    (dict(n_tensors=-3), "n_tensors"), (dict(branch_threshold=-1), "branch_threshold"),
    (dict(n_tensors=True), "n_tensors"),
    (dict(swapout_threshold=-2, swapin_ahead=1, swapin_groupby=0), "swapout_threshold"),
    (dict(swapout_threshold=2, swapin_ahead=0, swapin_groupby=0), "swapin_ahead"),
    (dict(swapout_threshold=2, swapin_ahead=1, swapin_groupby=1.5), "swapin_groupby"),
    (dict(swapout_threshold=2, swapin_ahead=1, swapin_groupby=0, sync_mode=4), "sync_mode"),
])
def test_options_out_of_range_name_the_option(options, culprit):
    with pytest.raises(ValueError, match=culprit):
        lmskit.swap(chain(), **options)


def test_input_graph_is_not_modified():
    g = chain()
    before = {n: (list(op.inputs), list(op.control_inputs)) for n, op in g.ops.items()}
    lmskit.swap(g, sync_mode=3, swapout_threshold=1, swapin_ahead=1, swapin_groupby=0)
    assert before == {n: (list(op.inputs), list(op.control_inputs)) for n, op in g.ops.items()}


def test_v1_update_ops_clean_a_level_too_as_published():
    # u (an update op reading g4) sits at level 7 beside g3. The published code cleans backward
    # ops off any level with a non-backward op before it drops the update ops: g3 gets -1, the
    # emptied level 7 is dropped, and g2, g1, g0 move up to 7, 8, 9.
    rows = CHAIN + [("sgd/u", "Neg", [B + "g4"], "update", ("B", 8))]
    g = build(rows, loss="loss:0")
    topo = topos.for_graph(g)
    assert [topo.get(n) for n in [B + "g4", B + "g3", B + "g2", B + "g0", "sgd/u"]] == [
        6, -1, 7, 9, -1]
    # f2 -> g2 (now 7): the walk reaches f3, whose backward reader g3 is cleaned; at hop 2, f4's
    # reader g4 (6) is in (2, 7).
    assert swaps(lmskit.swap(g))["f2:0"] == [([B + "g2"], B + "g4")]
    # Dropping the update ops first keeps g3 (7), and f2 -> g2 (8) takes g3 at hop 1.
    assert topos.for_graph(g, clean_with_update_ops=False).get(B + "g3") == 7
