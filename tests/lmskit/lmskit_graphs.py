"""Hand-built lmskit Graphs for tests whose answers are computed by hand, and a tiny interpreter.

build([...]) takes (name, type, inputs, phase, shape) rows; shape entries are ints or "B" (the
batch). Every op has one output "<name>:0" of float32.
"""

from lmskit.devices import Device
from lmskit.graph import Graph, Op, Tensor
from lmskit.rules.common import insert_swap

# x -> a -> b -> loss ; backward gb(b, loss) -> ga(gb, a): the forward tensors a and b are used
# again in the backward pass, which is what makes lifetimes long and swapping worth it.
CHAIN = [
    ("x", "Placeholder", [], "forward", ("B", 4)),
    ("a", "Relu", ["x"], "forward", ("B", 4)),
    ("b", "Tanh", ["a"], "forward", ("B", 8)),
    ("loss", "Sum", ["b"], "forward", ()),
    ("gradient_tape/gb", "Mul", ["b", "loss"], "backward", ("B", 8)),
    ("gradient_tape/ga", "Mul", ["gradient_tape/gb", "a"], "backward", ("B", 4)),
]
# ... and an update op u(ga)
CHAIN_WITH_UPDATE = CHAIN + [("sgd/u", "Neg", ["gradient_tape/ga"], "update", (4,))]


def build(rows, fetches=(), loss=None):
    ops, tensors = [], []
    for row in rows:
        name, typ, inputs, phase, shape = row[:5]
        control = row[5] if len(row) > 5 else []
        coef = tuple(1 if d == "B" else 0 for d in shape)
        const = tuple(0 if d == "B" else d for d in shape)
        ops.append(Op(name, typ, inputs=[i if ":" in i else i + ":0" for i in inputs],
                      control_inputs=list(control), outputs=[name + ":0"], phase=phase))
        tensors.append(Tensor(name + ":0", name, "float32", coef, const))
    return Graph(ops, tensors, loss=loss, fetches=list(fetches))


def interpret(graph, seed=7, by_origin=False):
    """Evaluate every op on integers: an op's value mixes its inputs (order matters) with a
    constant drawn from its name; an Identity passes its input through. Control edges only order.
    Returns {tensor name: value}. Two graphs computing the same thing give the same values.
    With `by_origin`, a recomputed clone draws its constant from its original's name, so a
    correct recomputation gives every reader the very value it read before."""
    from lmskit.schedule import schedule

    values = {}
    for name in schedule(graph).order:
        op = graph.ops[name]
        if op.type == "Identity":
            v = values[op.inputs[0]]
        else:
            origin = op.attrs.get("recompute_of", name) if by_origin else name
            v = hash((seed, origin)) % 1000003
            for i, t in enumerate(op.inputs):
                v = (v * 31 + (i + 1) * values[t]) % 2_147_483_647
        for t in op.outputs:
            values[t] = v
    return values


# The simulator's toy chain (test_simulate, test_limits): 1 element = 1 FLOP = 1 us; a [4, 250]
# float32 tensor (4000 bytes) copies in 1 ms each way; the tensor "a" is read again by g2.
TOY = Device("toy", 10**9, flops=1e6, memory_bandwidth=1e15, h2d_bandwidth=4e6,
             d2h_bandwidth=4e6, compute_efficiency=1.0, bandwidth_efficiency=1.0,
             launch_overhead_s=0.0)
G = "gradient_tape/"
ROWS = [("x", "Placeholder", [], "forward", ("B", 250)),
        ("a", "Relu", ["x"], "forward", ("B", 250)),
        ("b", "Tanh", ["a"], "forward", ("B", 250)),
        ("c", "Neg", ["b"], "forward", ("B", 250)),
        (G + "g1", "Mul", ["c", "c"], "backward", ("B", 250)),
        (G + "g2", "Mul", [G + "g1", "a"], "backward", ("B", 250))]
MS = 1e-3


def toy(trigger=None):
    """The toy chain, with "a" swapped out and back in for g2 (triggered by `trigger`) if given."""
    g = build(ROWS)
    if trigger:
        insert_swap(g, "a:0", [G + "g2"], trigger)
    return g
