// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// Conv (lowering/conv.py) by im2col + krnl.matmul, one panel of output rows at a time, per
// (batch entry n, group g): the panel's input patches are copied into a column buffer [slots, C/g, kernel..., rows, rest of out spatial]
// (`_panel_rows` -> (rows, shared): one slot per panel when threads may share the panel loop,
// else one slot, index 0, reused), then out[n, g*OCg:(g+1)*OCg, panel] += W_g . col with
// M = OC/g, N = panel columns, K = C/g * prod(kernel), the product starting the panel from the
// bias (or 0: krnl.matmul's `start`; a grouped Conv's bias fills the panel first). Input
// position of output o, tap k on a spatial axis: o * stride + k * dilation - pad_begin. When a tap can fall into the padding,
// the scratch is [groups, C/g, padded...] (one set of planes per group); inside the (n, g)
// nest `_copy_in` zeroes group g's planes and copies x[n, g*C/g + c] into scratch[g, c] at
// +pad_begin, and the column buffer reads scratch[g, c] at o * stride + k * dilation with no
// guard. A 1x1, stride-1, unpadded Conv reads x directly as the B matrix. (Grouped Convs with few taps take the direct schedule:
// lower_conv_direct.mlir.)

// x [1, 2, 5, 5], w [3, 2, 3, 3], pads 1, strides 2: out = (5 + 2 - 3) / 2 + 1 = 3 per axis.
// The scratch is [groups, C/g, 7, 7] = [1, 2, 7, 7]: the last tap reads (3 - 1) * 2 + 2 + 1 = 7
// positions. Panels: 3 rows of 3 columns, per row 18 * 3 * 4 = 216 bytes of col, fit =
// max(1, 2 MiB // 216, ceil(64 / 3) = 22) = 9709; `_even_panels(3, 22, 9709)` has no height
// (22 > 3 rows), and fit >= 3, so one panel of all 3 rows, not shared: col is
// [1, 2, 3, 3, 3, 3] (one slot, written at slot index 0); M = 3, N = 9, K = 18.
func.func @conv_pad_stride(%x: tensor<1x2x5x5xf32>, %w: tensor<3x2x3x3xf32>) -> tensor<1x3x3x3xf32> attributes {input_names = ["x", "w"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.Conv"(%x, %w, %none) {pads = [1, 1, 1, 1], strides = [2, 2], onnx_node_name = "conv"} : (tensor<1x2x5x5xf32>, tensor<3x2x3x3xf32>, none) -> tensor<1x3x3x3xf32>
  func.return %y : tensor<1x3x3x3xf32>
}
// CHECK-LABEL: func.func @conv_pad_stride(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x2x5x5xf32>, [[W:%[0-9]+]]: memref<3x2x3x3xf32>, [[Y:%[0-9]+]]: memref<1x3x3x3xf32>)
// CHECK:         [[YV:%[0-9]+]] = "krnl.reshape"([[Y]]) {onnx_node = "conv"} : (memref<1x3x3x3xf32>) -> memref<1x3x9xf32>
// CHECK-NEXT:    [[COL:%[0-9]+]] = "krnl.alloc"() {onnx_node = "conv"} : () -> memref<1x2x3x3x3x3xf32>
// CHECK-NEXT:    [[PAD:%[0-9]+]] = "krnl.alloc"() {onnx_node = "conv"} : () -> memref<1x2x7x7xf32>
// Nothing is written before the (n, g) nest: group g's planes are zeroed inside it.
// CHECK-NOT:       "krnl.store"
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[G:%[0-9]+]]: index):
// Only the border is zeroed: a slab per side and axis (rows 0 and 6, then columns 0 and 6).
// CHECK:           ^bb0([[Z0:%[0-9]+]]: index, [[Z1:%[0-9]+]]: index, [[Z2:%[0-9]+]]: index):
// CHECK-NEXT:        [[ZERO:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:        "krnl.store"([[ZERO]], [[PAD]], [[G]], [[Z0]], [[Z1]], [[Z2]])
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 1 : i64], [0 : i64, 7 : i64]]
// CHECK:           }) {bounds = {{\[\[}}0 : i64, 2 : i64], [6 : i64, 7 : i64], [0 : i64, 7 : i64]]
// CHECK:           }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 7 : i64], [0 : i64, 1 : i64]]
// CHECK:           }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 7 : i64], [6 : i64, 7 : i64]]
// Copy-in: x[n, g*2 + c, h, w] -> scratch[g, c, h + 1, w + 1].
// CHECK:           ^bb0([[C:%[0-9]+]]: index, [[H:%[0-9]+]]: index, [[WI:%[0-9]+]]: index):
// CHECK-NEXT:        [[C2:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[GC:%[0-9]+]] = arith.muli [[G]], [[C2]] : index
// CHECK-NEXT:        [[CH:%[0-9]+]] = arith.addi [[GC]], [[C]] : index
// CHECK-NEXT:        [[V:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[CH]], [[H]], [[WI]])
// CHECK-NEXT:        [[ONE:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[H1:%[0-9]+]] = arith.addi [[H]], [[ONE]] : index
// CHECK-NEXT:        [[ONEB:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[W1:%[0-9]+]] = arith.addi [[WI]], [[ONEB]] : index
// CHECK-NEXT:        "krnl.store"([[V]], [[PAD]], [[G]], [[C]], [[H1]], [[W1]])
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 5 : i64], [0 : i64, 5 : i64]]
// One panel (jp in [0, 1)); it starts at column jp * 9.
// CHECK:           ^bb0([[JP:%[0-9]+]]: index):
// CHECK-NEXT:        [[C9:%[0-9]+]] = arith.constant 9 : index
// CHECK-NEXT:        [[Q0:%[0-9]+]] = arith.muli [[JP]], [[C9]] : index
// No bias: the product starts the panel from 0 itself (its `start`), no fill nest.
// CHECK-NOT:         arith.constant 0.000000e+00 : f32
// im2col from the scratch, unguarded: row oh * 2 + kh (+ the panel's first row jp * 3 * 2),
// column ow * 2 + kw, into the one slot: col[0, c, kh, kw, oh, ow].
// CHECK:             [[SLOT:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        "krnl.define_loops"
// CHECK-NEXT:        "krnl.iterate"
// CHECK-NEXT:        ^bb0([[CC:%[0-9]+]]: index, [[KH:%[0-9]+]]: index, [[KW:%[0-9]+]]: index, [[OH:%[0-9]+]]: index, [[OW:%[0-9]+]]: index):
// CHECK-NEXT:          [[S2:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:          [[T0:%[0-9]+]] = arith.muli [[OH]], [[S2]] : index
// CHECK-NEXT:          [[T1:%[0-9]+]] = arith.addi [[T0]], [[KH]] : index
// CHECK-NEXT:          [[C6:%[0-9]+]] = arith.constant 6 : index
// CHECK-NEXT:          [[T2:%[0-9]+]] = arith.muli [[JP]], [[C6]] : index
// CHECK-NEXT:          [[ROW:%[0-9]+]] = arith.addi [[T1]], [[T2]] : index
// CHECK-NEXT:          [[S2B:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:          [[T3:%[0-9]+]] = arith.muli [[OW]], [[S2B]] : index
// CHECK-NEXT:          [[COLW:%[0-9]+]] = arith.addi [[T3]], [[KW]] : index
// CHECK-NEXT:          [[PV:%[0-9]+]] = "krnl.load"([[PAD]], [[G]], [[CC]], [[ROW]], [[COLW]])
// CHECK-NEXT:          "krnl.store"([[PV]], [[COL]], [[SLOT]], [[CC]], [[KH]], [[KW]], [[OH]], [[OW]])
// CHECK-NEXT:        }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64], [0 : i64, 3 : i64], [0 : i64, 3 : i64], [0 : i64, 3 : i64]]
// Offsets: W at g * (3 * 18) = g * 54, col at 0 (not shared: no slot offset), y at
// n * 27 + g * 27 + q0.
// CHECK-NEXT:        [[BOFF:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[C54:%[0-9]+]] = arith.constant 54 : index
// CHECK-NEXT:        [[AOFF:%[0-9]+]] = arith.muli [[G]], [[C54]] : index
// CHECK:             [[COFF:%[0-9]+]] = arith.addi {{%[0-9]+}}, [[Q0]] : index
// CHECK:             ^bb0([[MI:%[0-9]+]]: index, [[MJ:%[0-9]+]]: index, [[MK:%[0-9]+]]: index):
// CHECK-NEXT:          "krnl.matmul"([[W]], [[COL]], [[YV]], [[MI]], [[MJ]], [[MK]], [[AOFF]], [[BOFF]], [[COFF]])
// CHECK-SAME:          {sizes = [3 : i64, 9 : i64, 18 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [18 : i64, 1 : i64, 9 : i64, 9 : i64], simd = 1 : i64, start = "zero"}
// CHECK-NEXT:        }) {bounds = {{\[\[}}0 : i64, 3 : i64], [0 : i64, 9 : i64], [0 : i64, 18 : i64]]
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64]]
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 1 : i64]]

