// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// ConvTranspose (lowering/conv_transpose.py) as GEMM + col2im: the output starts as the bias
// (or zeros); per (n, group) and panel of input rows, a zeroed column buffer
// col[(co, k...), i] gets W^T x from one krnl.matmul (W read in place with strides
// [1, OC/g * prod(kernel)], x as B with row stride = the input positions), then a
// krnl.iterate over (co, panel row, its tap, then each further axis's position and tap) adds
// col[co * prod(kernel) + k, i] into y[n, g * (OC/g) + co, i * stride + k * dilation - pad];
// a target outside y adds 0 at a clamped address (select), so no branch is needed.

// x [1, 1, 2, 2], w [1, 1, 3, 3], strides 2: out = 2 * (2 - 1) + 3 = 5 per axis. M = 9 taps,
// N = 4 positions, K = 1 channel.
func.func @conv_transpose_stride2(%x: tensor<1x1x2x2xf32>, %w: tensor<1x1x3x3xf32>) -> tensor<1x1x5x5xf32> attributes {input_names = ["x", "w"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.ConvTranspose"(%x, %w, %none) {strides = [2, 2], onnx_node_name = "up"} : (tensor<1x1x2x2xf32>, tensor<1x1x3x3xf32>, none) -> tensor<1x1x5x5xf32>
  func.return %y : tensor<1x1x5x5xf32>
}
// CHECK-LABEL: func.func @conv_transpose_stride2(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x1x2x2xf32>, [[W:%[0-9]+]]: memref<1x1x3x3xf32>, [[Y:%[0-9]+]]: memref<1x1x5x5xf32>)
// CHECK:         [[Z:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    "krnl.store"([[Z]], [[Y]],
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 1 : i64], [0 : i64, 5 : i64], [0 : i64, 5 : i64]]
// CHECK:         [[COL:%[0-9]+]] = "krnl.alloc"() {{.*}} -> memref<1x9x4xf32>
// CHECK:         [[XV:%[0-9]+]] = "krnl.reshape"([[X]]) {{.*}} -> memref<1x1x4xf32>
// CHECK:           "krnl.store"({{%[0-9]+}}, [[COL]],
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 9 : i64], [0 : i64, 4 : i64]]
// CHECK:           "krnl.matmul"([[W]], [[XV]], [[COL]], {{.*}}) {sizes = [9 : i64, 4 : i64, 1 : i64], {{.*}}strides = [1 : i64, 9 : i64, 4 : i64, 4 : i64]
// CHECK:           ^bb0([[CO:%[0-9]+]]: index, [[HH:%[0-9]+]]: index, [[KH:%[0-9]+]]: index, [[IW:%[0-9]+]]: index, [[KW:%[0-9]+]]: index):
// CHECK:             [[CV:%[0-9]+]] = "krnl.load"([[COL]],
// CHECK:             [[OLD:%[0-9]+]] = "krnl.load"([[Y]],
// CHECK-NEXT:        [[Z2:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:        [[ADD:%[0-9]+]] = arith.select {{%[0-9]+}}, [[CV]], [[Z2]] : f32
// CHECK-NEXT:        [[NEW:%[0-9]+]] = arith.addf [[OLD]], [[ADD]] : f32
// CHECK-NEXT:        "krnl.store"([[NEW]], [[Y]],
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 2 : i64], [0 : i64, 3 : i64], [0 : i64, 2 : i64], [0 : i64, 3 : i64]]

