// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// LRN and BatchNormalization (lowering/norm.py). LRN (odd sizes; onnxruntime refuses even
// ones): first the window sums of squares over channels c - (size-1)/2 .. c + (size-1)/2
// (channels outside x read 0), stored in y; then y = x / (bias + alpha/size * sum)^beta, the power as exp(beta * log(.)).
// BatchNormalization with non-constant parameters (constant ones are folded into a Conv by
// `decompose`): y = (x - mean[c]) / sqrt(var[c] + epsilon) * scale[c] + B[c].

// LRN, size 5 (channels c - 2 .. c + 2), alpha 0.3125 (alpha/size = 0.0625, exact in f32), beta 0.75, bias 2,
// on [1, 5, 2, 2].
func.func @lrn_size5(%x: tensor<1x5x2x2xf32>) -> tensor<1x5x2x2xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.LRN"(%x) {size = 5 : i64, alpha = 0.3125 : f32, beta = 0.75 : f32, bias = 2.0 : f32, onnx_node_name = "lrn"} : (tensor<1x5x2x2xf32>) -> tensor<1x5x2x2xf32>
  func.return %y : tensor<1x5x2x2xf32>
}
// CHECK-LABEL: func.func @lrn_size5(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x5x2x2xf32>, [[Y:%[0-9]+]]: memref<1x5x2x2xf32>)
// CHECK:         [[Z:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    "krnl.store"([[Z]], [[Y]],
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[C:%[0-9]+]]: index, [[H:%[0-9]+]]: index, [[W:%[0-9]+]]: index, [[K:%[0-9]+]]: index):
// CHECK-NEXT:      [[T:%[0-9]+]] = arith.addi [[C]], [[K]] : index
// CHECK-NEXT:      [[M2:%[0-9]+]] = arith.constant -2 : index
// CHECK-NEXT:      [[CH:%[0-9]+]] = arith.addi [[T]], [[M2]] : index
// The guard (n < 1, channel in [0, 5), h, w < 2) and the clamped address (channel into [0, 4]).
// CHECK-NEXT:      [[Z:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      arith.cmpi sge, [[N]], [[Z]] : index
// CHECK-NEXT:      [[L1:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:      arith.cmpi slt, [[N]], [[L1]] : index
// CHECK-NEXT:      arith.andi
// CHECK-NEXT:      arith.cmpi sge, [[CH]], [[Z]] : index
// CHECK-NEXT:      [[L5:%[0-9]+]] = arith.constant 5 : index
// CHECK-NEXT:      arith.cmpi slt, [[CH]], [[L5]] : index
// CHECK-NEXT:      arith.andi
// CHECK-NEXT:      arith.andi
// CHECK-NEXT:      arith.cmpi sge, [[H]], [[Z]] : index
// CHECK-NEXT:      [[L2:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      arith.cmpi slt, [[H]], [[L2]] : index
// CHECK-NEXT:      arith.andi
// CHECK-NEXT:      arith.andi
// CHECK-NEXT:      arith.cmpi sge, [[W]], [[Z]] : index
// CHECK-NEXT:      [[L2B:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      arith.cmpi slt, [[W]], [[L2B]] : index
// CHECK-NEXT:      arith.andi
// CHECK-NEXT:      [[OK:%[0-9]+]] = arith.andi
// CHECK-NEXT:      [[Z1:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[NLO:%[0-9]+]] = arith.maxsi [[N]], [[Z1]] : index
// CHECK-NEXT:      [[N0:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[NC:%[0-9]+]] = arith.minsi [[NLO]], [[N0]] : index
// CHECK-NEXT:      [[Z2:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[CLO:%[0-9]+]] = arith.maxsi [[CH]], [[Z2]] : index
// CHECK-NEXT:      [[C4:%[0-9]+]] = arith.constant 4 : index
// CHECK-NEXT:      [[CC:%[0-9]+]] = arith.minsi [[CLO]], [[C4]] : index
// CHECK-NEXT:      [[Z3:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[HLO:%[0-9]+]] = arith.maxsi [[H]], [[Z3]] : index
// CHECK-NEXT:      [[H1:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:      [[HC:%[0-9]+]] = arith.minsi [[HLO]], [[H1]] : index
// CHECK-NEXT:      [[Z4:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[WLO:%[0-9]+]] = arith.maxsi [[W]], [[Z4]] : index
// CHECK-NEXT:      [[W1:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:      [[WC:%[0-9]+]] = arith.minsi [[WLO]], [[W1]] : index
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[X]], [[NC]], [[CC]], [[HC]], [[WC]])
// CHECK-NEXT:      [[PAD:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      [[G:%[0-9]+]] = arith.select [[OK]], [[V]], [[PAD]] : f32
// CHECK-NEXT:      [[OLD:%[0-9]+]] = "krnl.load"([[Y]], [[N]], [[C]], [[H]], [[W]])
// CHECK-NEXT:      [[SQ:%[0-9]+]] = arith.mulf [[G]], [[G]] : f32
// CHECK-NEXT:      [[ACC:%[0-9]+]] = arith.addf [[OLD]], [[SQ]] : f32
// CHECK-NEXT:      "krnl.store"([[ACC]], [[Y]], [[N]], [[C]], [[H]], [[W]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 5 : i64], [0 : i64, 2 : i64], [0 : i64, 2 : i64], [0 : i64, 5 : i64]]
// CHECK:         ^bb0([[N2:%[0-9]+]]: index, [[C2:%[0-9]+]]: index, [[H2:%[0-9]+]]: index, [[W2:%[0-9]+]]: index):
// CHECK-NEXT:      [[BIAS:%[0-9]+]] = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:      [[AS:%[0-9]+]] = arith.constant 6.250000e-02 : f32
// CHECK-NEXT:      [[SUM:%[0-9]+]] = "krnl.load"([[Y]], [[N2]], [[C2]], [[H2]], [[W2]])
// CHECK-NEXT:      [[P1:%[0-9]+]] = arith.mulf [[AS]], [[SUM]] : f32
// CHECK-NEXT:      [[B:%[0-9]+]] = arith.addf [[BIAS]], [[P1]] : f32
// CHECK-NEXT:      [[BETA:%[0-9]+]] = arith.constant 7.500000e-01 : f32
// CHECK-NEXT:      [[LG:%[0-9]+]] = math.log [[B]] : f32
// CHECK-NEXT:      [[BL:%[0-9]+]] = arith.mulf [[BETA]], [[LG]] : f32
// CHECK-NEXT:      [[PW:%[0-9]+]] = math.exp [[BL]] : f32
// CHECK-NEXT:      [[XV:%[0-9]+]] = "krnl.load"([[X]], [[N2]], [[C2]], [[H2]], [[W2]])
// CHECK-NEXT:      [[R:%[0-9]+]] = arith.divf [[XV]], [[PW]] : f32
// CHECK-NEXT:      "krnl.store"([[R]], [[Y]], [[N2]], [[C2]], [[H2]], [[W2]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 5 : i64], [0 : i64, 2 : i64], [0 : i64, 2 : i64]]

