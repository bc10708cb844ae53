"""Property tests: random forward/backward DAGs, random option sets. Every rewrite passes the
checker, an interpreter computes the same values before and after, and the simulator runs it."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lmskit_graphs import build, interpret

import lmskit
from lmskit.rules import RewriteError, check, common
from lmskit.simulate import simulate

TYPES = ["Conv2D", "Relu", "Mul", "AddV2", "Tanh", "MatMul", "Identity", "Reshape"]


@st.composite
def training_dags(draw):
    n = draw(st.integers(2, 10))
    rows = [("x", "Placeholder", [], "forward", ("B", 4))]
    fwd = ["x"]
    for i in range(n):
        k = draw(st.integers(1, min(2, len(fwd))))
        ins = draw(st.lists(st.sampled_from(fwd), min_size=k, max_size=k, unique=True))
        shape = ("B", 4) if draw(st.booleans()) or i == 0 else (4,)
        rows.append((f"f{i}", draw(st.sampled_from(TYPES)), ins, "forward", shape))
        fwd.append(f"f{i}")
    rows.append(("loss", "Sum", [fwd[-1]], "forward", ()))
    grad = "loss"
    grads = []
    for name, _, ins, _, _ in reversed(rows[1:-1]):
        saved = draw(st.lists(st.sampled_from(ins + [name]), min_size=1, max_size=2, unique=True))
        g = f"gradient_tape/{name}"
        rows.append((g, draw(st.sampled_from(TYPES[:6])), [grad] + saved, "backward", ("B", 4)))
        grads.append(g)
        if draw(st.booleans()):
            grad = g
    for i, g in enumerate(grads[: draw(st.integers(0, len(grads)))]):
        rows.append((f"update{i}", "AssignSub", [g], "update", (4,)))
    return build(rows, loss="loss:0", fetches=["loss:0"])


v1_options = st.fixed_dictionaries({}, optional={
    # lb <= ub: lb > ub is refused.
    "n_tensors": st.integers(-1, 4), "lb": st.integers(1, 4), "ub": st.integers(4, 20),
    "fuse_swapins": st.booleans(),
    "ctrld_strategy": st.sampled_from(["chain_rule", "direct_order"]),
    "swap_branches": st.booleans(), "branch_threshold": st.integers(0, 5),
    "excl_types": st.lists(st.sampled_from(TYPES), max_size=2),
})
v2_options = st.fixed_dictionaries({
    "swapout_threshold": st.integers(0, 8), "swapin_ahead": st.integers(1, 6),
    "swapin_groupby": st.integers(0, 4)}, optional={
    "sync_mode": st.integers(0, 3),
    "serialization": st.lists(st.integers(0, 12), max_size=3, unique=True)})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(training_dags(), st.one_of(v1_options, v2_options))
def test_any_rewrite_is_checked_and_computes_the_same(g, options):
    r = lmskit.swap(g, **options)          # raises if the checker refuses
    assert check(g, r)
    before, after = interpret(g), interpret(r)
    assert {t: before[t] for t in g.tensors} == {t: after[t] for t in g.tensors}
    for op in r.ops.values():
        if op.attrs.get("swap") == "in":
            assert r.ops[op.inputs[0][:-2]].device == "host"
    sim = simulate(r, "p100-16gb", batch_size=4)
    assert sim.step_time >= sim.compute_time - 1e-12


@settings(max_examples=60, deadline=None)
@given(training_dags(), st.data())
def test_checker_catches_a_rewired_input(g, data):
    """The property can fail: an op reading another (earlier) tensor is refused."""
    sched = lmskit.schedule(g)
    readers = [op for op in g.ops.values() if op.inputs]
    op = data.draw(st.sampled_from(readers))
    earlier = [t for t in g.tensors if t not in op.inputs
               and sched.position[g.producer(t).name] < sched.position[op.name]]
    if not earlier:
        return
    bad = g.copy()
    bad.ops[op.name].inputs[0] = data.draw(st.sampled_from(earlier))
    bad.invalidate()
    with pytest.raises(RewriteError):
        check(g, bad)


def test_interpreter_sees_a_rewired_input():
    g = build([("x", "Placeholder", [], "forward", ("B", 4)),
               ("a", "Relu", ["x"], "forward", ("B", 4)),
               ("b", "Tanh", ["a"], "forward", ("B", 4))])
    bad = g.copy()
    bad.ops["b"].inputs = ["x:0"]
    bad.invalidate()
    assert interpret(g)["b:0"] != interpret(bad)["b:0"]


def test_insert_swap_is_the_only_edit_rules_make():
    g = build([("x", "Placeholder", [], "forward", ("B", 4)),
               ("a", "Relu", ["x"], "forward", ("B", 4)),
               ("gradient_tape/b", "ReluGrad", ["a", "x"], "backward", ("B", 4)),
               ("gradient_tape/c", "Mul", ["gradient_tape/b", "a"], "backward", ("B", 4))])
    r = lmskit.swap(g)
    new = set(r.ops) - set(g.ops)
    assert new and all(common.is_swap(r.ops[n]) for n in new)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(training_dags(), st.data())
def test_any_recomputation_computes_the_same(g, data):
    from lmskit.recompute import recomputable, recompute

    saved = sorted({t for op in g.ops.values() if op.phase == "backward" for t in op.inputs
                    if g.ops[t.rsplit(":", 1)[0]].phase == "forward" and recomputable(g, t)})
    if not saved:
        return
    drop = data.draw(st.lists(st.sampled_from(saved), min_size=1, unique=True))
    r = recompute(g, drop)
    lmskit.schedule(r)                       # acyclic
    before, after = interpret(g, by_origin=True), interpret(r, by_origin=True)
    assert {t: before[t] for t in g.tensors} == {t: after[t] for t in g.tensors}
    for op in r.ops.values():                 # no backward op reads a dropped tensor any more
        if op.phase == "backward" and "recompute_of" not in op.attrs:
            assert not set(op.inputs) & set(drop)
    # Readers of the clones see the same values as the originals they replace.
    for name, op in g.ops.items():
        assert [after[t] for t in r.ops[name].inputs] == [before[t] for t in op.inputs]
    from lmskit.simulate import FREE_TYPES

    sim = simulate(r, "p100-16gb", batch_size=4)
    costly = any("recompute_of" in op.attrs and op.type not in FREE_TYPES for op in r.ops.values())
    assert (sim.recompute_time > 0) == costly
    assert sim.step_time >= sim.compute_time + sim.recompute_time - 1e-12
