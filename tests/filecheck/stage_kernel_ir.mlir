// RUN: python %S/split_cases.py compilerkit %s --emit kernel-ir --target host -O0 | filecheck %s --check-prefix=O0
// RUN: python %S/split_cases.py compilerkit %s --emit kernel-ir --target host -O2 | filecheck %s --check-prefix=O2
// RUN: python %S/split_cases.py compilerkit %s --emit kernel-ir --target host -O3 | filecheck %s --check-prefix=O3
// RUN: python %S/split_cases.py compilerkit %s --emit kernel-ir --target s390x -O3 | filecheck %s --check-prefix=Z
// RUN: python %S/split_cases.py compilerkit %s --emit kernel-ir --target gpu -O3 | filecheck %s --check-prefix=GPU
// The kernel-ir stage of the stage driver (ONNX IR in, planned Kernel IR out): which Kernel IR
// passes each target runs at each -O level (Target.schedule_passes, then plan-buffers):
//   CPUs at -O0 and -O1 run none; at -O2 unroll-small and parallelize; at -O3 tile-matmul{simd =
//   the f32 lanes}, unroll-small and parallelize (host: 4, 8 or 16 lanes by its vector unit;
//   s390x z13: 128-bit / 32 = 4; these small cases stay below parallelize's min_work);
//   the GPU runs unroll-small from -O2, then gpu-map; never tile-matmul (its matmul kernel
//   tiles itself).
// The pass-level details are in krnl_tile_matmul.mlir, krnl_unroll_small.mlir, krnl_gpu_map.mlir,
// krnl_parallelize.mlir.

func.func @matmul_16(%a: tensor<16x16xf32>, %b: tensor<16x16xf32>) -> tensor<16x16xf32> attributes {input_names = ["a", "b"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.MatMul"(%a, %b) {onnx_node_name = "mm"} : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  func.return %y : tensor<16x16xf32>
}
// O0-LABEL: // case @matmul_16
// O0-NOT:     "krnl.block"
// O0:         "krnl.matmul"{{.*}}tile = [1 : i64, 1 : i64, 1 : i64]
// O0-SAME:    simd = 1 : i64
// O2-LABEL: // case @matmul_16
// O2-NOT:     "krnl.block"
// O2:         "krnl.matmul"{{.*}}tile = [1 : i64, 1 : i64, 1 : i64]
// O3-LABEL: // case @matmul_16
// O3-COUNT-3: "krnl.block"
// O3:         "krnl.permute"{{.*}}map = [2 : i64, 3 : i64, 0 : i64, 4 : i64, 1 : i64, 5 : i64]
// O3:         "krnl.matmul"{{.*}}tile = [16 : i64, 16 : i64, 16 : i64]
// O3-SAME:    simd = {{4|8|16}} : i64
// Z-LABEL:  // case @matmul_16
// Z-COUNT-3:  "krnl.block"
// Z:          "krnl.matmul"{{.*}}tile = [16 : i64, 16 : i64, 16 : i64]
// Z-SAME:     simd = 4 : i64
// GPU-LABEL: // case @matmul_16
// GPU-NOT:    "krnl.block"
// GPU:        "krnl.matmul"{{.*}}tile = [1 : i64, 1 : i64, 1 : i64]
// GPU:        gpu_map = #krnl.gpu_map<matmul, tile = 16>

// -----
func.func @maxpool_2x2(%x: tensor<1x2x8x8xf32>) -> tensor<1x2x4x4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y, %idx = "onnx.MaxPool"(%x) {kernel_shape = [2 : i64, 2 : i64], strides = [2 : i64, 2 : i64], onnx_node_name = "pool"} : (tensor<1x2x8x8xf32>) -> (tensor<1x2x4x4xf32>, none)
  func.return %y : tensor<1x2x4x4xf32>
}
// On CPUs (lowering/pool.py) a float MaxPool runs per (n, c) plane (n 1, c 2): its running
// sums zeroed (a nest of 4), then a nest over oh 4 holding one over ow 4 (the output's one
// region), whose body is the 2 x 2 window unrolled by the lowering itself (a value per output,
// folded tap by tap, stored once), then the plane's maxNum redo under an scf.if, one nest over
// (oh 4, ow 4). unroll-small marks the innermost loops: the zeroing loop, the window nest's
// ow (4 copies), and ow and oh of the redo (4 x 4 = 16 copies). From -O2.
// The GPU (one lane) gets one nest over (n 1, c 2, oh 4, ow 4): unroll-small marks ow and oh
// (c would make 32) before the nest is mapped.
// O0-LABEL: // case @maxpool_2x2
// O0-NOT:     "krnl.unroll"
// O2-LABEL: // case @maxpool_2x2
// O2:          "krnl.unroll"
// O2-NEXT:     "krnl.iterate"
// O2:         bounds = {{\[\[}}0 : i64, 4 : i64]], n_original = 1
// O2:          "krnl.iterate"
// O2:          "krnl.unroll"
// O2-NEXT:     "krnl.iterate"
// O2:         bounds = {{\[\[}}0 : i64, 4 : i64]], n_original = 1
// O2-NEXT:    bounds = {{\[\[}}0 : i64, 4 : i64]], n_original = 1
// O2:         scf.if
// O2:          "krnl.unroll"
// O2-NEXT:     "krnl.unroll"
// O2-NEXT:     "krnl.iterate"
// O2:         bounds = {{\[\[}}0 : i64, 4 : i64], [0 : i64, 4 : i64]], n_original = 2
// Z-LABEL:  // case @maxpool_2x2
// Z:           "krnl.unroll"
// Z-NEXT:      "krnl.iterate"
// Z:           "krnl.unroll"
// Z-NEXT:      "krnl.iterate"
// GPU-LABEL: // case @maxpool_2x2
// GPU:         "krnl.unroll"
// GPU-NEXT:    "krnl.unroll"
// GPU-NEXT:    "krnl.iterate"
// GPU:        n_original = 4 : i64{{.*}}gpu_map = #krnl.gpu_map<flat