// -----
// LRN, size 3 (c - 1 .. c + 1), default alpha, beta, bias (1e-4, 0.75, 1): alpha/size = 3.33e-5.
func.func @lrn_defaults(%x: tensor<1x3x1x1xf32>) -> tensor<1x3x1x1xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.LRN"(%x) {size = 3 : i64, onnx_node_name = "lrn"} : (tensor<1x3x1x1xf32>) -> tensor<1x3x1x1xf32>
  func.return %y : tensor<1x3x1x1xf32>
}
// CHECK-LABEL: func.func @lrn_defaults(
// CHECK:         ^bb0({{%[0-9]+}}: index, [[C:%[0-9]+]]: index, {{%[0-9]+}}: index, {{%[0-9]+}}: index, [[K:%[0-9]+]]: index):
// CHECK-NEXT:      [[T:%[0-9]+]] = arith.addi [[C]], [[K]] : index
// CHECK-NEXT:      [[M1:%[0-9]+]] = arith.constant -1 : index
// CHECK-NEXT:      [[CH:%[0-9]+]] = arith.addi [[T]], [[M1]] : index
// CHECK:           arith.cmpi sge, [[CH]], {{%[0-9]+}} : index
// CHECK-NEXT:      [[L3:%[0-9]+]] = arith.constant 3 : index
// CHECK-NEXT:      arith.cmpi slt, [[CH]], [[L3]] : index
// CHECK:           arith.maxsi [[CH]], {{%[0-9]+}} : index
// CHECK-NEXT:      [[L2:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      arith.minsi {{%[0-9]+}}, [[L2]] : index
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 3 : i64], [0 : i64, 1 : i64], [0 : i64, 1 : i64], [0 : i64, 3 : i64]]
// CHECK:         arith.constant 1.000000e+00 : f32
// CHECK-NEXT:    arith.constant 3.3333333{{[0-9]*}}e-05 : f32
// CHECK:         arith.constant 7.500000e-01 : f32
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 3 : i64], [0 : i64, 1 : i64], [0 : i64, 1 : i64]]

