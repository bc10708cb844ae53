// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// Conv (lowering/conv.py) as im2col + krnl.matmul, per (batch entry n, group g): the patches
// go into a column buffer [C/g, kernel..., out spatial...] through guarded loads (a tap outside
// the input reads 0), then out[n, g*OCg:(g+1)*OCg, :] += W_g . col with M = OC/g,
// N = prod(out spatial), K = C/g * prod(kernel). Input position of output o, tap k on a spatial
// axis: o * stride + k * dilation - pad_begin. A 1x1, stride-1, unpadded Conv skips the column
// buffer and reads x directly as B.

// x [1, 2, 5, 5], w [3, 2, 3, 3], pads 1, strides 2: out = (5 + 2 - 3) / 2 + 1 = 3 per axis.
// col is [2, 3, 3, 3, 3]; M = 3, N = 9, K = 18. Input row = oh * 2 + kh - 1, kept in [0, 5).
func.func @conv_pad_stride(%x: tensor<1x2x5x5xf32>, %w: tensor<3x2x3x3xf32>) -> tensor<1x3x3x3xf32> attributes {input_names = ["x", "w"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.Conv"(%x, %w, %none) {pads = [1, 1, 1, 1], strides = [2, 2], onnx_node_name = "conv"} : (tensor<1x2x5x5xf32>, tensor<3x2x3x3xf32>, none) -> tensor<1x3x3x3xf32>
  func.return %y : tensor<1x3x3x3xf32>
}
// CHECK-LABEL: func.func @conv_pad_stride(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x2x5x5xf32>, [[W:%[0-9]+]]: memref<3x2x3x3xf32>, [[Y:%[0-9]+]]: memref<1x3x3x3xf32>)
// CHECK:         [[Z:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    "krnl.store"([[Z]], [[Y]],
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 3 : i64], [0 : i64, 3 : i64], [0 : i64, 3 : i64]]
// CHECK-NEXT:    [[COL:%[0-9]+]] = "krnl.alloc"() {onnx_node = "conv"} : () -> memref<2x3x3x3x3xf32>
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[G:%[0-9]+]]: index):
// CHECK:           ^bb0([[C:%[0-9]+]]: index, [[KH:%[0-9]+]]: index, [[KW:%[0-9]+]]: index, [[OH:%[0-9]+]]: index, [[OW:%[0-9]+]]: index):
// CHECK-NEXT:        [[S2:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[T0:%[0-9]+]] = arith.muli [[OH]], [[S2]] : index
// CHECK-NEXT:        [[T1:%[0-9]+]] = arith.addi [[T0]], [[KH]] : index
// CHECK-NEXT:        [[M1:%[0-9]+]] = arith.constant -1 : index
// CHECK-NEXT:        [[H:%[0-9]+]] = arith.addi [[T1]], [[M1]] : index
// CHECK-NEXT:        [[S2B:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[T2:%[0-9]+]] = arith.muli [[OW]], [[S2B]] : index
// CHECK-NEXT:        [[T3:%[0-9]+]] = arith.addi [[T2]], [[KW]] : index
// CHECK-NEXT:        [[M1B:%[0-9]+]] = arith.constant -1 : index
// CHECK-NEXT:        [[WI:%[0-9]+]] = arith.addi [[T3]], [[M1B]] : index
// CHECK-NEXT:        [[CG:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[GC:%[0-9]+]] = arith.muli [[G]], [[CG]] : index
// CHECK-NEXT:        [[CH:%[0-9]+]] = arith.addi [[GC]], [[C]] : index
// The guard: every index of x inside its dimension (n < 1, channel < 2, row and column < 5);
// the load's address is clamped into x (n to [0, 0], channel [0, 1], row and column [0, 4]),
// and the guard selects 0 for a tap in the padding.
// CHECK-NEXT:        [[Z:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[G0:%[0-9]+]] = arith.cmpi sge, [[N]], [[Z]] : index
// CHECK-NEXT:        [[L1:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[G1:%[0-9]+]] = arith.cmpi slt, [[N]], [[L1]] : index
// CHECK-NEXT:        [[GN:%[0-9]+]] = arith.andi [[G0]], [[G1]] : i1
// CHECK-NEXT:        [[G2:%[0-9]+]] = arith.cmpi sge, [[CH]], [[Z]] : index
// CHECK-NEXT:        [[L2:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[G3:%[0-9]+]] = arith.cmpi slt, [[CH]], [[L2]] : index
// CHECK-NEXT:        [[GC:%[0-9]+]] = arith.andi [[G2]], [[G3]] : i1
// CHECK-NEXT:        [[GNC:%[0-9]+]] = arith.andi [[GN]], [[GC]] : i1
// CHECK-NEXT:        [[G4:%[0-9]+]] = arith.cmpi sge, [[H]], [[Z]] : index
// CHECK-NEXT:        [[H5:%[0-9]+]] = arith.constant 5 : index
// CHECK-NEXT:        [[G5:%[0-9]+]] = arith.cmpi slt, [[H]], [[H5]] : index
// CHECK-NEXT:        [[GH:%[0-9]+]] = arith.andi [[G4]], [[G5]] : i1
// CHECK-NEXT:        [[GNCH:%[0-9]+]] = arith.andi [[GNC]], [[GH]] : i1
// CHECK-NEXT:        [[G6:%[0-9]+]] = arith.cmpi sge, [[WI]], [[Z]] : index
// CHECK-NEXT:        [[W5:%[0-9]+]] = arith.constant 5 : index
// CHECK-NEXT:        [[G7:%[0-9]+]] = arith.cmpi slt, [[WI]], [[W5]] : index
// CHECK-NEXT:        [[GW:%[0-9]+]] = arith.andi [[G6]], [[G7]] : i1
// CHECK-NEXT:        [[OK:%[0-9]+]] = arith.andi [[GNCH]], [[GW]] : i1
// CHECK-NEXT:        [[Z1:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[NLO:%[0-9]+]] = arith.maxsi [[N]], [[Z1]] : index
// CHECK-NEXT:        [[N0:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[NC:%[0-9]+]] = arith.minsi [[NLO]], [[N0]] : index
// CHECK-NEXT:        [[Z2:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[CLO:%[0-9]+]] = arith.maxsi [[CH]], [[Z2]] : index
// CHECK-NEXT:        [[C1:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[CC:%[0-9]+]] = arith.minsi [[CLO]], [[C1]] : index
// CHECK-NEXT:        [[Z3:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[HLO:%[0-9]+]] = arith.maxsi [[H]], [[Z3]] : index
// CHECK-NEXT:        [[H4:%[0-9]+]] = arith.constant 4 : index
// CHECK-NEXT:        [[HC:%[0-9]+]] = arith.minsi [[HLO]], [[H4]] : index
// CHECK-NEXT:        [[Z4:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[WLO:%[0-9]+]] = arith.maxsi [[WI]], [[Z4]] : index
// CHECK-NEXT:        [[W4:%[0-9]+]] = arith.constant 4 : index
// CHECK-NEXT:        [[WC:%[0-9]+]] = arith.minsi [[WLO]], [[W4]] : index
// CHECK-NEXT:        [[V:%[0-9]+]] = "krnl.load"([[X]], [[NC]], [[CC]], [[HC]], [[WC]])
// CHECK-NEXT:        [[PAD:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:        [[SEL:%[0-9]+]] = arith.select [[OK]], [[V]], [[PAD]] : f32
// CHECK-NEXT:        "krnl.store"([[SEL]], [[COL]], [[C]], [[KH]], [[KW]], [[OH]], [[OW]])
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64], [0 : i64, 3 : i64], [0 : i64, 3 : i64], [0 : i64, 3 : i64]]
// Offsets: W at g * (3 * 18) = g * 54, col at 0, y at n * 27 + g * 27.
// CHECK-NEXT:      [[BOFF:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[C54:%[0-9]+]] = arith.constant 54 : index
// CHECK-NEXT:      [[AOFF:%[0-9]+]] = arith.muli [[G]], [[C54]] : index
// CHECK-NEXT:      [[C27:%[0-9]+]] = arith.constant 27 : index
// CHECK-NEXT:      [[NO:%[0-9]+]] = arith.muli [[N]], [[C27]] : index
// CHECK-NEXT:      [[C27B:%[0-9]+]] = arith.constant 27 : index
// CHECK-NEXT:      [[GO:%[0-9]+]] = arith.muli [[G]], [[C27B]] : index
// CHECK-NEXT:      [[COFF:%[0-9]+]] = arith.addi [[NO]], [[GO]] : index
// CHECK:           ^bb0([[MI:%[0-9]+]]: index, [[MJ:%[0-9]+]]: index, [[MK:%[0-9]+]]: index):
// CHECK-NEXT:        "krnl.matmul"([[W]], [[COL]], [[Y]], [[MI]], [[MJ]], [[MK]], [[AOFF]], [[BOFF]], [[COFF]])
// CHECK-SAME:        {sizes = [3 : i64, 9 : i64, 18 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [18 : i64, 1 : i64, 9 : i64, 9 : i64], simd = 1 : i64}
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 3 : i64], [0 : i64, 9 : i64], [0 : i64, 18 : i64]]
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 1 : i64]]

