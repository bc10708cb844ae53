"""A JIT compile optimises and generates code for its LLVM module in partitions, one thread each
(backends/split.py): the answer is the same bits as from one module and onnxruntime's; every
partition is a valid module of its own; each symbol is defined in exactly one partition, the
entry function in the first; groups go to partitions largest first, to the least loaded."""

import llvmlite.binding as llvm
import llvmlite.ir as ir
import numpy as np
import pytest
from ckhelpers import make_model, on_threads, ort_run
from onnx import helper

import compilerkit as ck
from compilerkit.backends import split
from compilerkit.pipeline import Compilation


def mixed_chain(seed=0):
    """Convs of different widths between elementwise ops and pools, and a large splat constant
    (a global filled on the first call): more than split.MIN_GROUPS node functions."""
    r = np.random.default_rng(seed)
    N = helper.make_node
    nodes, inits, prev = [], [], "x"
    channels = [3, 5, 7, 16, 16, 6, 5, 4]  # 16 -> 16: weights of 9 KiB, mapped by the JIT
    for k in range(len(channels) - 1):
        w = r.standard_normal((channels[k + 1], channels[k], 3, 3)).astype(np.float32) / 3
        inits.append((f"w{k}", w))
        nodes.append(N("Conv", [prev, f"w{k}"], [f"c{k}"], pads=[1, 1, 1, 1], name=f"conv{k}"))
        act = ("Relu", "Sigmoid", "Tanh", "Relu", "Sigmoid", "Tanh", "Relu")[k]
        nodes.append(N(act, [f"c{k}"], [f"a{k}"], name=f"act{k}"))
        prev = f"a{k}"
    splat = np.full((1, 4, 20, 20), 0.25, np.float32)  # > 1024 equal values: a splat global
    inits.append(("s", splat))
    nodes += [N("Add", [prev, "s"], ["added"], name="add_splat"),
              N("MaxPool", ["added"], ["p"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
              N("Mul", ["p", "p"], ["y"], name="square")]
    x = r.standard_normal((1, 3, 20, 20)).astype(np.float32)
    return make_model(nodes, [("x", x)], ["y"], inits), x


def _exported_once(mods) -> dict:
    """Every partition verifies; name -> partitions defining it with external linkage, each
    name in exactly one, the entry function in partition 0."""
    for m in mods:
        m.verify()
    exported = {}
    for k, m in enumerate(mods):
        for g in list(m.functions) + list(m.global_variables):
            if not g.is_declaration and g.linkage == llvm.Linkage.external:
                exported.setdefault(g.name, []).append(k)
    assert exported["main_graph"] == [0]
    assert all(len(ks) == 1 for ks in exported.values()), exported
    return exported


@pytest.mark.parametrize("opt_level", [3, 0])
def test_partitions_give_the_same_bits_as_one_module(monkeypatch, opt_level):
    # At -O0 nothing removes a partition's unused weight declarations: each weight must
    # still be mapped once (LLVM aborts on a second mapping of a name).
    model, x = mixed_chain()
    ref = ort_run(model, [x])[0]
    answers = {}
    for parts in ("1", "2", "3"):
        monkeypatch.setenv("CK_COMPILE_THREADS", parts)
        cm = ck.compile(model, asm=False, opt_level=opt_level)
        for threads in (1, 2):
            got = cm.run(x, num_threads=threads)[0]
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
            answers[parts, threads] = got.tobytes()
        del cm
    assert len(set(answers.values())) == 1


def _symbols(mod):
    defs = {g.name for g in list(mod.functions) + list(mod.global_variables)
            if not g.is_declaration}
    decls = {g.name for g in list(mod.functions) + list(mod.global_variables)
             if g.is_declaration and not g.name.startswith(("llvm.", "GOMP_"))}
    return defs, decls


def test_every_partition_is_a_module_and_every_symbol_has_one_home(monkeypatch):
    monkeypatch.setenv("CK_COMPILE_THREADS", "3")
    model, _ = mixed_chain()
    c = Compilation("host", 3)
    be = c.backend
    texts = be.emit_llvm(c.run(model, "kernel-ir"), external_weights=True)
    assert isinstance(texts, list) and len(texts) == 3
    weights = set(be.external_weights)
    bodies = be.emitted.bodies
    assert len(bodies) >= split.MIN_GROUPS
    mods = [llvm.parse_assembly(t, context=llvm.create_context()) for t in texts]
    exported = _exported_once(mods)
    # What a partition declares is a weight, or defined for export by exactly one partition.
    for m in mods:
        _, decls = _symbols(m)
        for name in decls - weights:
            assert name in exported, name
    # Each node's function and its parallel bodies live in one partition, together.
    for group in bodies.values():
        homes = {k for k, m in enumerate(mods) for name in group
                 if any(f.name == name and not f.is_declaration for f in m.functions)}
        assert len(homes) == 1, group


def test_a_written_global_is_one_global(monkeypatch):
    """The profiler's counters (a global the code writes and Python reads by name) are defined
    once: every node's counter fills, whichever partition its function went to."""
    from compilerkit.measure.profile import profile_nodes

    monkeypatch.setenv("CK_COMPILE_THREADS", "3")
    model, x = mixed_chain()
    rows = profile_nodes(model, repeat=1, feeds=[("x", x)])
    convs = [r for r in rows if r["op_type"] == "Conv"]
    assert len(convs) == 7 and all(r["seconds"] > 0 for r in convs), convs


def test_a_small_module_stays_whole(monkeypatch):
    monkeypatch.setenv("CK_COMPILE_THREADS", "4")
    N = helper.make_node
    x = np.ones((2, 3), np.float32)
    model = make_model([N("Relu", ["x"], ["y"])], [("x", x)], ["y"])
    c = Compilation("host", 3)
    text = c.backend.emit_llvm(c.run(model, "kernel-ir"), external_weights=True)
    assert isinstance(text, str)
    np.testing.assert_array_equal(ck.compile(model, asm=False).run(-x)[0], 0 * x)


def _function(module, name, instructions):
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), []), name)
    b = ir.IRBuilder(fn.append_basic_block())
    slot = b.alloca(ir.IntType(32))
    for _ in range(instructions - 2):
        b.store(ir.Constant(ir.IntType(32), 0), slot)
    b.ret_void()
    return fn


