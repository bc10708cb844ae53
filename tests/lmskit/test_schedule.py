"""Orders, levels, lifetimes and live bytes on graphs small enough to work out by hand."""

import numpy as np
import pytest
from lmskit_graphs import CHAIN, build

from lmskit.schedule import CycleError, lifetimes, schedule


def test_order_levels_and_lifetimes_by_hand():
    g = build(CHAIN)
    s = schedule(g)
    assert s.order == [r[0] for r in CHAIN]
    assert [s.level[r[0]] for r in CHAIN] == [0, 1, 2, 3, 4, 5]
    lt = lifetimes(g, batch_size=2)
    spans = {b.tensor: (b.produced, b.last_use, b.bytes) for b in lt.buffers}
    assert spans == {"x:0": (0, 1, 32), "a:0": (1, 5, 32), "b:0": (2, 4, 64), "loss:0": (3, 4, 4),
                     "gradient_tape/gb:0": (4, 5, 64), "gradient_tape/ga:0": (5, 5, 32)}
    # x | x a | a b | a b loss | a b loss gb | a gb ga
    assert lt.device_bytes.tolist() == [32, 64, 96, 100, 164, 128]
    assert lt.peak == 164 and lt.peak_op == "gradient_tape/gb"
    rows = lt.breakdown(g)
    assert [(r["tensor"], r["bytes"], r["kind"]) for r in rows] == [
        ("b:0", 64, "activation"), ("gradient_tape/gb:0", 64, "gradient"),
        ("a:0", 32, "activation"), ("loss:0", 4, "activation")]
    assert rows[0]["shape"] == (2, 8)


def test_bytes_scale_with_batch_without_retrace():
    g = build(CHAIN)
    assert lifetimes(g, 10).peak == 10 * (8 + 8 + 4) * 4 + 4


def test_fifo_order_runs_ready_ops_first_come_first_served():
    # src feeds p and q; p feeds r. A FIFO executor runs q before r (depth-first would not).
    g = build([("src", "Placeholder", [], "forward", (1,)),
               ("p", "Neg", ["src"], "forward", (1,)),
               ("q", "Neg", ["src"], "forward", (1,)),
               ("r", "Neg", ["p"], "forward", (1,))])
    assert schedule(g).order == ["src", "p", "q", "r"]
    assert schedule(g).level == {"src": 0, "p": 1, "q": 1, "r": 2}


def test_aliases_share_their_root_buffer():
    g = build([("x", "Placeholder", [], "forward", ("B", 4)),
               ("a", "Relu", ["x"], "forward", ("B", 4)),
               ("v", "Reshape", ["a"], "forward", ("B", 2, 2)),
               ("late", "Neg", ["x"], "forward", ("B", 4)),
               ("z", "Neg", ["v", "late"], "forward", ("B", 4))])
    lt = lifetimes(g, 1)
    assert lt.order == ["x", "a", "late", "v", "z"]   # FIFO: late was queued before v
    spans = {b.tensor: (b.produced, b.last_use) for b in lt.buffers}
    assert "v:0" not in spans                 # no bytes of its own
    assert spans["a:0"] == (1, 4)             # lives until z reads the view
    # x | x a | x a late | a late | a late z
    assert lt.device_bytes.tolist() == [16, 32, 48, 32, 48]


def test_control_edges_order_ops_and_cycles_are_reported():
    g = build([("a", "Neg", [], "forward", (1,), ["b"]),
               ("b", "Neg", ["a"], "forward", (1,))])
    with pytest.raises(CycleError, match="cycle"):
        schedule(g)


def test_variables_are_resident_all_step():
    from lmskit.graph import Variable
    g = build(CHAIN)
    g.variables["w"] = Variable("w", "float32", (10,), True)
    lt = lifetimes(g, 2)
    assert np.array_equal(lt.device_bytes, np.array([32, 64, 96, 100, 164, 128]) + 40)
    assert lt.by_kind(g)["weight"] == 40