// -----
// 1x1 kernel, stride 1, no padding, with a bias: no column buffer; the output starts as
// bias[channel]; x [2, 4, 3, 3] is B directly at offset n * (4*9). M = 8, N = 9, K = 4.
func.func @conv_1x1_bias(%x: tensor<2x4x3x3xf32>, %w: tensor<8x4x1x1xf32>, %b: tensor<8xf32>) -> tensor<2x8x3x3xf32> attributes {input_names = ["x", "w", "b"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Conv"(%x, %w, %b) {onnx_node_name = "pw"} : (tensor<2x4x3x3xf32>, tensor<8x4x1x1xf32>, tensor<8xf32>) -> tensor<2x8x3x3xf32>
  func.return %y : tensor<2x8x3x3xf32>
}
// CHECK-LABEL: func.func @conv_1x1_bias(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<2x4x3x3xf32>, [[W:%[0-9]+]]: memref<8x4x1x1xf32>, [[B:%[0-9]+]]: memref<8xf32>, [[Y:%[0-9]+]]: memref<2x8x3x3xf32>)
// CHECK-NOT:     krnl.alloc
// CHECK:         ^bb0([[I0:%[0-9]+]]: index, [[I1:%[0-9]+]]: index, [[I2:%[0-9]+]]: index, [[I3:%[0-9]+]]: index):
// CHECK-NEXT:      [[BV:%[0-9]+]] = "krnl.load"([[B]], [[I1]])
// CHECK-NEXT:      "krnl.store"([[BV]], [[Y]], [[I0]], [[I1]], [[I2]], [[I3]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 8 : i64], [0 : i64, 3 : i64], [0 : i64, 3 : i64]]
// CHECK-NOT:     krnl.alloc
// Offsets: x at n * 36 + g * 36, W at g * (8 * 4) = g * 32, y at n * 72 + g * 72.
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[G:%[0-9]+]]: index):
// CHECK-NEXT:      [[C36:%[0-9]+]] = arith.constant 36 : index
// CHECK-NEXT:      [[NB:%[0-9]+]] = arith.muli [[N]], [[C36]] : index
// CHECK-NEXT:      [[C36B:%[0-9]+]] = arith.constant 36 : index
// CHECK-NEXT:      [[GB:%[0-9]+]] = arith.muli [[G]], [[C36B]] : index
// CHECK-NEXT:      [[BOFF:%[0-9]+]] = arith.addi [[NB]], [[GB]] : index
// CHECK-NEXT:      [[C32:%[0-9]+]] = arith.constant 32 : index
// CHECK-NEXT:      [[AOFF:%[0-9]+]] = arith.muli [[G]], [[C32]] : index
// CHECK-NEXT:      [[C72:%[0-9]+]] = arith.constant 72 : index
// CHECK-NEXT:      [[NO:%[0-9]+]] = arith.muli [[N]], [[C72]] : index
// CHECK-NEXT:      [[C72B:%[0-9]+]] = arith.constant 72 : index
// CHECK-NEXT:      [[GO:%[0-9]+]] = arith.muli [[G]], [[C72B]] : index
// CHECK-NEXT:      [[COFF:%[0-9]+]] = arith.addi [[NO]], [[GO]] : index
// CHECK:           "krnl.matmul"([[W]], [[X]], [[Y]], {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, [[AOFF]], [[BOFF]], [[COFF]])
// CHECK-SAME:        {sizes = [8 : i64, 9 : i64, 4 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [4 : i64, 1 : i64, 9 : i64, 9 : i64], simd = 1 : i64}

