"""Hand-built lmskit Graphs for tests whose answers are computed by hand, and a tiny interpreter.

build([...]) takes (name, type, inputs, phase, shape) rows; shape entries are ints or "B" (the
batch). Every op has one output "<name>:0" of float32.
"""

from lmskit.graph import Graph, Op, Tensor

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


def interpret(graph, seed=7):
    """Evaluate every op on integers: an op's value mixes its inputs (order matters) with a
    constant drawn from its name; an Identity passes its input through. Control edges only order.
    Returns {tensor name: value}. Two graphs computing the same thing give the same values."""
    from lmskit.schedule import schedule

    values = {}
    for name in schedule(graph).order:
        op = graph.ops[name]
        if op.type == "Identity":
            v = values[op.inputs[0]]
        else:
            v = hash((seed, name)) % 1000003
            for i, t in enumerate(op.inputs):
                v = (v * 31 + (i + 1) * values[t]) % 2_147_483_647
        for t in op.outputs:
            values[t] = v
    return values
