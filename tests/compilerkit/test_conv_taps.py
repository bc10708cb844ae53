"""The tap schedule (conv_taps.py: out^T = X^T W^T with X^T read in place from the padded
input planes through krnl.matmul's `a_taps`, no im2col): bit-identical to the im2col GEMM
panels (the same sums over (channel, tap) from the bias), onnxruntime's answer, on 1 and 2
threads, over 1-D, 2-D and 3-D Convs, dilations, uneven pads, batches, part strips of output
channels and special values; the rule that takes it, and "auto"'s."""

import numpy as np
import pytest
from ckhelpers import conv_act_model, ort_run, seeded
from xdsl.dialects.builtin import ArrayAttr
from xdsl.utils.exceptions import VerifyException

import compilerkit as ck
from compilerkit.dialects import krnl
from compilerkit.lowering import conv as conv_lowering
from compilerkit.lowering import conv_algorithm, conv_taps
from compilerkit.pipeline import compile_to


class Taps:
    """Compiles with the tap schedule (counting its Convs) or with it refused (the panels)."""

    def __init__(self, monkeypatch):
        self.monkeypatch = monkeypatch
        self.calls = 0
        real = conv_taps.tap_panels

        def counted(*args):
            self.calls += 1
            return real(*args)

        monkeypatch.setattr(conv_taps, "tap_panels", counted)

    def compile(self, model, taps: bool, any_channels: bool = True):
        """`any_channels`: the schedule also takes Convs with few output channels (below
        conv_taps.MIN_OUT_CHANNELS), small planes (more throw-away positions than
        conv_taps.MAX_WASTE) and strided ones with few sums or large phase planes: correct,
        only slower, so CASES test it there."""
        with self.monkeypatch.context() as m:
            if not taps:
                m.setattr(conv_taps, "taps_pay", lambda conv, lanes: False)
            elif any_channels:
                m.setattr(conv_taps, "MIN_OUT_CHANNELS", 0)
                m.setattr(conv_taps, "MAX_WASTE", 10.0)
                m.setattr(conv_taps, "STRIDED_MIN_K", 0)
                m.setattr(conv_taps, "PHASE_BYTES", 1 << 40)
            return ck.compile(model, asm=False, conv_algorithm="classic")

    def both(self, model, x, threads=1):
        before = self.calls
        got = self.compile(model, True).run(x, num_threads=threads)[0]
        assert self.calls > before, "the tap schedule did not take the Conv"
        return got, self.compile(model, False).run(x, num_threads=threads)[0]


@pytest.fixture
def taps(monkeypatch):
    return Taps(monkeypatch)


CASES = [
    # x shape, W shape, Conv attributes, bias, activation
    ((1, 16, 9, 31), (5, 16, 3, 3), dict(pads=[1, 1, 1, 1]), True, None),  # a part strip
    ((1, 8, 20, 24), (1, 8, 3, 3), dict(pads=[1, 1, 1, 1]), True, "Relu"),  # 1 channel
    ((2, 12, 10, 40), (40, 12, 3, 3), dict(pads=[1, 0, 2, 1]), False, "Relu"),  # batch, uneven
    ((1, 8, 24, 30), (33, 8, 3, 3), dict(dilations=[2, 2], pads=[2, 2, 2, 2]), True, "Clip"),
    ((1, 6, 17, 40), (16, 6, 5, 5), {}, False, None),  # unpadded
    ((1, 6, 17, 40), (24, 6, 2, 3), dict(pads=[0, 1, 1, 1]), True, "LeakyRelu"),  # epilogue
    ((2, 8, 70), (20, 8, 3), dict(pads=[1, 1]), True, "Relu"),  # 1-D
    ((1, 4, 6, 32, 40), (12, 4, 3, 3, 3), dict(pads=[1] * 6), True, None),  # 3-D
    ((1, 3, 5, 30, 33), (10, 3, 2, 3, 3), dict(pads=[0, 1, 1, 1, 1, 1]), False, "Relu"),
    ((1, 32, 56, 56), (64, 32, 3, 3), dict(pads=[1, 1, 1, 1]), True, "Relu"),  # many panels
    # one vector of output channels on AVX-512 (W^T in strips of 16: microkernel.half_rows)
    ((1, 16, 30, 29), (16, 16, 3, 3), dict(pads=[1, 1, 1, 1]), True, "Clip"),
    ((1, 4, 8, 16, 32), (16, 4, 3, 3, 3), dict(pads=[1] * 6), True, "Relu"),  # 3-D lines
    # strides: the phase planes (ResNet's stem, stride-2 3x3s, odd sizes, uneven pads)
    ((1, 3, 64, 64), (20, 3, 7, 7), dict(strides=[2, 2], pads=[3, 3, 3, 3]), True, "Relu"),
    ((1, 8, 15, 21), (16, 8, 3, 3), dict(strides=[2, 2], pads=[1, 1, 1, 1]), False, None),
    ((2, 6, 17, 20), (12, 6, 3, 3), dict(strides=[2, 2], pads=[0, 1, 2, 0]), True, "Clip"),
    ((1, 5, 14, 19), (9, 5, 3, 3), dict(strides=[2, 1], pads=[1, 1, 1, 1]), True, None),
    ((1, 4, 21, 22), (8, 4, 3, 3), dict(strides=[2, 2], dilations=[2, 3], pads=[2, 3, 2, 3]),
     True, "Relu"),
    ((1, 4, 16, 17), (8, 4, 4, 4), dict(strides=[2, 2]), False, "LeakyRelu"),  # even kernel
    ((2, 4, 41), (10, 4, 5), dict(strides=[2], pads=[2, 1]), True, None),  # 1-D
    ((1, 3, 9, 14, 13), (8, 3, 3, 3, 3), dict(strides=[2, 2, 2], pads=[1] * 6), True, "Relu"),
]


