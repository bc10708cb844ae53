// RUN: python -m compilerkit.opt -p 'lower-to-krnl{conv_algorithm=classic}' %s | filecheck %s
// The tap schedule of a stride-2 3x3 Conv (lowering/conv_taps.py): the padded input split by
// phase, padded position P to phase P % 2, grid position P // 2, so output o's tap k reads grid
// position o + k // 2 of phase k % 2.
// x [1, 8, 16, 20], pads 1: padded extent 17 x 21 (reach (8 - 1) * 2 + 3 = 17, (10 - 1) * 2 +
// 3 = 21), grid 9 x 11 plus a spare row: planes [8 channels, 4 phases, 10, 11], a phase's
// plane 110, a channel's 440, pitch 11. Tap (kh, kw) is phase (kh % 2) * 2 + kw % 2 at
// (kh // 2) * 11 + kw // 2: (0,0) 0, (0,1) 110, (0,2) 1, (1,0) 220, (1,1) 330, (1,2) 221,
// (2,0) 11, (2,1) 121, (2,2) 12. K = 8 * 9 = 72. Output 8 x 10: one panel of 8 grid rows of
// 11 positions (1 of every 11 thrown away): t [1, 88, 48].
// Copies: one nest per row phase q (rows 2j + q), both column phases in it (columns 2j and
// 2j + 1, an interleaved pair), 8 x 8 x 10 each.
builtin.module {
  func.func @taps_stride_2(%x: tensor<1x8x16x20xf32>, %b: tensor<16xf32>) -> tensor<1x16x8x10xf32> attributes {input_names = ["x", "b"], output_names = ["y"], onnx_opset = 17 : i64} {
    %w = "onnx.Constant"() {value = dense<0.5> : tensor<16x8x3x3xf32>} : () -> tensor<16x8x3x3xf32>
    %y = "onnx.Conv"(%x, %w, %b) {onnx_node_name = "c", pads = [1 : i64, 1 : i64, 1 : i64, 1 : i64], strides = [2 : i64, 2 : i64]} : (tensor<1x8x16x20xf32>, tensor<16x8x3x3xf32>, tensor<16xf32>) -> tensor<1x16x8x10xf32>
    func.return %y : tensor<1x16x8x10xf32>
  }
}
// CHECK-LABEL: func.func @taps_stride_2(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x8x16x20xf32>, [[B:%[0-9]+]]: memref<16xf32>, [[Y:%[0-9]+]]: memref<1x16x8x10xf32>)
// CHECK:         [[WT:%[0-9]+]] = "krnl.global"() {sym_name = "wt_c", {{.*}}} : () -> memref<1x72x16xf32>
// CHECK:         [[S:%[0-9]+]] = "krnl.alloc"() {onnx_node = "c"} : () -> memref<8x4x10x11xf32>
// CHECK:         [[T:%[0-9]+]] = "krnl.alloc"() {onnx_node = "c"} : () -> memref<1x88x48xf32>
// CHECK:           "krnl.store"({{%[0-9]+}}, [[S]],
// CHECK:           }) {bounds = {{\[\[}}0 : i64, 8 : i64], [0 : i64, 4 : i64], [0 : i64, 10 : i64], [0 : i64, 11 : i64]]
// CHECK-COUNT-2:     "krnl.load"([[X]],
// CHECK:           }) {bounds = {{\[\[}}0 : i64, 8 : i64], [0 : i64, 8 : i64], [0 : i64, 10 : i64]]
// CHECK-COUNT-2:     "krnl.load"([[X]],
// CHECK:           }) {bounds = {{\[\[}}0 : i64, 8 : i64], [0 : i64, 8 : i64], [0 : i64, 10 : i64]]
// CHECK:               "krnl.matmul"([[S]], [[WT]], [[T]],
// CHECK-SAME:            {sizes = [88 : i64, 16 : i64, 72 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [1 : i64, 440 : i64, 16 : i64, 48 : i64], simd = 1 : i64, a_taps = [0 : i64, 110 : i64, 1 : i64, 220 : i64, 330 : i64, 221 : i64, 11 : i64, 121 : i64, 12 : i64]}
// CHECK:             "krnl.store"({{%[0-9]+}}, {{%[0-9]+}},
// CHECK:           }) {bounds = {{\[\[}}0 : i64, 16 : i64], [0 : i64, 8 : i64], [0 : i64, 10 : i64]]
