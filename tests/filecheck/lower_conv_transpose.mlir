// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// ConvTranspose (lowering/conv.py) as a scatter: the output starts as the bias (or zeros); one
// krnl.iterate over (n, group, input channel in group, output channel in group, input
// position..., kernel tap...) adds x[n, cin, i] * w[cin, co, k] into
// y[n, g * (OC/g) + co, i * stride + k * dilation - pad_begin]. A target outside y adds 0 at a
// clamped address (select), so no branch is needed.

// x [1, 1, 2, 2], w [1, 1, 3, 3], strides 2: out = 2 * (2 - 1) + 3 = 5 per axis.
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
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[G:%[0-9]+]]: index, [[CI:%[0-9]+]]: index, [[CO:%[0-9]+]]: index, [[IH:%[0-9]+]]: index, [[IW:%[0-9]+]]: index, [[KH:%[0-9]+]]: index, [[KW:%[0-9]+]]: index):
// CHECK-NEXT:      [[CIN:%[0-9]+]] = arith.addi [[G]], [[CI]] : index
// CHECK-NEXT:      [[COUT:%[0-9]+]] = arith.addi [[G]], [[CO]] : index
// CHECK-NEXT:      [[S:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      [[T:%[0-9]+]] = arith.muli [[IH]], [[S]] : index
// CHECK-NEXT:      [[OH:%[0-9]+]] = arith.addi [[T]], [[KH]] : index
// CHECK-NEXT:      [[S2:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      [[T2:%[0-9]+]] = arith.muli [[IW]], [[S2]] : index
// CHECK-NEXT:      [[OW:%[0-9]+]] = arith.addi [[T2]], [[KW]] : index
// CHECK-NEXT:      [[XV:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[CIN]], [[IH]], [[IW]])
// CHECK-NEXT:      [[WV:%[0-9]+]] = "krnl.load"([[W]], [[CIN]], [[CO]], [[KH]], [[KW]])
// CHECK-NEXT:      [[P:%[0-9]+]] = arith.mulf [[XV]], [[WV]] : f32
// CHECK:           [[L5:%[0-9]+]] = arith.constant 5 : index
// CHECK-NEXT:      arith.cmpi slt, [[OH]], [[L5]] : index
// CHECK:           [[L5B:%[0-9]+]] = arith.constant 5 : index
// CHECK-NEXT:      arith.cmpi slt, [[OW]], [[L5B]] : index
// CHECK-NEXT:      [[IN2:%[0-9]+]] = arith.andi
// CHECK-NEXT:      [[IN:%[0-9]+]] = arith.andi {{%[0-9]+}}, [[IN2]] : i1
// CHECK:           [[H4:%[0-9]+]] = arith.constant 4 : index
// CHECK-NEXT:      [[HC:%[0-9]+]] = arith.minsi {{%[0-9]+}}, [[H4]] : index
// CHECK:           [[W4:%[0-9]+]] = arith.constant 4 : index
// CHECK-NEXT:      [[WC:%[0-9]+]] = arith.minsi {{%[0-9]+}}, [[W4]] : index
// CHECK-NEXT:      [[OLD:%[0-9]+]] = "krnl.load"([[Y]], [[N]], [[COUT]], [[HC]], [[WC]])
// CHECK-NEXT:      [[Z2:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      [[ADD:%[0-9]+]] = arith.select [[IN]], [[P]], [[Z2]] : f32
// CHECK-NEXT:      [[NEW:%[0-9]+]] = arith.addf [[OLD]], [[ADD]] : f32
// CHECK-NEXT:      "krnl.store"([[NEW]], [[Y]], [[N]], [[COUT]], [[HC]], [[WC]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 1 : i64], [0 : i64, 1 : i64], [0 : i64, 1 : i64], [0 : i64, 2 : i64], [0 : i64, 2 : i64], [0 : i64, 3 : i64], [0 : i64, 3 : i64]]