// -----
// Two groups: x [1, 4, 4, 4], w [4, 2, 3, 3] (C/g = 2, OC/g = 2), out 2x2. Group g reads
// channels g*2 + c; W offset g * (2 * 18) = g * 36; y offset n * 16 + g * (2 * 4).
func.func @conv_groups(%x: tensor<1x4x4x4xf32>, %w: tensor<4x2x3x3xf32>) -> tensor<1x4x2x2xf32> attributes {input_names = ["x", "w"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.Conv"(%x, %w, %none) {group = 2 : i64, onnx_node_name = "gconv"} : (tensor<1x4x4x4xf32>, tensor<4x2x3x3xf32>, none) -> tensor<1x4x2x2xf32>
  func.return %y : tensor<1x4x2x2xf32>
}
// CHECK-LABEL: func.func @conv_groups(
// CHECK:         [[COL:%[0-9]+]] = "krnl.alloc"() {onnx_node = "gconv"} : () -> memref<2x3x3x2x2xf32>
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[G:%[0-9]+]]: index):
// CHECK:           ^bb0([[C:%[0-9]+]]: index, [[KH:%[0-9]+]]: index, [[KW:%[0-9]+]]: index, [[OH:%[0-9]+]]: index, [[OW:%[0-9]+]]: index):
// CHECK-NEXT:        [[H:%[0-9]+]] = arith.addi [[OH]], [[KH]] : index
// CHECK-NEXT:        [[WI:%[0-9]+]] = arith.addi [[OW]], [[KW]] : index
// CHECK-NEXT:        [[CG:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[GC:%[0-9]+]] = arith.muli [[G]], [[CG]] : index
// CHECK-NEXT:        [[CH:%[0-9]+]] = arith.addi [[GC]], [[C]] : index
// CHECK:             [[L4:%[0-9]+]] = arith.constant 4 : index
// CHECK-NEXT:        arith.cmpi slt, [[CH]], [[L4]] : index
// CHECK:             [[V:%[0-9]+]] = "krnl.load"({{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}})
// CHECK-NEXT:        arith.constant 0.000000e+00 : f32
// CHECK-NEXT:        [[SEL:%[0-9]+]] = arith.select
// CHECK-NEXT:        "krnl.store"([[SEL]], [[COL]], [[C]], [[KH]], [[KW]], [[OH]], [[OW]])
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64], [0 : i64, 3 : i64], [0 : i64, 2 : i64], [0 : i64, 2 : i64]]
// CHECK:           [[C36:%[0-9]+]] = arith.constant 36 : index
// CHECK-NEXT:      [[AOFF:%[0-9]+]] = arith.muli [[G]], [[C36]] : index
// CHECK-NEXT:      [[C16:%[0-9]+]] = arith.constant 16 : index
// CHECK-NEXT:      [[NO:%[0-9]+]] = arith.muli [[N]], [[C16]] : index
// CHECK-NEXT:      [[C8:%[0-9]+]] = arith.constant 8 : index
// CHECK-NEXT:      [[GO:%[0-9]+]] = arith.muli [[G]], [[C8]] : index
// CHECK:           "krnl.matmul"
// CHECK-SAME:        {sizes = [2 : i64, 4 : i64, 18 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [18 : i64, 1 : i64, 4 : i64, 4 : i64], simd = 1 : i64}
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 2 : i64]]