// -----
// BatchNormalization (inference) on [2, 3, 4], epsilon 0.001: every parameter read at the
// channel index.
func.func @batchnorm(%x: tensor<2x3x4xf32>, %s: tensor<3xf32>, %b: tensor<3xf32>, %m: tensor<3xf32>, %v: tensor<3xf32>) -> tensor<2x3x4xf32> attributes {input_names = ["x", "s", "b", "m", "v"], output_names = ["y"], onnx_opset = 15 : i64} {
  %y, %rm, %rv = "onnx.BatchNormalization"(%x, %s, %b, %m, %v) {epsilon = 0.001 : f32, onnx_node_name = "bn"} : (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4xf32>, none, none)
  func.return %y : tensor<2x3x4xf32>
}
// CHECK-LABEL: func.func @batchnorm(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<2x3x4xf32>, [[S:%[0-9]+]]: memref<3xf32>, [[B:%[0-9]+]]: memref<3xf32>, [[M:%[0-9]+]]: memref<3xf32>, [[V:%[0-9]+]]: memref<3xf32>, [[Y:%[0-9]+]]: memref<2x3x4xf32>)
// CHECK-NOT:     krnl.alloc
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[C:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:      [[VV:%[0-9]+]] = "krnl.load"([[V]], [[C]])
// CHECK-NEXT:      [[EPS:%[0-9]+]] = arith.constant 1.000000e-03 : f32
// CHECK-NEXT:      [[VE:%[0-9]+]] = arith.addf [[VV]], [[EPS]] : f32
// CHECK-NEXT:      [[SD:%[0-9]+]] = math.sqrt [[VE]] : f32
// CHECK-NEXT:      [[XV:%[0-9]+]] = "krnl.load"([[X]], [[I]], [[C]], [[J]])
// CHECK-NEXT:      [[MV:%[0-9]+]] = "krnl.load"([[M]], [[C]])
// CHECK-NEXT:      [[XC:%[0-9]+]] = arith.subf [[XV]], [[MV]] : f32
// CHECK-NEXT:      [[NRM:%[0-9]+]] = arith.divf [[XC]], [[SD]] : f32
// CHECK-NEXT:      [[SV:%[0-9]+]] = "krnl.load"([[S]], [[C]])
// CHECK-NEXT:      [[SC:%[0-9]+]] = arith.mulf [[NRM]], [[SV]] : f32
// CHECK-NEXT:      [[BV:%[0-9]+]] = "krnl.load"([[B]], [[C]])
// CHECK-NEXT:      [[R:%[0-9]+]] = arith.addf [[SC]], [[BV]] : f32
// CHECK-NEXT:      "krnl.store"([[R]], [[Y]], [[I]], [[C]], [[J]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64], [0 : i64, 4 : i64]]