def _model(x, w_shape, bias, act, **attrs):
    if act == "LeakyRelu":
        from onnx import helper

        model = conv_act_model(x, w_shape, bias, None, **attrs)
        model.graph.node[0].output[0] = "y"
        model.graph.node.append(helper.make_node("LeakyRelu", ["y"], ["z"], alpha=0.1))
        return model
    return conv_act_model(x, w_shape, bias, act, **attrs)


@pytest.mark.parametrize("x_shape, w_shape, attrs, bias, act", CASES)
def test_taps_match_the_panels_and_onnxruntime(taps, x_shape, w_shape, attrs, bias, act):
    x = seeded(x_shape, 1)
    model = _model(x, w_shape, bias, act, **attrs)
    got, panels = taps.both(model, x)
    np.testing.assert_array_equal(got, panels)
    np.testing.assert_allclose(got, ort_run(model, [x])[0], rtol=1e-4, atol=1e-4)


def test_threads_give_the_same_bits(taps):
    x = seeded((1, 32, 28, 30), 2)
    model = conv_act_model(x, (48, 32, 3, 3), True, "Relu", pads=[1, 1, 1, 1])
    one, panels = taps.both(model, x)
    two, _ = taps.both(model, x, threads=2)
    np.testing.assert_array_equal(one, two)
    np.testing.assert_array_equal(one, panels)


@pytest.mark.parametrize("rows, row_bytes, positions, expected", [
    (56, 58 * 80 * 4, 58, (28, 2)),  # an even count: 2 chunks of whole panels
    (55, 57 * 80 * 4, 57, (11, 5)),  # 5 panels of 11 rows (t within T_BYTES): a chunk each
    (27, 29 * 144 * 4, 29, (27, 1)),  # one panel holds them all: 1 chunk
    (13, 15 * 272 * 4, 15, (13, 1)),  # 13 rows: one panel
    (55, 57 * 400 * 4, 57, (5, 11)),  # wide t: 11 panels of 5 rows, 5 MB of t's ...
])
def test_panel_rows(rows, row_bytes, positions, expected, monkeypatch):
    """(rows per panel, chunks): an even panel count gives 2 chunks; an odd count of 3 or
    more panels a chunk (and a t) per panel, the threads taking panels in turn."""
    if expected == (5, 11):  # ... beyond SLOTS_BYTES: 1 chunk
        assert conv_taps._panel_rows(rows, row_bytes, positions) == (5, 1)
        monkeypatch.setattr(conv_taps, "SLOTS_BYTES", 8 << 20)
    assert conv_taps._panel_rows(rows, row_bytes, positions) == expected


