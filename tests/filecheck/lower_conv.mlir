// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// Conv (lowering/conv.py) by im2col + krnl.matmul, one panel of output rows at a time, per
// (batch entry n, group g): the output panel starts as the bias (or 0), the panel's input
// patches are copied into a column buffer [C/g, kernel..., rows, rest of out spatial], then
// out[n, g*OCg:(g+1)*OCg, panel] += W_g . col with M = OC/g, N = panel columns,
// K = C/g * prod(kernel). Input position of output o, tap k on a spatial axis:
// o * stride + k * dilation - pad_begin. When a tap can fall into the padding, each group's input
// planes are first copied into a zeroed scratch buffer at +pad_begin, and the column buffer reads
// the scratch at o * stride + k * dilation with no guard. A 1x1, stride-1, unpadded Conv reads x
// directly as the B matrix. (Grouped Convs with few taps take the direct schedule:
// lower_conv_direct.mlir.)

// x [1, 2, 5, 5], w [3, 2, 3, 3], pads 1, strides 2: out = (5 + 2 - 3) / 2 + 1 = 3 per axis.
// The scratch is [2, 7, 7]: the last tap reads (3 - 1) * 2 + 2 + 1 = 7 positions. col is
// [2, 3, 3, 3, 3] (one panel of all 3 rows); M = 3, N = 9, K = 18.
func.func @conv_pad_stride(%x: tensor<1x2x5x5xf32>, %w: tensor<3x2x3x3xf32>) -> tensor<1x3x3x3xf32> attributes {input_names = ["x", "w"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.Conv"(%x, %w, %none) {pads = [1, 1, 1, 1], strides = [2, 2], onnx_node_name = "conv"} : (tensor<1x2x5x5xf32>, tensor<3x2x3x3xf32>, none) -> tensor<1x3x3x3xf32>
  func.return %y : tensor<1x3x3x3xf32>
}
// CHECK-LABEL: func.func @conv_pad_stride(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x2x5x5xf32>, [[W:%[0-9]+]]: memref<3x2x3x3xf32>, [[Y:%[0-9]+]]: memref<1x3x3x3xf32>)
// CHECK:         [[YV:%[0-9]+]] = "krnl.reshape"([[Y]]) {onnx_node = "conv"} : (memref<1x3x3x3xf32>) -> memref<1x3x9xf32>
// CHECK-NEXT:    [[COL:%[0-9]+]] = "krnl.alloc"() {onnx_node = "conv"} : () -> memref<2x3x3x3x3xf32>
// CHECK-NEXT:    [[PAD:%[0-9]+]] = "krnl.alloc"() {onnx_node = "conv"} : () -> memref<2x7x7xf32>
// The scratch is zeroed once, before the loop over (n, g).
// CHECK:           "krnl.store"({{%[0-9]+}}, [[PAD]],
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[G:%[0-9]+]]: index):
// Copy-in: x[n, g*2 + c, h, w] -> scratch[c, h + 1, w + 1].
// CHECK:           ^bb0([[C:%[0-9]+]]: index, [[H:%[0-9]+]]: index, [[WI:%[0-9]+]]: index):
// CHECK-NEXT:        [[C2:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[GC:%[0-9]+]] = arith.muli [[G]], [[C2]] : index
// CHECK-NEXT:        [[CH:%[0-9]+]] = arith.addi [[GC]], [[C]] : index
// CHECK-NEXT:        [[V:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[CH]], [[H]], [[WI]])
// CHECK-NEXT:        [[ONE:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[H1:%[0-9]+]] = arith.addi [[H]], [[ONE]] : index
// CHECK-NEXT:        [[ONEB:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[W1:%[0-9]+]] = arith.addi [[WI]], [[ONEB]] : index
// CHECK-NEXT:        "krnl.store"([[V]], [[PAD]], [[C]], [[H1]], [[W1]])
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 5 : i64], [0 : i64, 5 : i64]]
// One panel (jp in [0, 1)); it starts at column jp * 9.
// CHECK:           ^bb0([[JP:%[0-9]+]]: index):
// CHECK-NEXT:        [[C9:%[0-9]+]] = arith.constant 9 : index
// CHECK-NEXT:        [[Q0:%[0-9]+]] = arith.muli [[JP]], [[C9]] : index
// No bias: the panel starts as 0.
// CHECK:             arith.constant 0.000000e+00 : f32
// CHECK-NEXT:        {{%[0-9]+}} = arith.addi [[Q0]], {{%[0-9]+}} : index
// CHECK-NEXT:        "krnl.store"({{%[0-9]+}}, [[YV]], [[N]],
// CHECK:             }) {bounds = {{\[\[}}0 : i64, 3 : i64], [0 : i64, 9 : i64]]
// im2col from the scratch, unguarded: row oh * 2 + kh (+ the panel's first row jp * 3 * 2), column ow * 2 + kw.
// CHECK:             ^bb0([[CC:%[0-9]+]]: index, [[KH:%[0-9]+]]: index, [[KW:%[0-9]+]]: index, [[OH:%[0-9]+]]: index, [[OW:%[0-9]+]]: index):
// CHECK-NEXT:          [[S2:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:          [[T0:%[0-9]+]] = arith.muli [[OH]], [[S2]] : index
// CHECK-NEXT:          [[T1:%[0-9]+]] = arith.addi [[T0]], [[KH]] : index
// CHECK-NEXT:          [[C6:%[0-9]+]] = arith.constant 6 : index
// CHECK-NEXT:          [[T2:%[0-9]+]] = arith.muli [[JP]], [[C6]] : index
// CHECK-NEXT:          [[ROW:%[0-9]+]] = arith.addi [[T1]], [[T2]] : index
// CHECK-NEXT:          [[S2B:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:          [[T3:%[0-9]+]] = arith.muli [[OW]], [[S2B]] : index
// CHECK-NEXT:          [[COLW:%[0-9]+]] = arith.addi [[T3]], [[KW]] : index
// CHECK-NEXT:          [[PV:%[0-9]+]] = "krnl.load"([[PAD]], [[CC]], [[ROW]], [[COLW]])
// CHECK-NEXT:          "krnl.store"([[PV]], [[COL]], [[CC]], [[KH]], [[KW]], [[OH]], [[OW]])
// CHECK-NEXT:        }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64], [0 : i64, 3 : i64], [0 : i64, 3 : i64], [0 : i64, 3 : i64]]
// Offsets: W at g * (3 * 18) = g * 54, col at 0, y at n * 27 + g * 27 + q0.
// CHECK-NEXT:        [[BOFF:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[C54:%[0-9]+]] = arith.constant 54 : index
// CHECK-NEXT:        [[AOFF:%[0-9]+]] = arith.muli [[G]], [[C54]] : index
// CHECK:             [[COFF:%[0-9]+]] = arith.addi {{%[0-9]+}}, [[Q0]] : index
// CHECK:             ^bb0([[MI:%[0-9]+]]: index, [[MJ:%[0-9]+]]: index, [[MK:%[0-9]+]]: index):
// CHECK-NEXT:          "krnl.matmul"([[W]], [[COL]], [[YV]], [[MI]], [[MJ]], [[MK]], [[AOFF]], [[BOFF]], [[COFF]])
// CHECK-SAME:          {sizes = [3 : i64, 9 : i64, 18 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [18 : i64, 1 : i64, 9 : i64, 9 : i64], simd = 1 : i64}
// CHECK-NEXT:        }) {bounds = {{\[\[}}0 : i64, 3 : i64], [0 : i64, 9 : i64], [0 : i64, 18 : i64]]
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64]]
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 1 : i64]]