// -----
// 1-D, dilation 2: x [1, 1, 7], w [1, 1, 3]: out = 7 - (3 - 1) * 2 = 3; position o + 2 * k,
// no padding term.
func.func @conv1d_dilated(%x: tensor<1x1x7xf32>, %w: tensor<1x1x3xf32>) -> tensor<1x1x3xf32> attributes {input_names = ["x", "w"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.Conv"(%x, %w, %none) {dilations = [2], onnx_node_name = "dconv"} : (tensor<1x1x7xf32>, tensor<1x1x3xf32>, none) -> tensor<1x1x3xf32>
  func.return %y : tensor<1x1x3xf32>
}
// CHECK-LABEL: func.func @conv1d_dilated(
// CHECK:         "krnl.alloc"() {onnx_node = "dconv"} : () -> memref<1x3x3xf32>
// CHECK:           ^bb0({{%[0-9]+}}: index, [[K:%[0-9]+]]: index, [[O:%[0-9]+]]: index):
// CHECK-NEXT:        [[D2:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[KD:%[0-9]+]] = arith.muli [[K]], [[D2]] : index
// CHECK-NEXT:        [[P:%[0-9]+]] = arith.addi [[O]], [[KD]] : index
// CHECK-NOT:         arith.constant -{{[0-9]+}} : index
// CHECK:             [[L7:%[0-9]+]] = arith.constant 7 : index
// CHECK-NEXT:        arith.cmpi slt, [[P]], [[L7]] : index
// CHECK:           "krnl.matmul"
// CHECK-SAME:        {sizes = [1 : i64, 3 : i64, 3 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [3 : i64, 1 : i64, 3 : i64, 3 : i64], simd = 1 : i64}

// -----
// auto_pad SAME_UPPER, x [1, 1, 4, 4], w 2x2, stride 1: out 4x4, total padding
// (4 - 1) + 2 - 4 = 1 per axis, and SAME_UPPER puts the odd one at the end: begin = 0, so the
// position is o + k with no negative offset.
func.func @conv_same_upper(%x: tensor<1x1x4x4xf32>, %w: tensor<1x1x2x2xf32>) -> tensor<1x1x4x4xf32> attributes {input_names = ["x", "w"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.Conv"(%x, %w, %none) {auto_pad = "SAME_UPPER", onnx_node_name = "su"} : (tensor<1x1x4x4xf32>, tensor<1x1x2x2xf32>, none) -> tensor<1x1x4x4xf32>
  func.return %y : tensor<1x1x4x4xf32>
}
// CHECK-LABEL: func.func @conv_same_upper(
// CHECK:           ^bb0({{%[0-9]+}}: index, [[KH:%[0-9]+]]: index, [[KW:%[0-9]+]]: index, [[OH:%[0-9]+]]: index, [[OW:%[0-9]+]]: index):
// CHECK-NEXT:        [[H:%[0-9]+]] = arith.addi [[OH]], [[KH]] : index
// CHECK-NEXT:        [[WI:%[0-9]+]] = arith.addi [[OW]], [[KW]] : index
// CHECK-NOT:         arith.constant -1 : index
// CHECK:             "krnl.store"
// CHECK:           "krnl.matmul"
// CHECK-SAME:        {sizes = [1 : i64, 16 : i64, 4 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [4 : i64, 1 : i64, 16 : i64, 16 : i64], simd = 1 : i64}

// -----
// auto_pad SAME_LOWER, same shapes: the odd padding element goes at the beginning, begin = 1.
func.func @conv_same_lower(%x: tensor<1x1x4x4xf32>, %w: tensor<1x1x2x2xf32>) -> tensor<1x1x4x4xf32> attributes {input_names = ["x", "w"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.Conv"(%x, %w, %none) {auto_pad = "SAME_LOWER", onnx_node_name = "sl"} : (tensor<1x1x4x4xf32>, tensor<1x1x2x2xf32>, none) -> tensor<1x1x4x4xf32>
  func.return %y : tensor<1x1x4x4xf32>
}
// CHECK-LABEL: func.func @conv_same_lower(
// CHECK:           ^bb0({{%[0-9]+}}: index, [[KH:%[0-9]+]]: index, [[KW:%[0-9]+]]: index, [[OH:%[0-9]+]]: index, [[OW:%[0-9]+]]: index):
// CHECK-NEXT:        [[T:%[0-9]+]] = arith.addi [[OH]], [[KH]] : index
// CHECK-NEXT:        [[M1:%[0-9]+]] = arith.constant -1 : index
// CHECK-NEXT:        [[H:%[0-9]+]] = arith.addi [[T]], [[M1]] : index
// CHECK:             arith.cmpi sge, [[H]], {{%[0-9]+}} : index
// CHECK-NEXT:        [[L4:%[0-9]+]] = arith.constant 4 : index
// CHECK-NEXT:        arith.cmpi slt, [[H]], [[L4]] : index
// CHECK:             arith.maxsi [[H]], {{%[0-9]+}} : index
// CHECK-NEXT:        [[L3:%[0-9]+]] = arith.constant 3 : index
// CHECK-NEXT:        arith.minsi {{%[0-9]+}}, [[L3]] : index
// CHECK:           "krnl.matmul"
// CHECK-SAME:        {sizes = [1 : i64, 16 : i64, 4 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [4 : i64, 1 : i64, 16 : i64, 16 : i64], simd = 1 : i64}