def test_odd_panel_counts_run_a_panel_per_thread(taps):
    """55 rows (5 panels of 11): the panel loop is the parallel one, each panel with a t of
    its own; same bits at 1 and 2 threads as the panels, onnxruntime's answer."""
    x = seeded((1, 16, 55, 55), 8)
    model = conv_act_model(x, (64, 16, 3, 3), True, "Relu", pads=[1, 1, 1, 1])
    k = compile_to("kernel-ir", model, conv_algorithm="classic")
    (t,) = [op for op in k.walk() if isinstance(op, krnl.AllocOp)
            and list(op.results[0].type.get_shape()) == [5, 11 * 57, 80]]
    (nest,) = [op for op in k.walk() if isinstance(op, krnl.IterateOp)
               and op.bound_list() == [(0, 5), (0, 1)]]
    assert krnl.parallel_loop(nest) is not None
    one, panels = taps.both(model, x)
    two, _ = taps.both(model, x, threads=2)
    np.testing.assert_array_equal(one, panels)
    np.testing.assert_array_equal(two, panels)
    np.testing.assert_allclose(one, ort_run(model, [x])[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("strides", [[1, 1], [2, 2]])
def test_nan_and_inf_reach_the_outputs_their_windows_hold(taps, strides):
    """A NaN or inf in the input reaches exactly the outputs whose windows hold it (the
    throw-away positions, the zero border and the other phases hold no input): as
    onnxruntime, bit for bit as the panels."""
    x = seeded((1, 8, 9, 31), 3)
    x[0, 3, 2, 2], x[0, 5, 8, 30], x[0, 0, 0, 0] = np.nan, np.inf, -np.inf
    model = conv_act_model(x, (40, 8, 3, 3), True, "Relu", pads=[1, 1, 1, 1],
                           strides=strides)
    got, panels = taps.both(model, x)
    np.testing.assert_array_equal(got, panels)
    ref = ort_run(model, [x])[0]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(ref))


@pytest.mark.parametrize("x_shape, w_shape, attrs, taken", [
    ((1, 8, 14, 14), (16, 8, 3, 3), dict(pads=[1, 1, 1, 1]), True),  # 16 of 14 columns
    ((1, 8, 13, 13), (16, 8, 3, 3), dict(pads=[1, 1, 1, 1]), False),  # 15 of 13: too many
    ((1, 8, 20, 20), (16, 8, 3, 3), dict(strides=[2, 2], pads=[1, 1, 1, 1]), True),  # 11/10
    ((1, 8, 20, 20), (16, 8, 3, 3), dict(strides=[3, 3], pads=[1, 1, 1, 1]), False),
    ((1, 8, 12, 12), (16, 8, 5, 5), dict(strides=[2, 2], pads=[2, 2, 2, 2]), False),  # 8/6
    ((1, 4, 20, 20), (16, 4, 3, 3), dict(strides=[2, 2], pads=[1, 1, 1, 1]), False),  # K 36
    ((1, 64, 113, 113), (16, 64, 3, 3), dict(strides=[2, 2]), False),  # 3.4 MB of planes
    ((1, 8, 20, 20), (16, 4, 3, 3), dict(group=2, pads=[1, 1, 1, 1]), False),
    ((1, 8, 20, 20), (16, 8, 1, 1), {}, False),  # one tap
    ((1, 8, 20, 20), (8, 8, 3, 3), dict(pads=[1, 1, 1, 1]), False),  # 8 output channels
])
def test_the_rule(taps, x_shape, w_shape, attrs, taken):
    x = seeded(x_shape, 4)
    model = conv_act_model(x, w_shape, True, "Relu", **attrs)
    got = taps.compile(model, True, any_channels=False).run(x)[0]
    assert taps.calls == int(taken)
    np.testing.assert_allclose(got, ort_run(model, [x])[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("channels, algorithm", [((16, 64), "classic"), ((64, 16), "classic"),
                                                 ((24, 24), "winograd-f2-fused"),
                                                 ((32, 32), "winograd-f2-fused"),
                                                 ((64, 64), "winograd-f2-fused")])
def test_auto_takes_the_taps_for_few_channels(channels, algorithm):
    """"auto": a 3x3 Conv takes F(2, 3) only where both channel counts reach
    AUTO_TAPS_CHANNELS_2D; fewer go to "classic", which is the tap schedule."""
    c, k = channels
    x = seeded((1, c, 28, 28), 5)
    model = conv_act_model(x, (k, c, 3, 3), True, "Relu", pads=[1, 1, 1, 1])
    onnx_ir = compile_to("onnx-ir", model)
    (op,) = [o for o in onnx_ir.walk() if o.name == "onnx.Conv"]
    assert conv_algorithm.choose(op, "auto") == algorithm


def test_the_verifier_bounds_a_taps_reach():
    """a_taps that reach past A's buffer are refused, naming A."""
    x = seeded((1, 4, 30, 30), 6)
    k = compile_to("kernel-ir", conv_act_model(x, (16, 4, 3, 3), True, None,
                                               pads=[1, 1, 1, 1]), conv_algorithm="classic")
    (mm,) = [op for op in k.walk() if isinstance(op, krnl.MatMulOp)]
    assert mm.taps is not None and len(mm.taps) == 9
    mm.attributes["a_taps"] = ArrayAttr([krnl.int_attr(t + 10**6) for t in mm.taps])
    with pytest.raises(VerifyException, match="its A"):
        mm.verify()


def test_a_float64_conv_keeps_the_panels(taps):
    x = seeded((1, 8, 20, 20), 7).astype(np.float64)
    model = conv_act_model(x, (16, 8, 3, 3), True, "Relu", pads=[1, 1, 1, 1])
    for init in model.graph.initializer:
        from onnx import numpy_helper

        init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float64),
                                              init.name))
    got = taps.compile(model, True).run(x)[0]
    assert taps.calls == 0
    ref = ort_run(conv_act_model(x.astype(np.float32), (16, 8, 3, 3), True, "Relu",
                                 pads=[1, 1, 1, 1]), [x.astype(np.float32)])[0]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_conv_py_reaches_the_schedule_through_the_module():
    """conv.py calls conv_taps through the module (the tests' monkeypatches reach it)."""
    assert conv_lowering.conv_taps is conv_taps