// -----
// 1-D, two groups, pads [1, 1], bias: x [1, 2, 3], w [2, 1, 3] (C = 2, OC/g = 1), out channels
// 2, length (3 - 1) + 3 - 2 = 3. The output starts as b[channel]; per group M = 3 taps,
// N = 3 positions, K = 1; position i + k - 1.
func.func @conv_transpose_groups_pads_bias(%x: tensor<1x2x3xf32>, %w: tensor<2x1x3xf32>, %b: tensor<2xf32>) -> tensor<1x2x3xf32> attributes {input_names = ["x", "w", "b"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.ConvTranspose"(%x, %w, %b) {group = 2 : i64, pads = [1, 1], onnx_node_name = "upg"} : (tensor<1x2x3xf32>, tensor<2x1x3xf32>, tensor<2xf32>) -> tensor<1x2x3xf32>
  func.return %y : tensor<1x2x3xf32>
}
// CHECK-LABEL: func.func @conv_transpose_groups_pads_bias(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x2x3xf32>, [[W:%[0-9]+]]: memref<2x1x3xf32>, [[B:%[0-9]+]]: memref<2xf32>, [[Y:%[0-9]+]]: memref<1x2x3xf32>)
// CHECK:         ^bb0([[I0:%[0-9]+]]: index, [[I1:%[0-9]+]]: index, [[I2:%[0-9]+]]: index):
// CHECK-NEXT:      [[BV:%[0-9]+]] = "krnl.load"([[B]], [[I1]])
// CHECK-NEXT:      "krnl.store"([[BV]], [[Y]], [[I0]], [[I1]], [[I2]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 2 : i64], [0 : i64, 3 : i64]]
// CHECK:         [[COL:%[0-9]+]] = "krnl.alloc"() {{.*}} -> memref<1x3x3xf32>
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[G:%[0-9]+]]: index):
// CHECK:           "krnl.matmul"([[W]], [[X]], [[COL]], {{.*}}) {sizes = [3 : i64, 3 : i64, 1 : i64], {{.*}}strides = [1 : i64, 3 : i64, 3 : i64, 3 : i64]
// CHECK:           ^bb0([[CO:%[0-9]+]]: index, [[I:%[0-9]+]]: index, [[K:%[0-9]+]]: index):
// CHECK:             [[ROW:%[0-9]+]] = arith.addi {{%[0-9]+}}, [[I]] : index
// CHECK:             [[T:%[0-9]+]] = arith.addi [[ROW]], [[K]] : index
// CHECK-NEXT:        [[M1:%[0-9]+]] = arith.constant -1 : index
// CHECK-NEXT:        [[O:%[0-9]+]] = arith.addi [[T]], [[M1]] : index
// CHECK:             arith.cmpi sge, [[O]],
// CHECK:             "krnl.store"({{%[0-9]+}}, [[Y]], [[N]],
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 2 : i64]]

// -----
// auto_pad SAME_UPPER, x [1, 1, 3], w [1, 1, 3], strides 2: out = 3 * 2 = 6; total padding
// 2 * (3 - 1) + 3 - 6 = 1, and for ConvTranspose ONNX gives SAME_UPPER pads[start] =
// total / 2 = 0: the position is i * 2 + k with no offset.
func.func @conv_transpose_same_upper(%x: tensor<1x1x3xf32>, %w: tensor<1x1x3xf32>) -> tensor<1x1x6xf32> attributes {input_names = ["x", "w"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.ConvTranspose"(%x, %w, %none) {strides = [2], auto_pad = "SAME_UPPER", onnx_node_name = "ups"} : (tensor<1x1x3xf32>, tensor<1x1x3xf32>, none) -> tensor<1x1x6xf32>
  func.return %y : tensor<1x1x6xf32>
}
// CHECK-LABEL: func.func @conv_transpose_same_upper(
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 1 : i64], [0 : i64, 6 : i64]]
// CHECK:           "krnl.matmul"
// CHECK:           ^bb0({{%[0-9]+}}: index, [[I:%[0-9]+]]: index, [[K:%[0-9]+]]: index):
// CHECK:             [[ROW:%[0-9]+]] = arith.addi {{%[0-9]+}}, [[I]] : index
// CHECK:             [[S:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[T:%[0-9]+]] = arith.muli [[ROW]], [[S]] : index
// CHECK-NEXT:        [[O:%[0-9]+]] = arith.addi [[T]], [[K]] : index
// CHECK:             [[L6:%[0-9]+]] = arith.constant 6 : index
// CHECK-NEXT:        arith.cmpi slt, [[O]], [[L6]] : index
// CHECK:             [[L5:%[0-9]+]] = arith.constant 5 : index
// CHECK-NEXT:        arith.minsi {{%[0-9]+}}, [[L5]] : index
