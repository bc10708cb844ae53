"""The CUDA driver wrapper, with a hand-written NVPTX kernel compiled by llvmlite.

On a machine without a GPU only the PTX emission and the clear no-device error are checked; the
`gpu` tests load the PTX through the driver and compare the kernel's result with numpy.
"""

import llvmlite.binding as llvm
import numpy as np
import pytest

from compilerkit.backends import cuda_driver

SAXPY = r"""
target triple = "nvptx64-nvidia-cuda"
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()

define ptx_kernel void @saxpy(ptr addrspace(1) %x, ptr addrspace(1) %y, float %a, i64 %n) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %bid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %bdim = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %base = mul i32 %bid, %bdim
  %i32 = add i32 %base, %tid
  %i = zext i32 %i32 to i64
  %inside = icmp slt i64 %i, %n
  br i1 %inside, label %body, label %done
body:
  %px = getelementptr float, ptr addrspace(1) %x, i64 %i
  %py = getelementptr float, ptr addrspace(1) %y, i64 %i
  %vx = load float, ptr addrspace(1) %px
  %vy = load float, ptr addrspace(1) %py
  %ax = fmul float %a, %vx
  %r = fadd float %ax, %vy
  store float %r, ptr addrspace(1) %py
  br label %done
done:
  ret void
}
"""


def ptx_for(sm: str) -> str:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    module = llvm.parse_assembly(SAXPY)
    module.verify()
    target = llvm.Target.from_triple("nvptx64-nvidia-cuda")
    machine = target.create_target_machine(cpu=sm, features="+ptx80", opt=2)
    return machine.emit_assembly(module)


def test_llvmlite_emits_ptx_for_the_kernel():
    ptx = ptx_for("sm_90")
    assert ".target sm_90" in ptx
    assert ".entry saxpy" in ptx
    assert "fma.rn.f32" in ptx or "mul.rn.f32" in ptx or "mul.f32" in ptx


def test_no_device_error_is_clear():
    if cuda_driver.cuda_available():
        pytest.skip("a CUDA device exists here")
    with pytest.raises(cuda_driver.NoCudaDevice, match="no CUDA device found"):
        cuda_driver.context()


@pytest.mark.gpu
def test_saxpy_runs_on_the_device():
    ctx = cuda_driver.context()
    assert ctx.info.compute_capability[0] >= 5
    kernel = ctx.load_ptx(ptx_for(ctx.info.sm)).kernel("saxpy")
    n = 100_003  # not a multiple of the block: the bounds check matters
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    dx, dy = ctx.alloc(x.nbytes), ctx.alloc(y.nbytes)
    try:
        dx.upload(x)
        dy.upload(y)
        block = 256
        kernel.launch(((n + block - 1) // block,), (block,),
                      [("ptr", dx), ("ptr", dy), ("f32", 2.5), ("i64", n)])
        ctx.synchronize()
        out = dy.download(np.empty_like(y))
    finally:
        dx.free()
        dy.free()
    np.testing.assert_allclose(out, np.float32(2.5) * x + y, rtol=1e-6, atol=1e-6)


@pytest.mark.gpu
def test_size_mismatch_is_refused_before_the_driver_sees_it():
    ctx = cuda_driver.context()
    buffer = ctx.alloc(16)
    try:
        with pytest.raises(ValueError, match="upload of 32 bytes into a 16-byte buffer"):
            buffer.upload(np.zeros(8, np.float32))
    finally:
        buffer.free()


@pytest.mark.gpu
def test_graph_replays_the_captured_launches_in_order():
    ctx = cuda_driver.context()
    kernel = ctx.load_ptx(ptx_for(ctx.info.sm)).kernel("saxpy")
    n, block = 5_000, 256
    rng = np.random.default_rng(1)
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    dx, dy = ctx.alloc(x.nbytes), ctx.alloc(y.nbytes)
    args = [("ptr", dx), ("ptr", dy), ("f32", 0.5), ("i64", n)]
    graph = None
    try:
        dx.upload(x)
        dy.upload(y)
        graph = cuda_driver.Graph(ctx, lambda stream: [
            kernel.launch(((n + block - 1) // block,), (block,), args, stream=stream)
            for _ in range(2)])
        captured_only = dy.download(np.empty_like(y))  # capturing runs nothing
        graph.launch()
        graph.launch()
        out = dy.download(np.empty_like(y))
    finally:
        if graph is not None:
            graph.destroy()
        dx.free()
        dy.free()
    np.testing.assert_array_equal(captured_only, y)
    expected = y
    for _ in range(4):  # two launches per replay, two replays, in order (float32 like the GPU)
        expected = np.float32(0.5) * x + expected
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6)