// -----
// 1x1 kernel, stride 1, no padding, with a bias: no column buffer and no scratch; the output
// panel (all 9 columns: a plain GEMM needs no panels) starts as bias[channel]; x [2, 4, 3, 3] is
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
// CHECK:             ^bb0([[O:%[0-9]+]]: index, [[Q:%[0-9]+]]: index):
// CHECK:               [[OC:%[0-9]+]] = arith.addi {{%[0-9]+}}, [[O]] : index
// CHECK-NEXT:          [[BV:%[0-9]+]] = "krnl.load"([[B]], [[OC]])
// CHECK:               "krnl.store"([[BV]], {{%[0-9]+}}, [[N]], [[OC]],
// CHECK-NEXT:        }) {bounds = {{\[\[}}0 : i64, 8 : i64], [0 : i64, 9 : i64]]
// CHECK-NOT:         krnl.alloc
// CHECK:             [[C36:%[0-9]+]] = arith.constant 36 : index
// CHECK-NEXT:        [[NB:%[0-9]+]] = arith.muli [[N]], [[C36]] : index
// CHECK:             "krnl.matmul"([[W]], [[X]], {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}})
// CHECK-SAME:          {sizes = [8 : i64, 9 : i64, 4 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [4 : i64, 1 : i64, 9 : i64, 9 : i64], simd = 1 : i64}