// -----
// 1x1 kernel, stride 1, no padding, with a bias: no column buffer and no scratch; the output
// panel (all 9 columns: a plain GEMM needs no panels) starts as bias[channel] (the matmul's
// start); x [2, 4, 3, 3] is
// B directly at offset n * (4*9) + g * 36. M = 8, N = 9, K = 4.
func.func @conv_1x1_bias(%x: tensor<2x4x3x3xf32>, %w: tensor<8x4x1x1xf32>, %b: tensor<8xf32>) -> tensor<2x8x3x3xf32> attributes {input_names = ["x", "w", "b"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Conv"(%x, %w, %b) {onnx_node_name = "pw"} : (tensor<2x4x3x3xf32>, tensor<8x4x1x1xf32>, tensor<8xf32>) -> tensor<2x8x3x3xf32>
  func.return %y : tensor<2x8x3x3xf32>
}
// CHECK-LABEL: func.func @conv_1x1_bias(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<2x4x3x3xf32>, [[W:%[0-9]+]]: memref<8x4x1x1xf32>, [[B:%[0-9]+]]: memref<8xf32>, [[Y:%[0-9]+]]: memref<2x8x3x3xf32>)
// CHECK-NOT:     krnl.alloc
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[G:%[0-9]+]]: index):
// CHECK:           ^bb0([[JP:%[0-9]+]]: index):
// CHECK-NOT:         krnl.alloc
// CHECK:             [[C36:%[0-9]+]] = arith.constant 36 : index
// CHECK-NEXT:        [[NB:%[0-9]+]] = arith.muli [[N]], [[C36]] : index
// CHECK:             "krnl.matmul"([[W]], [[X]], {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, [[B]])
// CHECK-SAME:          {sizes = [8 : i64, 9 : i64, 4 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [4 : i64, 1 : i64, 9 : i64, 9 : i64], simd = 1 : i64, start = "bias"}