def test_a_table_with_other_row_strides_runs_row_by_row():
    """A krnl.matmul with a_taps whose rows are not one element apart (none of our lowerings
    makes one; here rows 0 apart, every output position reading position 0's taps) takes the
    micro-kernel's row-by-row path: the same bits as the untiled scalar code."""
    from compilerkit.krnl_passes.tile_matmul import tile_matmul

    x = seeded((1, 4, 30, 30), 6)
    model = conv_act_model(x, (16, 4, 3, 3), True, None, pads=[1, 1, 1, 1])
    results = []
    for tiled in (False, True):
        k = ck.lower(ck.optimize_onnx(ck.import_onnx(model)), opt_level=1)
        (mm,) = [op for op in k.walk() if isinstance(op, krnl.MatMulOp)]
        assert mm.taps is not None
        strides = krnl.ints_of(mm.strides)
        mm.attributes["strides"] = ArrayAttr([krnl.int_attr(s) for s in [0] + strides[1:]])
        if tiled:
            assert tile_matmul(k, simd=16) == 1
        results.append(ck.compile_kernel(k, asm=False).run(x)[0])
    assert np.array_equal(results[0], results[1])
    # the edit changed the answer: every position now holds position 0's sums
    assert not np.array_equal(results[0], ck.compile(model, asm=False).run(x)[0])


def _matmul_rows(model, monkeypatch) -> set:
    """The row counts of the Kernel IR's products, with the tap schedule taking every Conv
    (as `Taps.compile`)."""
    with monkeypatch.context() as m:
        m.setattr(conv_taps, "MAX_WASTE", 10.0)
        m.setattr(conv_taps, "STRIDED_MIN_K", 0)
        m.setattr(conv_taps, "PHASE_BYTES", 1 << 40)
        k = compile_to("kernel-ir", model, conv_algorithm="classic")
    return {op.sizes.data[0].value.data for op in k.walk() if isinstance(op, krnl.MatMulOp)}