def test_groups_go_largest_first_to_the_least_loaded_partition():
    m = ir.Module()
    _function(m, "entry", 2)  # no group: partition 0 starts with its 2 instructions
    for name, size in (("a", 10), ("b", 6), ("c", 5), ("d", 4)):
        _function(m, name, size)
        _function(m, name + "_par1", 3)  # a group's parallel body counts with it
    bodies = {n: [n, n + "_par1"] for n in "abcd"}
    # By hand, loads [p0, p1] from [2, 0]: a (10 + 3) -> p1 [2, 13]; b (9) -> p0 [11, 13];
    # c (8) -> p0 [19, 13]; d (7) -> p1 [19, 20].
    owner = split.assign(m, bodies, 2)
    assert {n: owner[n] for n in "abcd"} == {"a": 1, "b": 0, "c": 0, "d": 1}
    assert all(owner[n + "_par1"] == owner[n] for n in "abcd")


@pytest.mark.parametrize("value", ["0", "two", "-1"])
def test_compile_threads_must_be_a_count(monkeypatch, value):
    monkeypatch.setenv("CK_COMPILE_THREADS", value)
    with pytest.raises(ValueError, match="CK_COMPILE_THREADS"):
        split.compile_threads()


def test_compiles_on_several_python_threads_at_once(monkeypatch):
    """Each compile splits into partitions on threads of its own while others compile: every
    model comes out right (partitions of one compile share nothing with another's)."""
    monkeypatch.setenv("CK_COMPILE_THREADS", "2")
    cases = [mixed_chain(seed) for seed in range(3)]
    refs = [ort_run(m, [x])[0] for m, x in cases]
    got = [None] * 3

    def work(k):
        m, x = cases[k]
        got[k] = ck.compile(m, asm=False).run(x)[0]

    errors = on_threads(work, 3)
    assert not errors, errors
    for g, r in zip(got, refs, strict=True):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-5)


def _streamed(monkeypatch, threads="2"):
    """Partitions of a few instructions, so that mixed_chain streams several."""
    monkeypatch.setenv("CK_COMPILE_THREADS", threads)
    monkeypatch.setattr(split, "STREAM_INSTRUCTIONS", 40)


@pytest.mark.parametrize("opt_level", [3, 0])
def test_streamed_partitions_give_the_same_bits_as_one_module(monkeypatch, opt_level):
    """A compile prints and compiles partitions while it emits the rest (PartitionStream):
    the answer is the bits of one module's."""
    model, x = mixed_chain()
    monkeypatch.setenv("CK_COMPILE_THREADS", "1")
    whole = ck.compile(model, asm=False, opt_level=opt_level).run(x)[0]
    _streamed(monkeypatch)
    cm = ck.compile(model, asm=False, opt_level=opt_level)
    assert isinstance(cm.llvm_module, split.Partitions) and len(cm.llvm_module.modules) > 3
    for threads in (1, 2):
        assert cm.run(x, num_threads=threads)[0].tobytes() == whole.tobytes()