// -----
// 1-D, dilation 2: x [1, 1, 7], w [1, 1, 3]: out = 7 - (3 - 1) * 2 = 3; position o + 2 * k
// never leaves x, so the column buffer reads x directly, without scratch or guard. One row
// axis of 3 outputs (inner = 1): fit = max(1, 2 MiB // 12, 64) >= 3 and `_even_panels(3, 64,
// ...)` finds nothing, so one unshared panel: col [1, C/g, k, rows] = [1, 1, 3, 3].
func.func @conv1d_dilated(%x: tensor<1x1x7xf32>, %w: tensor<1x1x3xf32>) -> tensor<1x1x3xf32> attributes {input_names = ["x", "w"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.Conv"(%x, %w, %none) {dilations = [2], onnx_node_name = "dconv"} : (tensor<1x1x7xf32>, tensor<1x1x3xf32>, none) -> tensor<1x1x3xf32>
  func.return %y : tensor<1x1x3xf32>
}
// CHECK-LABEL: func.func @conv1d_dilated(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x1x7xf32>
// CHECK:         "krnl.alloc"() {onnx_node = "dconv"} : () -> memref<1x1x3x3xf32>
// CHECK-NOT:     "krnl.alloc"
// CHECK:             ^bb0([[C:%[0-9]+]]: index, [[K:%[0-9]+]]: index, [[O:%[0-9]+]]: index):
// CHECK-NEXT:          [[D2:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:          [[KD:%[0-9]+]] = arith.muli [[K]], [[D2]] : index
// CHECK-NEXT:          [[P:%[0-9]+]] = arith.addi [[O]], [[KD]] : index
// CHECK:               "krnl.load"([[X]], {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}})
// CHECK-NOT:           arith.select
// CHECK:             "krnl.matmul"
// CHECK-SAME:          {sizes = [1 : i64, 3 : i64, 3 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [3 : i64, 1 : i64, 3 : i64, 3 : i64], simd = 1 : i64, start = "zero"}

// -----
// auto_pad SAME_UPPER, x [1, 1, 4, 4], w 2x2, stride 1: out 4x4, total padding
// (4 - 1) + 2 - 4 = 1 per axis, and SAME_UPPER puts the odd one at the end: begin = 0. The
// scratch is [groups, C/g, 5, 5] = [1, 1, 5, 5] (the last tap reads position 4); in the (n, g)
// nest group g's [1, 5, 5] planes are zeroed, then x is copied in at +0 (no adds).
// One panel of all 4 rows (fit >= 4; `_even_panels(4, 16, ...)` finds nothing): col
// [1, 1, 2, 2, 4, 4], M = 1, N = 16, K = 4.
func.func @conv_same_upper(%x: tensor<1x1x4x4xf32>, %w: tensor<1x1x2x2xf32>) -> tensor<1x1x4x4xf32> attributes {input_names = ["x", "w"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.Conv"(%x, %w, %none) {auto_pad = "SAME_UPPER", onnx_node_name = "su"} : (tensor<1x1x4x4xf32>, tensor<1x1x2x2xf32>, none) -> tensor<1x1x4x4xf32>
  func.return %y : tensor<1x1x4x4xf32>
}
// CHECK-LABEL: func.func @conv_same_upper(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x1x4x4xf32>
// CHECK:         [[COL:%[0-9]+]] = "krnl.alloc"() {onnx_node = "su"} : () -> memref<1x1x2x2x4x4xf32>
// CHECK-NEXT:    [[PAD:%[0-9]+]] = "krnl.alloc"() {onnx_node = "su"} : () -> memref<1x1x5x5xf32>
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[G:%[0-9]+]]: index):
// CHECK-NEXT:      "krnl.define_loops"
// CHECK-NEXT:      "krnl.iterate"
// CHECK-NEXT:      ^bb0([[Z0:%[0-9]+]]: index, [[Z1:%[0-9]+]]: index, [[Z2:%[0-9]+]]: index):
// CHECK-NEXT:        [[ZERO:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:        "krnl.store"([[ZERO]], [[PAD]], [[G]], [[Z0]], [[Z1]], [[Z2]])
// Padding only after the input (row 4, then column 4): no slab before it.
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64], [4 : i64, 5 : i64], [0 : i64, 5 : i64]]
// CHECK-NEXT:      "krnl.define_loops"
// CHECK-NEXT:      "krnl.iterate"
// CHECK-NEXT:      ^bb0
// CHECK-NEXT:        arith.constant 0.000000e+00 : f32
// CHECK-NEXT:        "krnl.store"
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 5 : i64], [4 : i64, 5 : i64]]
// CHECK-NEXT:      "krnl.define_loops"
// CHECK-NEXT:      "krnl.iterate"
// CHECK-NEXT:      ^bb0([[C:%[0-9]+]]: index, [[H:%[0-9]+]]: index, [[WI:%[0-9]+]]: index):
// CHECK-NEXT:        [[CH:%[0-9]+]] = arith.addi [[G]], [[C]] : index
// CHECK-NEXT:        [[V:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[CH]], [[H]], [[WI]])
// CHECK-NEXT:        "krnl.store"([[V]], [[PAD]], [[G]], [[C]], [[H]], [[WI]])
// CHECK:             "krnl.matmul"
// CHECK-SAME:          {sizes = [1 : i64, 16 : i64, 4 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [4 : i64, 1 : i64, 16 : i64, 16 : i64], simd = 1 : i64, start = "zero"}