// -----
// 1-D, two groups, pads [1, 1], bias: x [1, 2, 3], w [2, 1, 3] (C = 2, OC/g = 1), out channels
// 2, length (3 - 1) + 3 - 2 = 3. The output starts as b[channel]; position i + k - 1.
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
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[G:%[0-9]+]]: index, [[CI:%[0-9]+]]: index, [[CO:%[0-9]+]]: index, [[I:%[0-9]+]]: index, [[K:%[0-9]+]]: index):
// CHECK-NEXT:      [[CIN:%[0-9]+]] = arith.addi [[G]], [[CI]] : index
// CHECK-NEXT:      [[COUT:%[0-9]+]] = arith.addi [[G]], [[CO]] : index
// CHECK-NEXT:      [[T:%[0-9]+]] = arith.addi [[I]], [[K]] : index
// CHECK-NEXT:      [[M1:%[0-9]+]] = arith.constant -1 : index
// CHECK-NEXT:      [[O:%[0-9]+]] = arith.addi [[T]], [[M1]] : index
// CHECK-NEXT:      [[XV:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[CIN]], [[I]])
// CHECK-NEXT:      [[WV:%[0-9]+]] = "krnl.load"([[W]], [[CIN]], [[CO]], [[K]])
// CHECK-NEXT:      [[P:%[0-9]+]] = arith.mulf [[XV]], [[WV]] : f32
// CHECK-NEXT:      [[Z:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[GE:%[0-9]+]] = arith.cmpi sge, [[O]], [[Z]] : index
// CHECK-NEXT:      [[L3:%[0-9]+]] = arith.constant 3 : index
// CHECK-NEXT:      [[LT:%[0-9]+]] = arith.cmpi slt, [[O]], [[L3]] : index
// CHECK-NEXT:      [[IN:%[0-9]+]] = arith.andi [[GE]], [[LT]] : i1
// CHECK-NEXT:      [[Z1:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[LO:%[0-9]+]] = arith.maxsi [[O]], [[Z1]] : index
// CHECK-NEXT:      [[L2:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      [[OC:%[0-9]+]] = arith.minsi [[LO]], [[L2]] : index
// CHECK-NEXT:      [[OLD:%[0-9]+]] = "krnl.load"([[Y]], [[N]], [[COUT]], [[OC]])
// CHECK-NEXT:      [[F0:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      [[ADD:%[0-9]+]] = arith.select [[IN]], [[P]], [[F0]] : f32
// CHECK-NEXT:      [[NEW:%[0-9]+]] = arith.addf [[OLD]], [[ADD]] : f32
// CHECK-NEXT:      "krnl.store"([[NEW]], [[Y]], [[N]], [[COUT]], [[OC]])
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 2 : i64], [0 : i64, 1 : i64], [0 : i64, 1 : i64], [0 : i64, 3 : i64], [0 : i64, 3 : i64]]

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
// CHECK:         ^bb0({{%[0-9]+}}: index, {{%[0-9]+}}: index, {{%[0-9]+}}: index, {{%[0-9]+}}: index, [[I:%[0-9]+]]: index, [[K:%[0-9]+]]: index):
// CHECK:           [[S:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      [[T:%[0-9]+]] = arith.muli [[I]], [[S]] : index
// CHECK-NEXT:      [[O:%[0-9]+]] = arith.addi [[T]], [[K]] : index
// CHECK-NEXT:      "krnl.load"
// CHECK:           [[L6:%[0-9]+]] = arith.constant 6 : index
// CHECK-NEXT:      arith.cmpi slt, [[O]], [[L6]] : index
// CHECK:           [[L5:%[0-9]+]] = arith.constant 5 : index
// CHECK-NEXT:      arith.minsi {{%[0-9]+}}, [[L5]] : index
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 1 : i64], [0 : i64, 1 : i64], [0 : i64, 1 : i64], [0 : i64, 3 : i64], [0 : i64, 3 : i64]]