def test_streamed_partitions_are_modules_and_every_symbol_has_one_home(monkeypatch):
    _streamed(monkeypatch)
    monkeypatch.setattr(split.PartitionStream, "keep_texts", True)
    model, _ = mixed_chain()
    c = Compilation("host", 3)
    be = c.backend
    stream = be.emit_llvm(c.run(model, "kernel-ir"), external_weights=True, optimize=3)
    assert isinstance(stream, split.PartitionStream)
    parts = stream.result()
    texts = [stream.texts[k] for k in sorted(stream.texts)]
    assert len(texts) == len(parts.modules) == len(parts.objects) > 3
    assert all(isinstance(o, bytes) and o for o in parts.objects)
    mods = [llvm.parse_assembly(t, context=llvm.create_context()) for t in texts]
    exported = _exported_once(mods)
    # the micro-kernel: one partition of its own, exported to the ones that call it
    kernels = [n for n in exported if n.startswith("ck_matmul")]
    assert kernels and all(exported[n] != [0] for n in kernels)
    weights = set(be.external_weights)
    for m in mods:
        _, decls = _symbols(m)
        for name in decls - weights:
            assert name in exported, name
    for group in be.emitted.bodies.values():
        homes = {k for k, m in enumerate(mods) for name in group
                 if any(f.name == name and not f.is_declaration for f in m.functions)}
        assert len(homes) == 1, group
    parts.close()


def test_a_failed_emit_stops_the_stream(monkeypatch):
    """An error after partitions were handed to the threads: raised as it is, the threads
    end and what they made is released."""
    import threading

    from compilerkit.codegen.emit import Emitter

    _streamed(monkeypatch)

    def broken(self):
        raise RuntimeError("emit broke")

    monkeypatch.setattr(Emitter, "message_function", broken)  # after every node is emitted
    model, _ = mixed_chain()
    with pytest.raises(RuntimeError, match="emit broke"):
        ck.compile(model, asm=False)
    assert not [t for t in threading.enumerate() if t.name.startswith("ck-llvm")]


def test_a_small_module_streams_nothing_and_holds_no_option(monkeypatch):
    """Too few instructions for a partition: the module is printed whole, as before, and the
    LLVM options the stream held are let go."""
    from compilerkit.backends.base import NO_FUNCTION_SPECIALIZATION, NO_LSR

    monkeypatch.setenv("CK_COMPILE_THREADS", "2")
    N = helper.make_node
    x = np.ones((2, 3), np.float32)
    model = make_model([N("Relu", ["x"], ["y"])], [("x", x)], ["y"])
    cm = ck.compile(model, asm=False)
    assert not isinstance(cm.llvm_module, split.Partitions)
    assert NO_LSR._users == 0 and NO_FUNCTION_SPECIALIZATION._users == 0
    np.testing.assert_array_equal(cm.run(-x)[0], 0 * x)


def test_a_kernel_is_compiled_once_per_process(monkeypatch):
    """The matmul kernels' machine code is kept for the process (split.HELPER_OBJECTS): a
    second model reuses it (no new entry), and the answers are the same bits as from a compile
    that made it anew."""
    monkeypatch.setenv("CK_COMPILE_THREADS", "2")
    monkeypatch.setattr(split, "HELPER_OBJECTS", {})
    rng = np.random.default_rng(11)
    products = []
    for m, k, n in ((20, 30, 40), (9, 70, 33)):
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        products.append((make_model([helper.make_node("MatMul", ["a", "b"], ["y"])],
                                    [("a", a)], ["y"], [("b", b)]), a))
    first = ck.compile(products[0][0], asm=False).run(products[0][1])[0]
    kept = dict(split.HELPER_OBJECTS)
    assert len(kept) == 1  # the general kernel, f32, this machine's vectors
    second = ck.compile(products[1][0], asm=False).run(products[1][1])[0]
    assert split.HELPER_OBJECTS == kept
    again = ck.compile(products[0][0], asm=False).run(products[0][1])[0]
    monkeypatch.setattr(split, "HELPER_OBJECTS", {})
    fresh = [ck.compile(model, asm=False).run(a)[0] for model, a in products]
    assert np.array_equal(first, fresh[0]) and np.array_equal(again, fresh[0])
    assert np.array_equal(second, fresh[1])
    np.testing.assert_allclose(second, ort_run(products[1][0], [products[1][1]])[0],
                               rtol=1e-4, atol=1e-5)