// -----
// auto_pad SAME_LOWER, same shapes: the odd padding element goes at the beginning, begin = 1:
// x is copied into the [1, 1, 5, 5] scratch at [g, c, h + 1, w + 1].
func.func @conv_same_lower(%x: tensor<1x1x4x4xf32>, %w: tensor<1x1x2x2xf32>) -> tensor<1x1x4x4xf32> attributes {input_names = ["x", "w"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.Conv"(%x, %w, %none) {auto_pad = "SAME_LOWER", onnx_node_name = "sl"} : (tensor<1x1x4x4xf32>, tensor<1x1x2x2xf32>, none) -> tensor<1x1x4x4xf32>
  func.return %y : tensor<1x1x4x4xf32>
}
// CHECK-LABEL: func.func @conv_same_lower(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x1x4x4xf32>
// CHECK:         [[COL:%[0-9]+]] = "krnl.alloc"() {onnx_node = "sl"} : () -> memref<1x1x2x2x4x4xf32>
// CHECK-NEXT:    [[PAD:%[0-9]+]] = "krnl.alloc"() {onnx_node = "sl"} : () -> memref<1x1x5x5xf32>
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[G:%[0-9]+]]: index):
// CHECK-NEXT:      "krnl.define_loops"
// CHECK-NEXT:      "krnl.iterate"
// CHECK-NEXT:      ^bb0([[Z0:%[0-9]+]]: index, [[Z1:%[0-9]+]]: index, [[Z2:%[0-9]+]]: index):
// CHECK-NEXT:        [[ZERO:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:        "krnl.store"([[ZERO]], [[PAD]], [[G]], [[Z0]], [[Z1]], [[Z2]])
// Padding only before the input (row 0, then column 0): no slab after it.
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 1 : i64], [0 : i64, 5 : i64]]
// CHECK-NEXT:      "krnl.define_loops"
// CHECK-NEXT:      "krnl.iterate"
// CHECK-NEXT:      ^bb0
// CHECK-NEXT:        arith.constant 0.000000e+00 : f32
// CHECK-NEXT:        "krnl.store"
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 5 : i64], [0 : i64, 1 : i64]]
// CHECK-NEXT:      "krnl.define_loops"
// CHECK-NEXT:      "krnl.iterate"
// CHECK-NEXT:      ^bb0([[C:%[0-9]+]]: index, [[H:%[0-9]+]]: index, [[WI:%[0-9]+]]: index):
// CHECK-NEXT:        [[CH:%[0-9]+]] = arith.addi [[G]], [[C]] : index
// CHECK-NEXT:        [[V:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[CH]], [[H]], [[WI]])
// CHECK-NEXT:        [[ONE:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[H1:%[0-9]+]] = arith.addi [[H]], [[ONE]] : index
// CHECK-NEXT:        [[ONEB:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[W1:%[0-9]+]] = arith.addi [[WI]], [[ONEB]] : index
// CHECK-NEXT:        "krnl.store"([[V]], [[PAD]], [[G]], [[C]], [[H1]], [[W1]])
// CHECK:             "krnl.matmul"
// CHECK-SAME:          {sizes = [1 : i64, 16 : i64, 4 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [4 : i64, 1 : i64, 16 : i64, 16 : i64], simd = 1 : i64, start = "zero"}

