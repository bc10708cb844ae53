// RUN: python -m compilerkit.opt -p 'lower-to-krnl{conv_algorithm=classic}' %s | filecheck %s
// The tap schedule (lowering/conv_taps.py) of a stride-1 3x3 Conv with constant weights:
// t[q, oc] = bias[oc] + sum over (c, tap) of planes[c * plane + tap + q] * W^T[(c, tap), oc],
// the input planes read in place through krnl.matmul's a_taps, no im2col.
// x [1, 4, 16, 30], pads 1: padded extent 18 x 32, plus one spare row (the last panel's
// throw-away positions read inside it): scratch [1, 4, 19, 32], plane 19 * 32 = 608, pitch 32.
// Taps (kh, kw) at kh * 32 + kw: 0, 1, 2, 32, 33, 34, 64, 65, 66. K = 4 * 9 = 36, A's rows one
// position apart (row stride 1), its column (c, tap) at c * 608 + tap. W^T in one strip of
// 16 columns (16 output channels: one vector, the micro-kernel's one-vector blocks; two
// vectors of AVX2, one strip of its width): [1, 36, 16]. Panels: 16 rows in 2 chunks of 8 rows (a
// chunk per thread), 8 * 32 = 256 positions each (2 of every 32 thrown away): t [2, 256, 48]
// (rows one cache line longer than the strip).
builtin.module {
  func.func @taps_3x3(%x: tensor<1x4x16x30xf32>, %b: tensor<16xf32>) -> tensor<1x16x16x30xf32> attributes {input_names = ["x", "b"], output_names = ["y"], onnx_opset = 17 : i64} {
    %w = "onnx.Constant"() {value = dense<0.5> : tensor<16x4x3x3xf32>} : () -> tensor<16x4x3x3xf32>
    %y = "onnx.Conv"(%x, %w, %b) {onnx_node_name = "c", pads = [1 : i64, 1 : i64, 1 : i64, 1 : i64], activation = "Relu"} : (tensor<1x4x16x30xf32>, tensor<16x4x3x3xf32>, tensor<16xf32>) -> tensor<1x16x16x30xf32>
    func.return %y : tensor<1x16x16x30xf32>
  }
}
// CHECK-LABEL: func.func @taps_3x3(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x4x16x30xf32>, [[B:%[0-9]+]]: memref<16xf32>, [[Y:%[0-9]+]]: memref<1x16x16x30xf32>)
// CHECK:         [[WT:%[0-9]+]] = "krnl.global"() {sym_name = "wt_c", {{.*}}} : () -> memref<1x36x16xf32>
// CHECK:         [[S:%[0-9]+]] = "krnl.alloc"() {onnx_node = "c"} : () -> memref<1x4x19x32xf32>
// CHECK:         [[T:%[0-9]+]] = "krnl.alloc"() {onnx_node = "c"} : () -> memref<2x256x48xf32>
// CHECK:         [[YV:%[0-9]+]] = "krnl.reshape"([[Y]]) {onnx_node = "c"} : (memref<1x16x16x30xf32>) -> memref<1x16x480xf32>
// The planes: their border zeroed (first and last rows, the spare row with them; first and
// last columns), then x inside it.
// CHECK:           "krnl.store"({{%[0-9]+}}, [[S]],
// CHECK:           }) {bounds = {{\[\[}}0 : i64, 4 : i64], [0 : i64, 1 : i64], [0 : i64, 32 : i64]]
// CHECK:           }) {bounds = {{\[\[}}0 : i64, 4 : i64], [17 : i64, 19 : i64], [0 : i64, 32 : i64]]
// CHECK:           }) {bounds = {{\[\[}}0 : i64, 4 : i64], [0 : i64, 19 : i64], [0 : i64, 1 : i64]]
// CHECK:           }) {bounds = {{\[\[}}0 : i64, 4 : i64], [0 : i64, 19 : i64], [31 : i64, 32 : i64]]
// CHECK:           "krnl.load"([[X]],
// CHECK:           "krnl.store"({{%[0-9]+}}, [[S]],
// Per (chunk, panel): t = bias, then the product over the panel's 256
// positions, then the 8 x 30 real positions of its 8 rows out, through the Relu: blocks of
// 16 channels x 16 columns (t's block rows read once), then the rows' last 14 columns.
// CHECK:             "krnl.load"([[B]],
// CHECK:             "krnl.store"({{%[0-9]+}}, [[T]],
// CHECK:           }) {bounds = {{\[\[}}0 : i64, 256 : i64], [0 : i64, 16 : i64]]
// CHECK:               "krnl.matmul"([[S]], [[WT]], [[T]],
// CHECK-SAME:            {sizes = [256 : i64, 16 : i64, 36 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [1 : i64, 608 : i64, 16 : i64, 48 : i64], simd = 1 : i64, a_taps = [0 : i64, 1 : i64, 2 : i64, 32 : i64, 33 : i64, 34 : i64, 64 : i64, 65 : i64, 66 : i64]}
// CHECK:             [[V:%[0-9]+]] = "krnl.load"([[T]],
// CHECK:             [[R:%[0-9]+]] = arith.maximumf [[V]],
// CHECK-NEXT:        "krnl.store"([[R]], [[YV]],
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 8 : i64], [0 : i64, 1 : i64], [0 : i64, 16 : i64], [0 : i64, 16 : i64]]
// CHECK:             [[V2:%[0-9]+]] = "krnl.load"([[T]],
// CHECK:             [[R2:%[0-9]+]] = arith.maximumf [[V2]],
// CHECK-NEXT:        "krnl.store"([[R2]], [[YV]],
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 16 : i64], [0 : i64, 8 : i64], [0 : i64, 14 : i64]]
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 1 : i64]]