// -----
// 1-D, dilation 2: x [1, 1, 7], w [1, 1, 3]: out = 7 - (3 - 1) * 2 = 3; position o + 2 * k
// never leaves x, so the column buffer reads x directly, without scratch or guard.
func.func @conv1d_dilated(%x: tensor<1x1x7xf32>, %w: tensor<1x1x3xf32>) -> tensor<1x1x3xf32> attributes {input_names = ["x", "w"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.Conv"(%x, %w, %none) {dilations = [2], onnx_node_name = "dconv"} : (tensor<1x1x7xf32>, tensor<1x1x3xf32>, none) -> tensor<1x1x3xf32>
  func.return %y : tensor<1x1x3xf32>
}
// CHECK-LABEL: func.func @conv1d_dilated(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x1x7xf32>
// CHECK:         "krnl.alloc"() {onnx_node = "dconv"} : () -> memref<1x3x3xf32>
// CHECK-NOT:     "krnl.alloc"
// CHECK:             ^bb0([[C:%[0-9]+]]: index, [[K:%[0-9]+]]: index, [[O:%[0-9]+]]: index):
// CHECK-NEXT:          [[D2:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:          [[KD:%[0-9]+]] = arith.muli [[K]], [[D2]] : index
// CHECK-NEXT:          [[P:%[0-9]+]] = arith.addi [[O]], [[KD]] : index
// CHECK:               "krnl.load"([[X]], {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}})
// CHECK-NOT:           arith.select
// CHECK:             "krnl.matmul"
// CHECK-SAME:          {sizes = [1 : i64, 3 : i64, 3 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [3 : i64, 1 : i64, 3 : i64, 3 : i64], simd = 1 : i64}

// -----
// auto_pad SAME_UPPER, x [1, 1, 4, 4], w 2x2, stride 1: out 4x4, total padding
// (4 - 1) + 2 - 4 = 1 per axis, and SAME_UPPER puts the odd one at the end: begin = 0. The
// scratch is [1, 5, 5] (the last tap reads position 4), x is copied in at +0.
func.func @conv_same_upper(%x: tensor<1x1x4x4xf32>, %w: tensor<1x1x2x2xf32>) -> tensor<1x1x4x4xf32> attributes {input_names = ["x", "w"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.Conv"(%x, %w, %none) {auto_pad = "SAME_UPPER", onnx_node_name = "su"} : (tensor<1x1x4x4xf32>, tensor<1x1x2x2xf32>, none) -> tensor<1x1x4x4xf32>
  func.return %y : tensor<1x1x4x4xf32>
}
// CHECK-LABEL: func.func @conv_same_upper(
// CHECK:         [[PAD:%[0-9]+]] = "krnl.alloc"() {onnx_node = "su"} : () -> memref<1x5x5xf32>
// CHECK:         ^bb0({{%[0-9]+}}: index, {{%[0-9]+}}: index):
// CHECK-NEXT:      "krnl.define_loops"
// CHECK-NEXT:      "krnl.iterate"
// CHECK-NEXT:      ^bb0([[C:%[0-9]+]]: index, [[H:%[0-9]+]]: index, [[WI:%[0-9]+]]: index):
// CHECK:             [[V:%[0-9]+]] = "krnl.load"
// CHECK-NEXT:        "krnl.store"([[V]], [[PAD]], [[C]], [[H]], [[WI]])
// CHECK:             "krnl.matmul"
// CHECK-SAME:          {sizes = [1 : i64, 16 : i64, 4 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [4 : i64, 1 : i64, 16 : i64, 16 : i64], simd = 1 : i64}

// -----
// auto_pad SAME_LOWER, same shapes: the odd padding element goes at the beginning, begin = 1:
// x is copied into the [1, 5, 5] scratch at +1.
func.func @conv_same_lower(%x: tensor<1x1x4x4xf32>, %w: tensor<1x1x2x2xf32>) -> tensor<1x1x4x4xf32> attributes {input_names = ["x", "w"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.Conv"(%x, %w, %none) {auto_pad = "SAME_LOWER", onnx_node_name = "sl"} : (tensor<1x1x4x4xf32>, tensor<1x1x2x2xf32>, none) -> tensor<1x1x4x4xf32>
  func.return %y : tensor<1x1x4x4xf32>
}
// CHECK-LABEL: func.func @conv_same_lower(
// CHECK:         [[PAD:%[0-9]+]] = "krnl.alloc"() {onnx_node = "sl"} : () -> memref<1x5x5xf32>
// CHECK:         ^bb0({{%[0-9]+}}: index, {{%[0-9]+}}: index):
// CHECK-NEXT:      "krnl.define_loops"
// CHECK-NEXT:      "krnl.iterate"
// CHECK-NEXT:      ^bb0([[C:%[0-9]+]]: index, [[H:%[0-9]+]]: index, [[WI:%[0-9]+]]: index):
// CHECK:             [[V:%[0-9]+]] = "krnl.load"
// CHECK-NEXT:        [[ONE:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[H1:%[0-9]+]] = arith.addi [[H]], [[ONE]] : index
// CHECK-NEXT:        [[ONEB:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[W1:%[0-9]+]] = arith.addi [[WI]], [[ONEB]] : index
// CHECK-NEXT:        "krnl.store"([[V]], [[PAD]], [[C]], [[H1]], [[W1]])
// CHECK:             "krnl.matmul"
// CHECK-SAME:          {sizes = [1 : i64, 16 : i64, 4 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [4 : i64, 1 : i64, 16 : i64, 16 : i64], simd = 1 : i64}