// -----
// Panels that threads share, each with its own column buffer (`_panel_rows` -> (rows, True)):
// x [1, 2, 16, 16], w [4, 2, 3, 3], pads 1 -> out 16 x 16; K = 2 * 9 = 18. One output row is
// 16 columns, so the narrowest panel is ceil(64 / 16) = 4 rows; per row 18 * 16 * 4 = 1152
// bytes of col, fit = 2 MiB // 1152 = 1820 rows; all 16 rows of col (18432 bytes) are within
// COL_BYTES, so `_even_panels(16, 4, 1820)`: heights 4, 8, 16 give 4, 2, 1 panels, all even
// (or one), min(count, 8) is largest for 4 panels: height 4 < 16, shared. col is
// [4 slots, 2, 3, 3, 4, 16], panel jp writing slot jp; panel width 4 * 16 = 64 columns,
// q0 = jp * 64, the im2col row oh + kh + jp * 4; the matmul reads B = col at
// b_off = jp * 18 * 64 = jp * 1152 (ldb 64), A at g * 4 * 18 = g * 72, C at n * 1024 +
// g * 1024 + q0 (ldc 16 * 16 = 256). Scratch [1, 2, 18, 18].
func.func @conv_shared_panels(%x: tensor<1x2x16x16xf32>, %w: tensor<4x2x3x3xf32>) -> tensor<1x4x16x16xf32> attributes {input_names = ["x", "w"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.Conv"(%x, %w, %none) {pads = [1, 1, 1, 1], onnx_node_name = "sp"} : (tensor<1x2x16x16xf32>, tensor<4x2x3x3xf32>, none) -> tensor<1x4x16x16xf32>
  func.return %y : tensor<1x4x16x16xf32>
}
// CHECK-LABEL: func.func @conv_shared_panels(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x2x16x16xf32>, [[W:%[0-9]+]]: memref<4x2x3x3xf32>, [[Y:%[0-9]+]]: memref<1x4x16x16xf32>)
// CHECK-NEXT:    [[YV:%[0-9]+]] = "krnl.reshape"([[Y]]) {onnx_node = "sp"} : (memref<1x4x16x16xf32>) -> memref<1x4x256xf32>
// CHECK-NEXT:    [[COL:%[0-9]+]] = "krnl.alloc"() {onnx_node = "sp"} : () -> memref<4x2x3x3x4x16xf32>
// CHECK-NEXT:    [[PAD:%[0-9]+]] = "krnl.alloc"() {onnx_node = "sp"} : () -> memref<1x2x18x18xf32>
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[G:%[0-9]+]]: index):
// CHECK:           ^bb0([[JP:%[0-9]+]]: index):
// CHECK-NEXT:        [[C64:%[0-9]+]] = arith.constant 64 : index
// CHECK-NEXT:        [[Q0:%[0-9]+]] = arith.muli [[JP]], [[C64]] : index
// im2col into slot jp: col[jp, c, kh, kw, oh, ow] = scratch[g, c, oh + kh + jp * 4, ow + kw].
// CHECK-NEXT:        "krnl.define_loops"
// CHECK-NEXT:        "krnl.iterate"
// CHECK-NEXT:        ^bb0([[CC:%[0-9]+]]: index, [[KH:%[0-9]+]]: index, [[KW:%[0-9]+]]: index, [[OH:%[0-9]+]]: index, [[OW:%[0-9]+]]: index):
// CHECK-NEXT:          [[T0:%[0-9]+]] = arith.addi [[OH]], [[KH]] : index
// CHECK-NEXT:          [[C4:%[0-9]+]] = arith.constant 4 : index
// CHECK-NEXT:          [[T1:%[0-9]+]] = arith.muli [[JP]], [[C4]] : index
// CHECK-NEXT:          [[ROW:%[0-9]+]] = arith.addi [[T0]], [[T1]] : index
// CHECK-NEXT:          [[COLW:%[0-9]+]] = arith.addi [[OW]], [[KW]] : index
// CHECK-NEXT:          [[PV:%[0-9]+]] = "krnl.load"([[PAD]], [[G]], [[CC]], [[ROW]], [[COLW]])
// CHECK-NEXT:          "krnl.store"([[PV]], [[COL]], [[JP]], [[CC]], [[KH]], [[KW]], [[OH]], [[OW]])
// CHECK-NEXT:        }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64], [0 : i64, 3 : i64], [0 : i64, 4 : i64], [0 : i64, 16 : i64]]
// CHECK-NEXT:        [[C1152:%[0-9]+]] = arith.constant 1152 : index
// CHECK-NEXT:        [[BOFF:%[0-9]+]] = arith.muli [[JP]], [[C1152]] : index
// CHECK-NEXT:        [[C72:%[0-9]+]] = arith.constant 72 : index
// CHECK-NEXT:        [[AOFF:%[0-9]+]] = arith.muli [[G]], [[C72]] : index
// CHECK:             [[COFF:%[0-9]+]] = arith.addi {{%[0-9]+}}, [[Q0]] : index
// CHECK:               "krnl.matmul"([[W]], [[COL]], [[YV]], {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, [[AOFF]], [[BOFF]], [[COFF]])
// CHECK-SAME:          {sizes = [4 : i64, 64 : i64, 18 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [18 : i64, 1 : i64, 64 : i64, 256 : i64], simd = 1 : i64, start = "zero"}
// CHECK:           }) {bounds = {{\[\[}}0 : i64, 4 : i64]]
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 1 : i64]]
