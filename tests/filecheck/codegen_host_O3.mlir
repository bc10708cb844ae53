// RUN: python %S/split_cases.py compilerkit %s --emit llvm-ir --target host -O3 | filecheck %s
// Host code generation at -O3, Kernel IR in (already scheduled by tile-matmul and planned):
// each node's nests stay one internal, noinline function named after the node (fastcc, noalias
// buffer parameters), and a tiled krnl.matmul with `simd` lanes calls compilerkit's register-
// blocked micro-kernel ck_matmul_f32_v<simd>, emitted once per module and shared by every node
// that uses that width; its inner product is <simd x float> fused multiply-adds. The
// split_cases.py harness prints `// case @NAME` before each case's output.

func.func @two_matmuls_share_one_kernel(%0: memref<16x32xf32>, %1: memref<32x24xf32>, %2: memref<24x8xf32>, %3: memref<16x8xf32>) attributes {input_names = ["a", "b", "c"], output_names = ["y"], num_inputs = 3 : i64, arena_bytes = 1536 : i64, naive_bytes = 1536 : i64} {
  %4 = "krnl.alloc"() {onnx_node = "mm_a", offset = 0 : i64} : () -> memref<16x24xf32>
  %5, %6 = "krnl.define_loops"() {onnx_node = "mm_a"} : () -> (!krnl.loop, !krnl.loop)
  "krnl.iterate"(%5, %6, %5, %6) ({
  ^bb0(%7: index, %8: index):
    %9 = arith.constant 0.000000e+00 : f32
    "krnl.store"(%9, %4, %7, %8) : (f32, memref<16x24xf32>, index, index) -> ()
  }) {bounds = [[0 : i64, 16 : i64], [0 : i64, 24 : i64]], n_original = 2 : i64, onnx_node = "mm_a"} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
  "krnl.iterate"() ({
    %10 = arith.constant 0 : index
    %11 = arith.constant 0 : index
    %12 = arith.constant 0 : index
    %13, %14, %15 = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
    %16, %17 = "krnl.block"(%15) {tile = 32 : i64} : (!krnl.loop) -> (!krnl.loop, !krnl.loop)
    %18, %19 = "krnl.block"(%14) {tile = 24 : i64} : (!krnl.loop) -> (!krnl.loop, !krnl.loop)
    %20, %21 = "krnl.block"(%13) {tile = 16 : i64} : (!krnl.loop) -> (!krnl.loop, !krnl.loop)
    "krnl.permute"(%20, %21, %18, %19, %16, %17) {map = [2 : i64, 3 : i64, 0 : i64, 4 : i64, 1 : i64, 5 : i64]} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    "krnl.iterate"(%13, %14, %15, %18, %16, %20) ({
    ^bb0(%22: index, %23: index, %24: index):
      "krnl.matmul"(%0, %1, %4, %22, %23, %24, %10, %11, %12) {sizes = [16 : i64, 24 : i64, 32 : i64], tile = [16 : i64, 24 : i64, 32 : i64], strides = [32 : i64, 1 : i64, 24 : i64, 24 : i64], simd = 8 : i64} : (memref<16x32xf32>, memref<32x24xf32>, memref<16x24xf32>, index, index, index, index, index, index) -> ()
    }) {bounds = [[0 : i64, 16 : i64], [0 : i64, 24 : i64], [0 : i64, 32 : i64]], n_original = 3 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
  }) {bounds = [], n_original = 0 : i64, onnx_node = "mm_a"} : () -> ()
  %25, %26 = "krnl.define_loops"() {onnx_node = "mm_b"} : () -> (!krnl.loop, !krnl.loop)
  "krnl.iterate"(%25, %26, %25, %26) ({
  ^bb0(%27: index, %28: index):
    %29 = arith.constant 0.000000e+00 : f32
    "krnl.store"(%29, %3, %27, %28) : (f32, memref<16x8xf32>, index, index) -> ()
  }) {bounds = [[0 : i64, 16 : i64], [0 : i64, 8 : i64]], n_original = 2 : i64, onnx_node = "mm_b"} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
  "krnl.iterate"() ({
    %30 = arith.constant 0 : index
    %31 = arith.constant 0 : index
    %32 = arith.constant 0 : index
    %33, %34, %35 = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
    %36, %37 = "krnl.block"(%35) {tile = 24 : i64} : (!krnl.loop) -> (!krnl.loop, !krnl.loop)
    %38, %39 = "krnl.block"(%34) {tile = 8 : i64} : (!krnl.loop) -> (!krnl.loop, !krnl.loop)
    %40, %41 = "krnl.block"(%33) {tile = 16 : i64} : (!krnl.loop) -> (!krnl.loop, !krnl.loop)
    "krnl.permute"(%40, %41, %38, %39, %36, %37) {map = [2 : i64, 3 : i64, 0 : i64, 4 : i64, 1 : i64, 5 : i64]} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    "krnl.iterate"(%33, %34, %35, %38, %36, %40) ({
    ^bb0(%42: index, %43: index, %44: index):
      "krnl.matmul"(%4, %2, %3, %42, %43, %44, %30, %31, %32) {sizes = [16 : i64, 8 : i64, 24 : i64], tile = [16 : i64, 8 : i64, 24 : i64], strides = [24 : i64, 1 : i64, 8 : i64, 8 : i64], simd = 8 : i64} : (memref<16x24xf32>, memref<24x8xf32>, memref<16x8xf32>, index, index, index, index, index, index) -> ()
    }) {bounds = [[0 : i64, 16 : i64], [0 : i64, 8 : i64], [0 : i64, 24 : i64]], n_original = 3 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
  }) {bounds = [], n_original = 0 : i64, onnx_node = "mm_b"} : () -> ()
  func.return
}
// mm_a is 16x32 @ 32x24, mm_b 16x24 @ 24x8; the intermediate (16 x 24 x 4 = 1536 bytes) is
// the whole arena.
// CHECK-LABEL: // case @two_matmuls_share_one_kernel
// CHECK:       define {{.*}}i64 @main_graph(
// CHECK:         call fastcc void @main_graph_1_mm_a(
// CHECK-NEXT:    call fastcc void @main_graph_2_mm_b(
// CHECK:       define internal fastcc void @main_graph_1_mm_a(ptr noalias
// CHECK:         call fastcc void @ck_matmul_f32_v8(
// CHECK:       define internal fastcc void @ck_matmul_f32_v8(ptr noalias
// CHECK:         call <8 x float> @llvm.fmuladd.v8f32(
// CHECK:       define internal fastcc void @main_graph_2_mm_b(ptr noalias
// CHECK:         call fastcc void @ck_matmul_f32_v8(
// CHECK-NOT:   define {{.*}}@ck_matmul
// CHECK:       define {{.*}}i64 @main_graph_arena_bytes()
// CHECK-NEXT:  {{.*}}:
// CHECK-NEXT:    ret i64 1536
// CHECK:       attributes #{{[0-9]+}} = { {{.*}}noinline

// -----
func.func @simd4_kernel(%a: memref<8x8xf32>, %b: memref<8x8xf32>, %c: memref<8x8xf32>) attributes {input_names = ["a", "b"], output_names = ["c"], num_inputs = 2 : i64, arena_bytes = 0 : i64, naive_bytes = 0 : i64} {
  %z = arith.constant 0 : index
  %i, %j, %k = "krnl.define_loops"() {onnx_node = "mm"} : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
  %ko, %ki = "krnl.block"(%k) {tile = 8 : i64} : (!krnl.loop) -> (!krnl.loop, !krnl.loop)
  %jo, %ji = "krnl.block"(%j) {tile = 8 : i64} : (!krnl.loop) -> (!krnl.loop, !krnl.loop)
  %io, %ii = "krnl.block"(%i) {tile = 8 : i64} : (!krnl.loop) -> (!krnl.loop, !krnl.loop)
  "krnl.permute"(%io, %ii, %jo, %ji, %ko, %ki) {map = [2 : i64, 3 : i64, 0 : i64, 4 : i64, 1 : i64, 5 : i64]} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
  "krnl.iterate"(%i, %j, %k, %jo, %ko, %io) ({
  ^bb0(%x: index, %y: index, %w: index):
    "krnl.matmul"(%a, %b, %c, %x, %y, %w, %z, %z, %z) {sizes = [8 : i64, 8 : i64, 8 : i64], tile = [8 : i64, 8 : i64, 8 : i64], strides = [8 : i64, 1 : i64, 8 : i64, 8 : i64], simd = 4 : i64} : (memref<8x8xf32>, memref<8x8xf32>, memref<8x8xf32>, index, index, index, index, index, index) -> ()
  }) {bounds = [[0 : i64, 8 : i64], [0 : i64, 8 : i64], [0 : i64, 8 : i64]], n_original = 3 : i64, onnx_node = "mm"} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
  func.return
}
// simd = 4 (a 128-bit target's f32 lanes): the 4-lane kernel, and no 8-lane one.
// CHECK-LABEL: // case @simd4_kernel
// CHECK-NOT:   ck_matmul_f32_v8
// CHECK:       call fastcc void @ck_matmul_f32_v4(
// CHECK:       define internal fastcc void @ck_matmul_f32_v4(
// CHECK:         call <4 x float> @llvm.fmuladd.v4f32(
// CHECK-NOT:   ck_matmul_f32_v8