@pytest.mark.parametrize("x_shape, w_shape, attrs", [
    ((1, 8, 6, 13, 20), (32, 8, 3, 3, 3), dict(pads=[1] * 6)),  # 20 outputs a line
    ((1, 4, 5, 9, 7), (16, 4, 3, 2, 3), dict(pads=[1, 0, 1, 1, 1, 0])),  # uneven pads
    ((1, 6, 9, 14, 13), (16, 6, 3, 3, 3), dict(strides=[2, 2, 2], pads=[1] * 6)),  # phases
    ((1, 13, 5, 6, 7), (24, 13, 3, 3, 3), dict(pads=[1] * 6)),  # 3 pieces of 4 channels + 1
])
def test_volumes_compute_only_their_lines(taps, monkeypatch, x_shape, w_shape, attrs):
    """A 3-D Conv's tap products run a line of outputs each (rows = the last axis's output
    extent), no throw-away position: the same bits as the padded grid's rows (2-D's way) and
    as the panels, at 1 and 2 threads, NaN and inf where onnxruntime has them."""
    x = seeded(x_shape, 4)
    x[0, 1, 2, 3, 4], x[0, 2, -1, -1, -1] = np.nan, np.inf
    model = conv_act_model(x, w_shape, True, "Relu", **attrs)
    out_last = (x_shape[-1] + attrs["pads"][2] + attrs["pads"][5] - w_shape[-1]) // (
        attrs.get("strides", [1])[-1]) + 1
    assert _matmul_rows(model, monkeypatch) == {out_last}
    got, panels = taps.both(model, x)
    two, _ = taps.both(model, x, threads=2)
    monkeypatch.setattr(conv_taps, "EXACT_MIN_AXES", 4)  # the padded grid's rows
    assert out_last not in _matmul_rows(model, monkeypatch)
    grid, _ = taps.both(model, x)
    for other in (panels, two, grid):
        np.testing.assert_array_equal(got, other)
    ref = ort_run(model, [x])[0]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_planes_lines_also_work_in_2d(taps, monkeypatch):
    """Lines are 3-D's choice only by measurement: in 2-D they give the grid's bits too."""
    x = seeded((2, 12, 10, 17), 5)
    model = conv_act_model(x, (40, 12, 3, 3), False, "Relu", pads=[1, 0, 2, 1])
    grid, _ = taps.both(model, x)
    monkeypatch.setattr(conv_taps, "EXACT_MIN_AXES", 2)
    assert _matmul_rows(model, monkeypatch) == {17 + 0 + 1 - 3 + 1}
    lines, _ = taps.both(model, x, threads=2)
    np.testing.assert_array_equal(lines, grid)


def test_small_volumes_take_the_lines(monkeypatch):
    """3-D Convs compute no throw-away position, so the waste bound that keeps small 2-D planes
    on im2col does not hold them back: an 8^3 volume (the grid would compute 1.56x) takes
    the taps, in pieces of whole channels' taps (LINE_K), with the panels' bits."""
    x = seeded((1, 22, 8, 8, 8), 9)
    model = conv_act_model(x, (32, 22, 3, 3, 3), True, "Relu", pads=[1] * 6)
    assert conv_taps.waste([3, 3, 3], [1, 1, 1], [8, 8, 8]) > conv_taps.MAX_WASTE
    calls = []
    real = conv_taps.tap_panels
    monkeypatch.setattr(conv_taps, "tap_panels", lambda *a: calls.append(1) or real(*a))
    got = ck.compile(model, asm=False, conv_algorithm="classic").run(x)[0]
    assert calls
    k = compile_to("kernel-ir", model, conv_algorithm="classic")
    depths = sorted({op.sizes.data[2].value.data for op in k.walk()
                     if isinstance(op, krnl.MatMulOp)})
    assert depths == [2 * 27, 4 * 27]  # 22 channels: 5 pieces of 4 (LINE_K 128), then 2
    monkeypatch.setattr(conv_taps, "taps_pay", lambda conv, lanes: False)
    panels = ck.compile(model, asm=False, conv_algorithm="classic").run(x)[0]
    np.testing.assert_array_equal(got, panels)
    np.testing.assert_allclose(got, ort_run(model, [x])[0], rtol=1e-4, atol=1e-4)


def test_sixteen_channels_take_one_vector_strips():
    """A Conv with at most one vector of output channels stores W^T in strips one vector
    wide (16 columns on AVX-512, where the micro-kernel's strips are 32): its products run in
    the kernel's one-vector blocks (microkernel.half_rows) instead of computing 16 zero
    columns. Same bits as the panels (the CASES above)."""
    from compilerkit.backends.host import host_target

    lanes = host_target().vector_width
    if lanes < 16:
        pytest.skip("one-vector strips differ from two-vector ones only where 16 channels fit "
                    "one vector")
    x = seeded((1, 8, 20, 22), 3)
    model = conv_act_model(x, (16, 8, 3, 3), True, "Relu", pads=[1, 1, 1, 1])
    kir = str(compile_to("kernel-ir", model, conv_algorithm="classic"))
    assert f"memref<1x72x{lanes}xf32>" in kir  # W^T: one strip of K = 8 x 9 rows
    got = ck.compile(model, asm=False, conv_algorithm="classic").run(x)[0]
    panels = ck.compile(model, asm=False, conv_algorithm="im2col").run(x)[0]
    np.testing.assert_array_equal(got, panels)
